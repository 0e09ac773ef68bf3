/**
 * Many processes at once (issue 20): two API processes and two worker processes on one database and Redis.
 * Every SMS message and Zendesk event is sent to both APIs at the same moment (a provider's retry racing the
 * original on another node); mid-burst one worker and one API are SIGKILLed, and copies aimed at the dead API
 * go to the live one. Afterwards each message is one ticket with one event and each provider event one
 * transcript event: nothing lost, nothing doubled. The repeating jobs exist once however many workers start.
 */
import { startTestApp, type TestContext } from '../helpers/context';
import { killGroup, spawnApi, spawnWorker, workerStarted, type ApiProcess, type WorkerProcess } from '../helpers/processes';
import { eventually } from '../helpers/wait';
import { QUEUE_NAMES } from '../../src/queue/jobs';
import { RetryingClient } from './client';
import { intakeScenario } from './scenario';

let ctx: TestContext;
const apis: ApiProcess[] = [];
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  ctx = await startTestApp();
  for (let i = 0; i < 2; i++) workers.push(spawnWorker(ctx.config, { detached: true }));
  for (let i = 0; i < 2; i++) apis.push(await spawnApi(ctx.config, { env: { JOB_WAIT_MS: '3000' } }));
  await Promise.all(workers.map((w) => workerStarted(w)));
}, 90_000);

afterAll(async () => {
  for (const p of [...apis, ...workers]) if (p.proc.exitCode === null && p.proc.signalCode === null) killGroup(p.proc);
  await ctx?.close();
});

test('two APIs and two workers, every delivery sent to both APIs at once, one of each killed mid-burst: each written exactly once', async () => {
  const scenario = await intakeScenario(ctx, { sms: 240, webhooks: 120 });
  const [a, b] = apis as [ApiProcess, ApiProcess];
  const toA = scenario.deliveries(a.url);
  // The same deliveries (same provider ids and bodies), addressed to B.
  const toB = toA.map((d) => ({ ...d, url: b.url + d.url.slice(a.url.length) }));
  const client = new RetryingClient({ maxAttempts: 40 });
  const fallback = new RetryingClient({ maxAttempts: 3 });
  let bDead = false;
  /** The copy for B, or for A once B is gone (as a load balancer would route it). */
  const viaB = async (i: number) => {
    if (!bDead) {
      try {
        await fallback.deliver(toB[i]!);
        return;
      } catch {
        // B was killed: the copy goes to the live API.
      }
    }
    await client.deliver(toA[i]!);
  };
  let accepted = 0;
  let next = 0;
  const sender = async () => {
    while (next < toA.length) {
      const i = next;
      next += 1;
      await Promise.all([client.deliver(toA[i]!), viaB(i)]);
      accepted += 1;
    }
  };
  const burst = Promise.all(Array.from({ length: 16 }, sender));
  // Mid-burst: a worker and an API die without warning.
  await eventually(async () => (accepted >= toA.length / 4 ? true : undefined), 60_000, 'a quarter of the burst to be accepted', 10);
  killGroup(workers[0]!.proc);
  bDead = true;
  killGroup(b.proc);
  await burst;
  expect(accepted).toBe(toA.length);
  // The killed worker's jobs come back through BullMQ's stall check; the other worker finishes them.
  await scenario.expectExactlyOnce(120_000);
}, 240_000);

test('the repeating jobs exist once with two workers started', async () => {
  const ids: string[] = [];
  for (const q of QUEUE_NAMES) ids.push(...(await ctx.runtime.queues.queue(q).getJobSchedulers()).map((s) => s.key));
  expect(ids.length).toBeGreaterThan(0);
  expect(new Set(ids).size).toBe(ids.length);
  for (const id of ['sla-sweep', 'rollups-sweep', 'events-sweep', 'mailbox-sweep']) expect(ids.filter((k) => k === id)).toHaveLength(1);
});
