/**
 * Fault (b): Redis stops in the middle of an intake burst. The API and worker are real processes on a Redis
 * of the test's own; the ingest and webhook routes must answer 503 with Retry-After while it is down, recover
 * once it is back, and a client that retries per Retry-After must end with every delivery written once.
 */
import { startTestApp, type TestContext } from '../helpers/context';
import { exited, killGroup, spawnApi, spawnWorker, workerStarted, type ApiProcess, type WorkerProcess } from '../helpers/processes';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server';
import { eventually, sleep } from '../helpers/wait';
import { RetryingClient } from './client';
import { intakeScenario } from './scenario';

jest.setTimeout(180_000);

describe('Redis stopped during an ingest and webhook burst', () => {
  let redis: OwnRedis;
  let ctx: TestContext;
  let api: ApiProcess;
  let worker: WorkerProcess;

  beforeAll(async () => {
    redis = await startOwnRedis();
    ctx = await startTestApp({ env: { REDIS_URL: redis.url } });
  });
  afterAll(async () => {
    for (const p of [api, worker]) if (p) killGroup(p.proc);
    await Promise.all([api, worker].filter(Boolean).map((p) => exited(p.proc)));
    await ctx.close().catch(() => {});
    await redis.destroy();
  });

  test('routes answer 503 with Retry-After while it is down, recover on restart, and a retrying client loses and doubles nothing', async () => {
    const scenario = await intakeScenario(ctx, { sms: 240, webhooks: 120 });
    const env = { JOB_WAIT_MS: '3000' };
    api = await spawnApi(ctx.config, { env });
    worker = spawnWorker(ctx.config, { detached: true, env });
    await workerStarted(worker);

    const client = new RetryingClient();
    const deliveries = scenario.deliveries(api.url);
    let stoppedAt = 0;
    let restartedAt = 0;
    const outage = (async () => {
      await eventually(async () => (client.accepted >= 80 ? true : undefined), 60_000, 'the burst to be under way', 20);
      await redis.stop();
      stoppedAt = Date.now();
      // Down long enough for both routes to be refused a few times.
      await eventually(
        async () => {
          const refused = client.answers.filter((a) => a.at > stoppedAt && a.status === 503);
          return refused.some((a) => a.route === 'ingest') && refused.some((a) => a.route === 'webhooks') ? true : undefined;
        },
        30_000,
        'both routes to answer 503 while Redis is down',
        50,
      );
      await sleep(1000);
      restartedAt = Date.now();
      await redis.start();
    })();
    await Promise.all([client.deliverAll(deliveries, 16), outage]);

    // While Redis was down: clean 503s with an integer Retry-After on both routes; nothing else but answers
    // to requests that were already done or queued when it stopped.
    const during = client.answers.filter((a) => a.at > stoppedAt && a.at < restartedAt);
    const refused = during.filter((a) => a.status === 503);
    expect(new Set(refused.map((a) => a.route))).toEqual(new Set(['ingest', 'webhooks']));
    for (const a of during) expect([200, 202, 503]).toContain(a.status);
    for (const a of refused) {
      expect(a.retryAfter).toMatch(/^\d+$/);
      expect(a.contentType).toMatch(/^application\/problem\+json/);
      expect(a.code).toBe('dependency_unavailable');
    }
    // Recovered: after the restart the routes accept again (the last answers are acceptances).
    expect(client.answers.filter((a) => a.at > restartedAt && (a.status === 200 || a.status === 202)).length).toBeGreaterThan(0);
    expect(client.answers.filter((a) => a.status >= 500 && a.status !== 503)).toEqual([]);
    expect(client.accepted).toBe(deliveries.length);

    await scenario.expectExactlyOnce();
    expect(api.output()).not.toMatch(/"level":50/);
  });
});
