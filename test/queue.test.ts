import type { ChildProcess } from 'node:child_process';
import { Job, UnrecoverableError } from 'bullmq';
import { newId } from '../src/lib/ids';
import { buildRegistry, defaultProcessorGroups } from '../workers/registry';
import { maintenanceProcessors } from '../workers/processors/maintenance';
import { startTestApp, type TestContext } from './helpers/context';
import { createWorkspace } from './helpers/factories';
import { spawnWorker, workerStarted } from './helpers/processes';
import { eventually } from './helpers/wait';
import { useTestApp } from './helpers/use-test-app';

const DAY_MS = 86_400_000;

type PruneResult = { deleted: number; tenants: number };

/** One audit row `daysAgo` days old in the workspace; returns its id. */
async function seedAuditRow(ctx: TestContext, tenantId: string, daysAgo: number): Promise<string> {
  const id = newId();
  await ctx.db
    .insertInto('audit_log')
    .values({
      id,
      tenant_id: tenantId,
      actor_user_id: null,
      actor_api_key_id: null,
      action: 'test.seeded',
      target_type: 'test',
      target_id: null,
      details: JSON.stringify({ days_ago: daysAgo }),
      created_at: new Date(Date.now() - daysAgo * DAY_MS),
    })
    .execute();
  return id;
}

async function auditRowExists(ctx: TestContext, id: string): Promise<boolean> {
  const row = await ctx.db.selectFrom('audit_log').select('id').where('id', '=', id).executeTakeFirst();
  return row !== undefined;
}

describe('enqueueAndAwait with a worker running', () => {
  const { ctx } = useTestApp({ workers: true });

  test('answers completed with the prune result, deleting old audit rows and keeping fresh ones', async () => {
    const ws = await createWorkspace(ctx);
    const oldRow = await seedAuditRow(ctx, ws.tenantId, 10);
    const freshRow = await seedAuditRow(ctx, ws.tenantId, 0);

    const outcome = await ctx.runtime.queues.enqueueAndAwait<PruneResult>('audit.prune', { retention_days: 1 }, { waitMs: 5000 });

    expect(outcome.state).toBe('completed');
    if (outcome.state !== 'completed') return;
    expect(outcome.jobId).toEqual(expect.any(String));
    expect(outcome.result).toEqual({ deleted: 1, tenants: 1 });
    expect(await auditRowExists(ctx, oldRow)).toBe(false);
    expect(await auditRowExists(ctx, freshRow)).toBe(true);
  });
});

describe('enqueueAndAwait when no worker answers within the wait', () => {
  const { ctx } = useTestApp();

  test('answers accepted with the job id, and the job later runs exactly once', async () => {
    const ws = await createWorkspace(ctx);
    const oldRow = await seedAuditRow(ctx, ws.tenantId, 10);

    const started = Date.now();
    const outcome = await ctx.runtime.queues.enqueueAndAwait<PruneResult>('audit.prune', { retention_days: 1 }, { waitMs: 300 });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(outcome).toEqual({ state: 'accepted', jobId: expect.any(String) });
    expect(await auditRowExists(ctx, oldRow)).toBe(true);

    await ctx.startWorkers();
    const queue = ctx.runtime.queues.queue('maintenance');
    const job = await eventually(
      async () => {
        const j = await Job.fromId<unknown, PruneResult>(queue, outcome.jobId);
        // Re-read once completed: the job read above may predate its return value.
        return j && (await j.getState()) === 'completed' ? Job.fromId<unknown, PruneResult>(queue, outcome.jobId) : undefined;
      },
      10_000,
      `job ${outcome.jobId} to complete`,
    );

    expect(job.returnvalue).toEqual({ deleted: 1, tenants: 1 });
    expect(job.attemptsMade).toBe(1);
    expect(job.attemptsStarted).toBe(1);
    expect(job.failedReason ?? null).toBeNull();
    expect(await auditRowExists(ctx, oldRow)).toBe(false);
  });
});

describe('the worker registry', () => {
  const { ctx } = useTestApp();

  type Group = ReturnType<typeof maintenanceProcessors>;

  test('refuses to start when a job has no processor', () => {
    expect(() => buildRegistry([{} as Group])).toThrow(/has no processor/);
    expect(() => buildRegistry([maintenanceProcessors(ctx.workerServices, ctx.config)])).toThrow(/"ingest\.batch" has no processor/);
  });

  test('refuses to start when two groups both register the same job', () => {
    const group = maintenanceProcessors(ctx.workerServices, ctx.config);
    expect(() => buildRegistry([group, { ...group }])).toThrow(/"audit\.prune" has two processors/);
  });

  test('refuses a processor for a job it does not know', () => {
    const group = { ...maintenanceProcessors(ctx.workerServices, ctx.config), 'no.such.job': async () => null } as Group;
    expect(() => buildRegistry([group])).toThrow(/unknown job "no\.such\.job"/);
  });

  test('fails an invalid payload for good with UnrecoverableError, without calling the processor', async () => {
    let calls = 0;
    const counting = { ...maintenanceProcessors(ctx.workerServices, ctx.config), 'audit.prune': async () => ++calls } as unknown as Group;
    const registry = buildRegistry(defaultProcessorGroups(ctx.workerServices, ctx.config, ctx.runtime.redis).map((g) => ('audit.prune' in g ? counting : g)));
    await expect(registry.run('audit.prune', { retention_days: 0 })).rejects.toBeInstanceOf(UnrecoverableError);
    await expect(registry.run('audit.prune', { retention_days: 'ten' })).rejects.toBeInstanceOf(UnrecoverableError);
    expect(calls).toBe(0);
    await expect(registry.run('audit.prune', { retention_days: 3 })).resolves.toBe(1);
  });
});

describe('the worker process', () => {
  let ctx: TestContext;
  let child: ChildProcess | null = null;
  beforeAll(async () => {
    ctx = await startTestApp();
  });
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await ctx.close();
  });

  test('on SIGTERM finishes, logs "workers stopped" and exits 0 within 15 s', async () => {
    const worker = spawnWorker(ctx.config);
    const proc = worker.proc;
    child = proc;
    const stdout = worker.stdout;
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      proc.on('exit', (code, signal) => resolve({ code, signal })),
    );

    await workerStarted(worker);

    const signalled = Date.now();
    proc.kill('SIGTERM');
    const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 15_000).unref());
    const result = await Promise.race([exited, timeout]);

    expect(result).toEqual({ code: 0, signal: null });
    expect(Date.now() - signalled).toBeLessThan(15_000);
    const messages = stdout()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => (JSON.parse(l) as { msg?: string }).msg);
    expect(messages).toContain('workers stopped');
  }, 45_000);
});
