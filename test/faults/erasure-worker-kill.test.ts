/**
 * Fault test for erasure (issue 38): a worker process SIGKILLed in the middle of a person's erasure leaves every
 * ticket batch all-or-nothing and the customer still readable by the job (its row is emptied last); a new worker
 * process takes the job back and finishes it: every ticket erased, the customer emptied, one `customer.erased`.
 */
import { sql } from 'kysely';
import { queuePrefix } from '../../src/queue/connection';
import { bearer } from '../helpers/factories';
import { killGroup, killMidBurst, spawnWorker, workerStarted, type WorkerProcess } from '../helpers/processes';
import { useTestApp } from '../helpers/use-test-app';
import { eventually } from '../helpers/wait';

const { ctx, ws } = useTestApp({ workspaces: 1 });
const children: WorkerProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) killGroup(c.proc);
});

/** Tickets enough for many batches of 100, so the kill lands between the first batch and the closing transaction. */
const TICKETS = 3000;

test('a worker killed mid-erasure: batches are all-or-nothing, and the next worker finishes the erasure exactly once', async () => {
  const name = `Hedda Gabler${Date.now()}`;
  const email = `hedda.${Date.now()}@ibsen.test`;
  const c = await ctx.http.post('/v1/customers').set(bearer(ws.ownerKey)).send({ display_name: name, email }).expect(201);
  await sql`
    INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id, first_response_due, resolution_due)
    SELECT gen_random_uuid(), ${ws.tenantId}::uuid, 'Question ' || g || ' from ' || ${name}, 'Write to ' || ${email}, 'open', 'normal', 'api',
           ${c.body.id}::uuid, p.id, now() + interval '4 hours', now() + interval '1 day'
    FROM generate_series(1, ${TICKETS}::int) g, sla_policies p WHERE p.tenant_id = ${ws.tenantId}::uuid AND p.is_default`.execute(ctx.db);
  const erased = async () =>
    Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM tickets WHERE customer_id = ${c.body.id} AND subject LIKE '%[erased]'`.execute(ctx.db)).rows[0]!.n);

  const first = spawnWorker(ctx.config, { detached: true });
  children.push(first);
  await workerStarted(first);
  const res = await ctx.http.post(`/v1/customers/${c.body.id}/erase`).set(bearer(ws.ownerKey)).send({ reason: 'kill test' });
  expect(res.status).toBe(202);
  const queue = ctx.runtime.queues.queue('maintenance');
  const { atKill } = await killMidBurst({
    proc: first.proc,
    midBurst: async () => {
      const n = await erased();
      return n > 0 && n < TICKETS ? n : undefined;
    },
    activeCount: () => queue.getActiveCount(),
    redis: ctx.runtime.redis,
    stalledCheckKey: `${queuePrefix(ctx.config, 'maintenance')}:maintenance:stalled-check`,
  });
  // At the kill: whole batches only (a batch is one transaction), and the customer not yet emptied.
  const atRest = await erased();
  expect(atRest % 100 === 0 || atRest === TICKETS).toBe(true);
  expect(atKill).toBeGreaterThan(0);
  const row = await ctx.db.selectFrom('customers').select(['display_name', 'erased_at']).where('id', '=', c.body.id).executeTakeFirstOrThrow();
  if (atRest < TICKETS) expect(row).toEqual({ display_name: name, erased_at: null });

  const second = spawnWorker(ctx.config, { detached: true });
  children.push(second);
  await workerStarted(second);
  await eventually(
    async () => ((await ctx.http.get(`/v1/customers/${c.body.id}/erasures/${res.body.id}`).set(bearer(ws.ownerKey))).body.state === 'done' ? true : undefined),
    120_000,
    'the erasure to finish on the second worker',
    200,
  );
  killGroup(second.proc, 'SIGTERM');
  expect(await erased()).toBe(TICKETS);
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM events WHERE tenant_id = ${ws.tenantId} AND type = 'customer.erased'`.execute(ctx.db);
  expect(rows[0]!.n).toBe(1);
  const left = await sql<{ n: number }>`SELECT count(*)::int AS n FROM tickets WHERE tenant_id = ${ws.tenantId} AND (strpos(lower(tickets::text), ${email}) > 0 OR strpos(lower(tickets::text), lower(${name})) > 0)`.execute(ctx.db);
  expect(left.rows[0]!.n).toBe(0);
  expect((await ctx.http.get(`/v1/customers/${c.body.id}`).set(bearer(ws.ownerKey))).body).toMatchObject({ display_name: '[erased]', email: '', erased_at: expect.any(String) });
}, 240_000);
