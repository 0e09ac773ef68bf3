/**
 * Webhook bursts: the real API and worker processes, BENCH_DELIVERIES (20,000) signed deliveries from three
 * integrations (one per provider) with 5 % redeliveries, at BENCH_CONNECTIONS (128). Prints accepted/s,
 * p50/p99 and the 429s; then replays every throttled delivery the way a provider retries (after its
 * Retry-After) and prints transcript events recorded versus distinct events sent, which must be equal.
 *   npm run bench:webhooks     BENCH_DELIVERIES, BENCH_CONNECTIONS, INBOUND_WEBHOOK_RATE_POINTS (per integration per 10 s)
 */
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import IORedis from 'ioredis';
import { loadConfig } from '../src/config';
import { createDb, migrateToLatest } from '../src/db';
import { createApiKeyService } from '../src/domains/api-keys/service';
import { createAuditService } from '../src/domains/audit/service';
import { createWorkspaceService } from '../src/domains/workspaces/service';
import { createWebhookService } from '../src/domains/webhooks/service';
import { createQueueHub } from '../src/queue/hub';
import { frontEvent, helpscoutConversation, rawOf, signedHeaders, zendeskEvent, type WebhookProvider } from '../test/helpers/webhooks';
import { benchEnv, freshDatabase, redisCalls, start, stop, type Env } from './processes';
import { createReport, runBench } from './report';

const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 20_000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 128);
const PORT = 18091;
const report = createReport('webhooks', {
  title: 'Webhook bursts: signed deliveries, throttled, replayed after Retry-After',
  settings: { deliveries: DELIVERIES, connections: CONNECTIONS, integrations: 3, redeliveries: '5 %' },
});

interface Delivery {
  provider: WebhookProvider;
  integrationId: string;
  secret: string;
  raw: string;
  event?: string;
}

