/**
 * One hook for the app every component test starts (issue 35): `useTestApp(options)` registers the
 * beforeAll that starts the app (with its env), optionally its workers and some workspaces, and the afterAll
 * that closes it all. It returns live handles, usable anywhere a test body runs:
 *
 *   const { ctx, ws } = useTestApp({ env: { JOB_WAIT_MS: '200' }, workers: true, workspaces: 1 });
 *   test('…', async () => { await ctx.http.get('/v1/members').set(bearer(ws.ownerKey)); });
 *
 * `ctx` and each workspace are stable handles (proxies) that read through to the values beforeAll made, so
 * they can be destructured at the top of a file or a describe block; reading one before beforeAll has run
 * (at module level, in a describe body) throws.
 */
import { startTestApp, type ContextOptions, type TestContext } from './context';
import { createWorkspace, type Workspace } from './factories';
import type { WorkerSet } from '../../workers/runtime';

export interface UseTestAppOptions extends Omit<ContextOptions, 'env'> {
  /** The app's env; a function is read in beforeAll (for env that depends on something an earlier hook started). */
  env?: Record<string, string> | (() => Record<string, string>);
  /** Start the workers once the app is up (they close with it). */
  workers?: boolean;
  /** How many workspaces to create once the app (and its workers) are up; the first is also `ws`. */
  workspaces?: number;
  /** Runs last in beforeAll, with the app, workers and workspaces up. */
  setup?: (app: TestApp<number>) => Promise<void> | void;
  /** The beforeAll's time-out in ms (jest's testTimeout unless set). */
  timeout?: number;
  /** Runs first in afterAll, before the app closes (e.g. kill child processes that use its database). */
  teardown?: () => Promise<void> | void;
}

/** `n` workspaces, as a tuple so destructuring `[ws, other]` gives each its type. */
type WorkspaceTuple<N extends number, R extends Workspace[] = []> = number extends N ? Workspace[] : R['length'] extends N ? R : WorkspaceTuple<N, [...R, Workspace]>;

export interface TestApp<N extends number = number> {
  /** The running app (a live handle: valid inside hooks and tests). */
  readonly ctx: TestContext;
  /** The first workspace created (`options.workspaces` ≥ 1). */
  readonly ws: Workspace;
  /** Every workspace created, in order (each a live handle). */
  readonly workspaces: Readonly<WorkspaceTuple<N>>;
  /** The workers started by `workers: true`. */
  readonly workers: WorkerSet;
}

/** A stand-in for a value made later: every property read or check goes to `read()` at the time it is made. */
export function live<T extends object>(read: () => T): T {
  return new Proxy({} as T, {
    get: (_, key) => Reflect.get(read(), key),
    set: (_, key, value) => Reflect.set(read(), key, value),
    has: (_, key) => Reflect.has(read(), key),
    ownKeys: () => Reflect.ownKeys(read()),
    getOwnPropertyDescriptor: (_, key) => {
      const d = Reflect.getOwnPropertyDescriptor(read(), key);
      return d && { ...d, configurable: true };
    },
  });
}

export function useTestApp<N extends number = 0>(options: UseTestAppOptions & { workspaces?: N } = {}): TestApp<N> {
  const { env, workers: wantWorkers, workspaces: count = 0, setup, teardown, timeout, ...contextOptions } = options;
  let ctx: TestContext | undefined;
  let workers: WorkerSet | undefined;
  const made: Workspace[] = [];
  const need = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`useTestApp: ${what} read before beforeAll made it (read it inside a hook or test)`);
    return value;
  };

  const handles = Array.from({ length: count }, (_, i) => live(() => need(made[i], `workspace ${i}`)));
  const app: TestApp<N> = {
    ctx: live(() => need(ctx, 'ctx')),
    ws: handles[0] ?? live<Workspace>(() => need<Workspace>(undefined, 'ws (pass workspaces: 1 or more)')),
    workspaces: handles as unknown as Readonly<WorkspaceTuple<N>>,
    get workers() {
      return need(workers, 'workers (pass workers: true)');
    },
  };

  beforeAll(async () => {
    ctx = await startTestApp({ ...contextOptions, env: typeof env === 'function' ? env() : env });
    if (wantWorkers) workers = await ctx.startWorkers();
    for (let i = 0; i < count; i++) made.push(await createWorkspace(ctx));
    await setup?.(app as unknown as TestApp<number>);
  }, timeout);
  afterAll(async () => {
    try {
      await teardown?.();
    } finally {
      await ctx?.close();
    }
  });
  return app;
}
