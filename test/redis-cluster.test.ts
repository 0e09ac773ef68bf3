/**
 * The service on a Redis Cluster (issue 20): a three-master cluster of this suite's own (the system's
 * redis-server, its own ports), REDIS_CLUSTER_NODES set, the real API and worker processes. Intake answers
 * from the worker through sharded pub/sub; each queue's keys share one hash slot and different queues get
 * different slots; worker metrics (MULTI, MGET over one hash tag) and queue gauges reach /metrics;
 * readiness asks every master, so one master down is "not ready", not a MOVED error later.
 *
 * The intake, exactly-once, SIGKILL and dashboard suites also run on a cluster: scripts/test.sh runs them a
 * second time with HD_TEST_REDIS=cluster.
 */
import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { shardName, shardOf } from '../src/queue/jobs';
import { loadConfig } from '../src/config';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { smsPayload } from './helpers/payloads';
import { spawnApi, spawnWorker, workerStarted, type ApiProcess, type WorkerProcess } from './helpers/processes';
import { startOwnRedisCluster, type OwnRedisCluster } from './helpers/redis-server';
import { eventually } from './helpers/wait';

const OPS = { OPS_USER: 'ops', OPS_PASSWORD: 'cluster-ops-password' };
const SHARDS = 4;
const basic = `Basic ${Buffer.from(`${OPS.OPS_USER}:${OPS.OPS_PASSWORD}`).toString('base64')}`;

let cluster: OwnRedisCluster;
let ctx: TestContext;
let ws: Workspace;
let api: ApiProcess;
let worker: WorkerProcess;
let probe: Cluster;

beforeAll(async () => {
  cluster = await startOwnRedisCluster();
  ctx = await startTestApp({ env: { REDIS_CLUSTER_NODES: cluster.nodes, INTAKE_QUEUE_SHARDS: String(SHARDS), ...OPS } });
  ws = await createWorkspace(ctx);
  await ctx.http.put('/v1/channels/sms').set(bearer(ws.ownerKey)).send({ config: {} }).expect(200);
  const env = { REDIS_CLUSTER_NODES: cluster.nodes, INTAKE_QUEUE_SHARDS: String(SHARDS), ...OPS, WORKER_METRICS_PUSH_MS: '200' };
  worker = spawnWorker(ctx.config, { env, detached: true });
  api = await spawnApi(ctx.config, { env });
  await workerStarted(worker);
  probe = new Cluster(cluster.nodes.split(',').map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })));
  probe.on('error', () => {});
}, 60_000);

afterAll(async () => {
  for (const p of [api?.proc, worker?.proc]) if (p && p.exitCode === null && p.pid) process.kill(-p.pid, 'SIGKILL');
  probe?.disconnect();
  await ctx?.close();
  await cluster?.destroy();
});

const ingest = (payload: Record<string, unknown>, tenantId = ws.tenantId) =>
  fetch(`${api.url}/v1/ingest/sms`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tenant_id: tenantId, payload }) });

test('REDIS_CLUSTER_NODES takes host:port pairs and refuses anything else', () => {
  expect(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-2.internal:7001' }).REDIS_CLUSTER_NODES).toEqual([
    { host: '10.0.0.1', port: 7000 },
    { host: 'redis-2.internal', port: 7001 },
  ]);
  expect(loadConfig({ REDIS_CLUSTER_NODES: '' }).REDIS_CLUSTER_NODES).toBeUndefined();
  for (const bad of ['10.0.0.1', ':7000', 'host:0', 'host:70000', 'host:port']) expect(() => loadConfig({ REDIS_CLUSTER_NODES: bad })).toThrow(/REDIS_CLUSTER_NODES/);
});

test('intake on the cluster: the worker answers through sharded pub/sub, once; a redelivery is a duplicate', async () => {
  const payload = smsPayload({});
  const first = await ingest(payload);
  expect(first.status).toBe(200);
  const body = (await first.json()) as { ticket_id: string; was_created: boolean; was_duplicate: boolean };
  expect(body).toMatchObject({ was_created: true, was_duplicate: false });
  const again = await ingest(payload);
  expect(again.status).toBe(200);
  expect(await again.json()).toMatchObject({ ticket_id: body.ticket_id, was_duplicate: true });
  // Concurrent distinct messages, each answered (not 202) and stored once.
  const burst = Array.from({ length: 40 }, () => smsPayload({}));
  const answers = await Promise.all(burst.map((p) => ingest(p)));
  expect(answers.map((a) => a.status)).toEqual(burst.map(() => 200));
  const listed = (await ctx.http.get('/v1/ingest/deliveries?limit=100').set(bearer(ws.ownerKey))).body.deliveries as { provider_message_id: string }[];
  const ids = listed.map((d) => d.provider_message_id);
  for (const p of [payload, ...burst]) expect(ids.filter((id) => id === p.MessageSid)).toHaveLength(1);
});

