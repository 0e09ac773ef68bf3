/**
 * Fault (c): PostgreSQL backends are terminated (pg_terminate_backend) again and again while an intake burst
 * is being written. The API and worker are real processes; every connection they hold to the test database
 * is killed every few hundred milliseconds. Requests caught by a kill must answer 503 with Retry-After (the
 * transaction rolled back), jobs caught by one are retried, and a client that retries per Retry-After ends
 * with every delivery written exactly once.
 */
import { Client } from 'pg';
import { serverUrl } from '../helpers/db-names';
import { exited, killGroup, spawnApi, spawnWorker, workerStarted, type ApiProcess, type WorkerProcess } from '../helpers/processes';
import { eventually, sleep } from '../helpers/wait';
import { RetryingClient } from './client';
import { intakeScenario } from './scenario';
import { useTestApp } from '../helpers/use-test-app';

jest.setTimeout(180_000);

describe('PostgreSQL backends terminated during writes', () => {
  let api: ApiProcess;
  let worker: WorkerProcess;
  let admin: Client;

  const { ctx } = useTestApp({
    teardown: async () => {
      for (const p of [api, worker]) if (p) killGroup(p.proc);
      await Promise.all([api, worker].filter(Boolean).map((p) => exited(p.proc)));
      await admin.end();
    },
  });
  beforeAll(async () => {
    admin = new Client({ connectionString: serverUrl('postgres') });
    await admin.connect();
  });

  test('requests caught by a kill answer 503 with Retry-After, and a retrying client loses and doubles nothing', async () => {
    const scenario = await intakeScenario(ctx, { sms: 240, webhooks: 120 });
    api = await spawnApi(ctx.config, { env: { JOB_WAIT_MS: '4000' } });
    worker = spawnWorker(ctx.config, { detached: true });
    await workerStarted(worker);

    const client = new RetryingClient();
    const deliveries = scenario.deliveries(api.url);
    let killed = 0;
    let killing = true;
    const killer = (async () => {
      await eventually(async () => (client.accepted >= 40 ? true : undefined), 60_000, 'the burst to be under way', 20);
      // Every backend of the test database but the test's own, again and again while the burst runs.
      for (let round = 0; killing && round < 25; round += 1) {
        const { rows } = await admin.query<{ n: number }>(
          `select count(*)::int as n from (select pg_terminate_backend(pid) from pg_stat_activity
            where datname = $1 and pid <> pg_backend_pid() and application_name <> 'fault-test') t`,
          [ctx.databaseName],
        );
        killed += rows[0]!.n;
        await sleep(150 + Math.floor(Math.random() * 150));
      }
    })();
    await client.deliverAll(deliveries, 16);
    killing = false;
    await killer;

    expect(killed).toBeGreaterThan(20);
    // Kills landed on requests: those answered 503 with Retry-After; nothing answered any other 5xx.
    const refused = client.answers.filter((a) => a.status === 503);
    for (const a of refused) {
      expect(a.retryAfter).toMatch(/^\d+$/);
      expect(a.contentType).toMatch(/^application\/problem\+json/);
      expect(a.code).toBe('dependency_unavailable');
    }
    expect(client.answers.filter((a) => a.status >= 500 && a.status !== 503)).toEqual([]);
    expect(client.accepted).toBe(deliveries.length);
    if (refused.length === 0) console.warn('no request was caught by a backend kill this run; only the worker side was exercised');

    await scenario.expectExactlyOnce();
    expect(api.output()).not.toMatch(/"level":50/);
    expect(api.proc.exitCode).toBeNull();
    expect(worker.proc.exitCode).toBeNull();
  });
});
