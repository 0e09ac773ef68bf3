/**
 * Services split by process (issue 35): the API builds `createApiServices` (src/services/api.ts), the workers
 * `createWorkerServices` (src/services/worker.ts), both on `createSharedServices` (src/services/shared.ts), so a
 * worker builds nothing it does not run and the API builds no job's engine.
 *
 * Two checks that fail when the split regresses:
 * - what each process loads: the import graph from its entry (workers/index.ts, src/server.ts), as compiled (an
 *   import only types use loads nothing, so a domain naming the principal's type is not a worker loading the API),
 *   reaches none of the other process's pieces; each failure names the chain of imports that reaches the piece;
 * - what each container holds: the objects the two factories return, against the test runtime, and their types.
 */
import { buildRegistry, defaultProcessorGroups } from '../workers/registry';
import { createApiServices, type ApiServices } from '../src/services/api';
import { createSharedServices } from '../src/services/shared';
import { createWorkerServices, type WorkerServices } from '../src/services/worker';
import { createLogger } from '../src/lib/logger';
import { named, reachableFrom, readTree, runtimeImportsOf, type Sources } from './helpers/imports';
import { useTestApp } from './helpers/use-test-app';

/** A path rule: a file, or every file under a folder (ending in '/'), or a pattern. */
type Rule = string | RegExp;
const matches = (file: string, rule: Rule) => (typeof rule === 'string' ? (rule.endsWith('/') ? file.startsWith(rule) : file === rule) : rule.test(file));

/** Each file `entry` loads that a rule forbids, with the chain of imports that loads it. */
function loadedAgainst(sources: Sources, entry: string, forbidden: readonly Rule[]): string[] {
  const chains = reachableFrom(entry, runtimeImportsOf(sources));
  return [...chains]
    .filter(([file]) => forbidden.some((rule) => matches(file, rule)))
    .map(([file, chain]) => `${file}, loaded by ${entry}: ${chain.map(named).join(' → ')}`)
    .sort();
}

/**
 * What only requests use. The principal's type and its rules (identity/principal.ts, roles.ts, scopes.ts) are every
 * domain's and stay allowed; authenticating (identity's service and store) is the API's.
 */
const API_ONLY: readonly Rule[] = [
  'src/http/',
  'src/limits/',
  'src/services/api.ts',
  'src/domains/identity/service.ts',
  'src/domains/identity/store.ts',
  'src/domains/idempotency/service.ts',
  'src/intake/edge.ts',
  'src/domains/ingest/edge.ts',
  'src/domains/webhooks/edge.ts',
  'src/domains/web-chat/',
  'src/domains/provider-hooks/',
  /^src\/domains\/[^/]+\/routes\.ts$/,
];

/** What only jobs run. */
const WORKER_ONLY: readonly Rule[] = [
  'workers/',
  'src/services/worker.ts',
  'src/domains/webhook-endpoints/delivery.ts',
  'src/domains/webhooks/worker.ts',
  'src/domains/ingest/worker.ts',
  'src/domains/inbound-files/fair-queue.ts',
  'src/domains/idempotency/prune.ts',
  'src/domains/schedules/refresh.ts',
  'src/domains/schedules/ical.ts',
  'src/domains/macros/time-rules.ts',
];

const WORKER_ENTRY = 'workers/index.ts';
const API_ENTRY = 'src/server.ts';