test("each queue's keys share one hash slot, and the queues are spread over slots", async () => {
  const prefix = ctx.config.REDIS_PREFIX;
  const slotsOf = async (queue: string) => {
    const keys: string[] = [];
    for (const node of probe.nodes('master')) keys.push(...(await node.keys(`{${prefix}:${queue}}:*`)));
    return new Set(await Promise.all(keys.map((k) => probe.cluster('KEYSLOT', k) as Promise<number>)));
  };
  const ingestSlots = await slotsOf('ingest');
  expect(ingestSlots.size).toBe(1);
  // Every queue has its scheduler or meta keys by now; each queue is one slot, and not all the same one.
  const all = await Promise.all(['ingest', 'ingest-1', 'ingest-2', 'ingest-3', 'webhooks', 'maintenance', 'events', 'rollups'].map(slotsOf));
  for (const s of all) expect(s.size).toBeLessThanOrEqual(1);
  expect(new Set(all.flatMap((s) => [...s])).size).toBeGreaterThan(1);
});

test('intake is queued on the shard of its workspace: workspaces spread over the shards, each message answered once', async () => {
  const workspaces = await Promise.all(Array.from({ length: 8 }, () => createWorkspace(ctx)));
  for (const w of workspaces) await ctx.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send({ config: {} }).expect(200);
  const answers = await Promise.all(workspaces.map((w) => ingest(smsPayload({}), w.tenantId)));
  expect(answers.map((a) => a.status)).toEqual(workspaces.map(() => 200));
  const used = new Set<number>();
  for (let shard = 0; shard < SHARDS; shard++) {
    const jobs = await ctx.runtime.queues.queue(shardName('ingest', shard)).getJobs(['completed'], 0, 500);
    const tenants = jobs.flatMap((j) => (j.data as { items: { tenant_id: string }[] }).items.map((i) => i.tenant_id));
    for (const t of tenants) expect(shardOf(t, SHARDS)).toBe(shard);
    if (tenants.some((t) => workspaces.some((w) => w.tenantId === t))) used.add(shard);
  }
  expect(used.size).toBeGreaterThan(1);
  for (const w of workspaces) {
    const listed = (await ctx.http.get('/v1/ingest/deliveries').set(bearer(w.ownerKey))).body.deliveries as unknown[];
    expect(listed).toHaveLength(1);
  }
});

test('shardOf is stable, within range, and spreads workspaces evenly', () => {
  const ids = Array.from({ length: 4000 }, () => randomUUID());
  const counts = [0, 0, 0, 0];
  for (const id of ids) {
    const s = shardOf(id, 4);
    expect(shardOf(id, 4)).toBe(s);
    counts[s]! += 1;
  }
  for (const c of counts) expect(c).toBeGreaterThan(800);
  expect(shardOf(ids[0]!, 1)).toBe(0);
});

test('/metrics and the dashboard answer on the cluster, with the worker\'s job metrics', async () => {
  await ingest(smsPayload({}));
  const text = await eventually(
    async () => {
      const res = await fetch(`${api.url}/metrics`, { headers: { authorization: basic } });
      if (res.status !== 200) return undefined;
      const t = await res.text();
      return t.includes('helpdesk_job_duration_seconds_count{') ? t : undefined;
    },
    10_000,
    'worker job metrics on /metrics',
  );
  expect(text).toMatch(/helpdesk_queue_jobs\{queue="ingest",state="waiting"\} \d+/);
  const board = await fetch(`${api.url}/admin/queues/api/queues`, { headers: { authorization: basic } });
  expect(board.status).toBe(200);
  const queues = ((await board.json()) as { queues: { name: string }[] }).queues.map((q) => q.name);
  expect(queues).toEqual(expect.arrayContaining(['ingest', 'ingest-1', 'ingest-2', 'ingest-3', 'webhooks', 'webhooks-3', 'deliveries']));
});

test('/readyz asks every master: ready while all answer, 503 once one is down', async () => {
  const ready = await fetch(`${api.url}/readyz`);
  expect(ready.status).toBe(200);
  expect(await ready.json()).toMatchObject({ status: 'ready', checks: { redis: 'ok' } });
  // Stop one master (the cluster loses a third of its slots).
  const victim = probe.nodes('master')[0]!;
  await victim.shutdown('NOSAVE').catch(() => {});
  const down = await eventually(async () => {
    const res = await fetch(`${api.url}/readyz`);
    return res.status === 503 ? res : undefined;
  }, 15_000, '/readyz to say not ready');
  expect(await down.json()).toMatchObject({ checks: { redis: 'unreachable' } });
});
