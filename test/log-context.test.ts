/**
 * Every log line written while serving a request or running a job names it (request id, or job id and name)
 * and its workspace, however deep in the services the line is written (AsyncLocalStorage, src/lib/log-context.ts).
 */
import { randomUUID } from 'node:crypto';
import { createLogger } from '../src/lib/logger';
import { withLogContext } from '../src/lib/log-context';
import { buildRegistry, defaultProcessorGroups } from '../workers/registry';
import { LogCapture } from './helpers/context';
import { bearer } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

test('a line logged inside a context carries its request id and workspace; outside, none', () => {
  const logs = new LogCapture();
  const logger = createLogger(ctx.config, logs);
  withLogContext({ request_id: 'req-1', tenant_id: 'tenant-1' }, () => logger.warn('inside'));
  logger.warn('outside');
  const [inside, outside] = logs.parsed();
  expect(inside).toMatchObject({ msg: 'inside', request_id: 'req-1', tenant_id: 'tenant-1' });
  expect(outside).not.toHaveProperty('request_id');
  expect(outside).not.toHaveProperty('tenant_id');
});

test('a service warning written while serving a request names the request and the caller\'s workspace', async () => {
  const ticket = await ctx.http
    .post('/v1/tickets')
    .set(bearer(ws.ownerKey))
    .send({ subject: 'Log context', description: 'Whose line is it?', customer_email: 'log-context@example.test' });
  expect(ticket.status).toBe(201);
  // The rollup fold cannot be queued: the rollups service logs a warning deep inside POST …/time-entries.
  const enqueue = jest.spyOn(ctx.runtime.queues, 'enqueue').mockRejectedValue(new Error('Redis is away'));
  try {
    ctx.logs.clear();
    const requestId = randomUUID();
    const res = await ctx.http
      .post(`/v1/tickets/${ticket.body.id as string}/time-entries`)
      .set({ ...bearer(ws.ownerKey), 'X-Request-Id': requestId })
      .send({ minutes: 5 });
    expect(res.status).toBe(201);
    const warning = ctx.logs.parsed().find((l) => l.msg === 'rollup fold not queued; the sweep will fold');
    expect(warning).toMatchObject({ request_id: requestId, tenant_id: ws.tenantId });
  } finally {
    enqueue.mockRestore();
  }
});

test('a line logged by a job\'s processor names the job and the workspace it is about', async () => {
  const logger = createLogger(ctx.config, ctx.logs);
  const groups = defaultProcessorGroups(ctx.workerServices, ctx.config, ctx.runtime.redis).map((g) =>
    'mailbox.poll' in g ? { ...g, 'mailbox.poll': async () => logger.warn('polling') } : g,
  );
  ctx.logs.clear();
  await buildRegistry(groups).run('mailbox.poll', { tenant_id: ws.tenantId }, { id: 'job-42', attemptsMade: 0, opts: { attempts: 1 } } as never);
  expect(ctx.logs.parsed().find((l) => l.msg === 'polling')).toMatchObject({ job_id: 'job-42', job: 'mailbox.poll', tenant_id: ws.tenantId });
});