describe('what each process loads', () => {
  const sources = readTree('src', 'workers');

  test('the walk sees each process build its own pieces (else the checks below could pass by seeing nothing)', () => {
    const worker = reachableFrom(WORKER_ENTRY, runtimeImportsOf(sources));
    const api = reachableFrom(API_ENTRY, runtimeImportsOf(sources));
    for (const file of ['src/services/worker.ts', 'src/services/shared.ts', 'src/domains/webhook-endpoints/delivery.ts', 'src/domains/ingest/worker.ts', 'src/domains/tickets/service.ts']) {
      expect([file, worker.has(file)]).toEqual([file, true]);
    }
    for (const file of ['src/services/api.ts', 'src/services/shared.ts', 'src/limits/index.ts', 'src/domains/identity/service.ts', 'src/domains/ingest/edge.ts', 'src/http/router.ts']) {
      expect([file, api.has(file)]).toEqual([file, true]);
    }
  });

  test('a worker loads none of the API-only pieces: no router, budgets, authentication, idempotency service, intake edge or route', () => {
    expect(loadedAgainst(sources, WORKER_ENTRY, API_ONLY)).toEqual([]);
  });

  test('the API loads none of the worker-only pieces: no processor, webhook sender, ingest or webhook writer, files turns or prune', () => {
    expect(loadedAgainst(sources, API_ENTRY, WORKER_ONLY)).toEqual([]);
  });

  test('a breach is named with its chain: a processor importing the budgets, or the app importing the webhook sender', () => {
    const broken = new Map(sources);
    broken.set('workers/processors/maintenance.ts', `import { createLimits } from '../../src/limits';\nexport const built = createLimits;\n${sources.get('workers/processors/maintenance.ts')}`);
    const found = loadedAgainst(broken, WORKER_ENTRY, API_ONLY);
    // Every file of the budgets is named (and what they load: src/http/errors.ts), each with its chain.
    expect(found).toContainEqual(
      expect.stringMatching(/^src\/limits\/index\.ts, loaded by workers\/index\.ts: workers\/index\.ts:\d+ imports '\.\/runtime' .* → workers\/processors\/maintenance\.ts:1 imports '\.\.\/\.\.\/src\/limits' \(src\/limits\/index\.ts\)$/),
    );
    expect(found.every((f) => /^src\/(limits|http)\//.test(f))).toBe(true);
    // Only types: nothing is loaded, nothing is named.
    const typeOnly = new Map(sources);
    typeOnly.set('workers/processors/maintenance.ts', `import type { Limits } from '../../src/limits';\nexport type L = Limits;\n${sources.get('workers/processors/maintenance.ts')}`);
    expect(loadedAgainst(typeOnly, WORKER_ENTRY, API_ONLY)).toEqual([]);

    const api = new Map(sources);
    api.set('src/app.ts', `import { createWebhookDelivery } from './domains/webhook-endpoints/delivery';\nexport const sender = createWebhookDelivery;\n${sources.get('src/app.ts')}`);
    expect(loadedAgainst(api, API_ENTRY, WORKER_ONLY)).toEqual([expect.stringMatching(/^src\/domains\/webhook-endpoints\/delivery\.ts, loaded by src\/server\.ts: .* → src\/app\.ts:1 imports '\.\/domains\/webhook-endpoints\/delivery'/)]);
  });
});

/** True when `T` has none of the keys `K`. */
type HasNone<T, K extends PropertyKey> = [Extract<keyof T, K>] extends [never] ? true : false;
/** Checked by tsc (the typecheck covers test/): a call with `false` does not compile. Does nothing at run time. */
const typeIs = <T extends true>(_?: T): void => {};

/** The API's pieces a worker must not hold, and the workers' pieces the API must not hold. */
const API_KEYS = ['later', 'identity', 'limits', 'apiKeys', 'members', 'agents', 'workspaces', 'teams', 'savedViews', 'ingest', 'webChat', 'slaPolicies', 'schedules', 'work', 'settings', 'helpCentre', 'articles', 'webhooks', 'webhookIntake', 'webhookEndpoints', 'providerHooks'] as const;
const WORKER_KEYS = ['ingestProcessor', 'fetchTurns', 'intakePriority', 'webhookProcessor', 'webhookDelivery', 'scheduleFeeds', 'timeRules'] as const;

describe('what each container holds', () => {
  const { ctx } = useTestApp();
  const deps = () => ({ db: ctx.db, config: ctx.config, queues: ctx.runtime.queues, logger: createLogger(ctx.config, ctx.logs), redis: ctx.runtime.redis });

  test('the workers\' container holds no API piece: no limits, identity, intake edges, web chat, provider hooks or after-answer work', () => {
    typeIs<HasNone<WorkerServices, (typeof API_KEYS)[number]>>();
    const worker = createWorkerServices(deps());
    for (const key of API_KEYS) expect([key, key in worker]).toEqual([key, false]);
    // Of idempotency, only the hourly prune: no fingerprints, claims or sealed answers.
    expect(Object.keys(worker.idempotency)).toEqual(['pruneExpired']);
    // Of intake priority, the pressure reading and background work's yield: the lanes are the API's.
    expect(Object.keys(worker.intakePriority).sort()).toEqual(['background', 'pressure']);
  });

  test('the API\'s container holds no job engine: no ingest or webhook writer, webhook sender, files turns or background yield', () => {
    typeIs<HasNone<ApiServices, (typeof WORKER_KEYS)[number]>>();
    const api = createApiServices({ ...deps(), bus: ctx.runtime.bus });
    for (const key of WORKER_KEYS) expect([key, key in api]).toEqual([key, false]);
    expect(Object.keys(api.idempotency)).toEqual(expect.arrayContaining(['check', 'fingerprint', 'start', 'finish', 'release']));
  });

  test('what both hold is the shared factory\'s, plus idempotency (the service for the API, the prune for the workers)', () => {
    const api = Object.keys(createApiServices({ ...deps(), bus: ctx.runtime.bus }));
    const worker = new Set(Object.keys(createWorkerServices(deps())));
    const shared = Object.keys(createSharedServices(deps(), {}));
    expect(api.filter((k) => worker.has(k)).sort()).toEqual([...shared, 'idempotency'].sort());
  });

  test('the workers\' container is enough for the whole job table: every job has its processor', () => {
    const worker = createWorkerServices(deps());
    const registry = buildRegistry(defaultProcessorGroups(worker, ctx.config, ctx.runtime.redis));
    expect(registry.queues().length).toBeGreaterThan(0);
  });
});