async function main() {
  const database = await freshDatabase('helpdesk_bench_webhooks');
  const env: Env = benchEnv(database.url, 'webhooks', {
    PG_POOL_MAX: '16',
    WORKER_CONCURRENCY: '8',
    // A rate the burst exceeds, so the run shows 429s and the replay that must recover every one of them.
    INBOUND_WEBHOOK_RATE_POINTS: process.env.INBOUND_WEBHOOK_RATE_POINTS ?? '2500',
    INBOUND_WEBHOOK_RATE_WINDOW_SECONDS: '10',
  });
  const config = loadConfig(env);
  report.settings({ 'throttle per integration per 10 s': env.INBOUND_WEBHOOK_RATE_POINTS! });
  const prefix = config.REDIS_PREFIX;
  const handle = createDb(config);
  await migrateToLatest(handle.db);
  const audit = createAuditService({ db: handle.db });
  const workspaces = createWorkspaceService({ db: handle.db, audit, apiKeys: createApiKeyService({ db: handle.db, config, audit }) });
  const ws = await workspaces.bootstrap({ workspace: 'Bench', ownerEmail: 'bench@bench.test', ownerName: 'Bench' });
  const redis = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  // Integrations are created through the service (sealed secrets), as the API would.
  const queues = createQueueHub(redis, () => prefix, config);
  const webhooks = createWebhookService({ db: handle.db, config, audit });
  const owner = { kind: 'user', tenantId: ws.tenant_id, userId: ws.owner_user_id, role: 'owner', apiKeyId: null, scopes: null, agentIds: [] } as never;
  const integrations = await Promise.all(
    (['zendesk', 'front', 'helpscout'] as const).map(async (provider) => {
      const secret = randomBytes(24).toString('base64url');
      const created = await webhooks.createIntegration(owner, { provider, name: provider, signing_secret: secret });
      return { provider, integrationId: created.id, secret };
    }),
  );

  // Distinct events over a pool of tickets per provider (several events per ticket, as in real traffic).
  const sent: Delivery[] = [];
  let distinct = 0;
  const next = (n: number): Delivery => {
    if (n % 20 === 0 && sent.length > 0) return sent[Math.floor(Math.random() * sent.length)]!;
    distinct += 1;
    const i = integrations[n % 3]!;
    const ticket = 1000 + Math.floor(Math.random() * 2000);
    const d: Delivery =
      i.provider === 'zendesk'
        ? { ...i, raw: rawOf(zendeskEvent({ ticketId: ticket, eventId: `zen-${randomBytes(8).toString('hex')}` })) }
        : i.provider === 'front'
          ? { ...i, raw: rawOf(frontEvent({ conversationId: `cnv_${ticket}`, eventId: `evt_${randomBytes(8).toString('hex')}` })) }
          : { ...i, raw: rawOf(helpscoutConversation({ id: ticket, subject: `S ${randomBytes(6).toString('hex')}` })), event: 'convo.customer.reply.created' };
    sent.push(d);
    return d;
  };
  const request = (d: Delivery) => ({
    method: 'POST' as const,
    path: `/v1/webhooks/${d.provider}/${d.integrationId}`,
    headers: signedHeaders(d.provider, d.secret, d.raw, d.event ? { event: d.event } : {}),
    body: d.raw,
  });

  const worker = await start('workers/index.ts', { ...env, LOG_LEVEL: 'info' }, /workers started/);
  const api = await start('src/server.ts', { ...env, PORT: String(PORT) }, null, PORT);
  await autocannon({ url: `http://127.0.0.1:${PORT}/healthz`, connections: 8, duration: 1 });

  console.log(`node ${process.version}, ${DELIVERIES} signed deliveries (5% redeliveries) from 3 integrations, ${CONNECTIONS} connections`);
  const throttled: Delivery[] = [];
  let n = 0;
  const before = await redisCalls(redis);
  const r = await autocannon({
    url: `http://127.0.0.1:${PORT}`,
    connections: CONNECTIONS,
    amount: DELIVERIES,
    requests: [
      {
        setupRequest: (req, context) => {
          const d = next(n++);
          (context as { d?: Delivery }).d = d;
          return { ...req, ...request(d) };
        },
        onResponse: (status, _body, context) => {
          if (status === 429) throttled.push((context as { d: Delivery }).d);
        },
      },
    ],
  });
  const calls = (await redisCalls(redis)) - before;
  const accepted = r['2xx'];
  report.figure({ name: 'burst: accepted', value: accepted / (r.duration || 1), unit: 'deliveries/s' });
  report.figure({ name: 'burst: p50', value: r.latency.p50, unit: 'ms' });
  report.figure({ name: 'burst: p99', value: r.latency.p99, unit: 'ms' });
  report.figure({ name: 'burst: 2xx', value: accepted, unit: 'responses' });
  report.figure({ name: 'burst: 429 (throttled)', value: throttled.length, unit: 'responses' });
  report.figure({ name: 'burst: other non-2xx', value: r.non2xx - throttled.length, unit: 'responses' });
  report.figure({ name: 'burst: Redis commands per delivery', value: calls / DELIVERIES, unit: 'commands' });
  console.log(
    `burst: ${(accepted / (r.duration || 1)).toFixed(0)} accepted/s   p50 ${r.latency.p50} ms   p99 ${r.latency.p99} ms   ` +
      `2xx ${accepted}   429 ${throttled.length}   other non-2xx ${r.non2xx - throttled.length}   Redis cmds/delivery ${(calls / DELIVERIES).toFixed(1)}`,
  );

  // The provider's retry: each throttled delivery again, after the window, until it is accepted.
  const replayStarted = Date.now();
  let pending = throttled;
  let rounds = 0;
  while (pending.length > 0 && rounds < 20) {
    rounds += 1;
    await new Promise((res) => setTimeout(res, 10_500));
    const still: Delivery[] = [];
    for (let i = 0; i < pending.length; i += 64) {
      await Promise.all(
        pending.slice(i, i + 64).map(async (d) => {
          const q = request(d);
          const res = await fetch(`http://127.0.0.1:${PORT}${q.path}`, { method: 'POST', headers: q.headers, body: q.body });
          if (res.status !== 200) still.push(d);
        }),
      );
    }
    pending = still;
  }
  const events = Number((await handle.db.selectFrom('transcript_events').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n);
  console.log(`replay: ${throttled.length} throttled deliveries replayed in ${rounds} round(s), ${((Date.now() - replayStarted) / 1000).toFixed(1)} s; ${pending.length} still refused`);
  console.log(`transcript events ${events} / ${distinct} distinct events sent`);
  console.log(`${events === distinct && pending.length === 0 ? 'PASS' : 'FAIL'}: nothing lost, nothing doubled`);
  report.figure({ name: 'replay: rounds', value: rounds, unit: 'rounds' });
  report.figure({ name: 'replay: still refused', value: pending.length, unit: 'deliveries', target: '0 (issue 7)', met: pending.length === 0 });
  report.figure({ name: 'transcript events recorded', value: events, unit: 'events', target: `= distinct events sent (${distinct}): nothing lost, nothing doubled (issue 7)`, met: events === distinct });

  await stop(api);
  await stop(worker);
  await queues.close();
  redis.disconnect();
  await handle.close();
  await database.drop();
}

runBench(main);
