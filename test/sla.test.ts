import { Job } from 'bullmq';
import { sql } from 'kysely';
import { loadConfig } from '../src/config';
import { DEFAULT_SLA_TARGETS, type SlaTargets } from '../src/domains/sla/targets';
import { type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, type Workspace } from './helpers/factories';
import type { TicketEvent } from './helpers/ingest';
import { getTicket, patchTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';
import { eventually } from './helpers/wait';

type Priority = 'low' | 'normal' | 'high' | 'urgent';

interface TicketView {
  id: string;
  status: string;
  priority: Priority;
  sla_policy_id: string;
  first_response_due: string;
  resolution_due: string;
  sla_breached: boolean;
  reopened_at?: string;
  created_at: string;
  events: TicketEvent[];
}

interface PolicyView {
  id: string;
  name: string;
  is_default: boolean;
  targets: SlaTargets;
  created_at: string;
}

const MIN = 60_000;
const ms = (iso: string) => new Date(iso).getTime();
const breachEvents = (t: TicketView) => t.events.filter((e) => e.kind === 'sla_breached');

/** Every target the same, so a ticket's due times tell which policy it was opened under. */
const uniformTargets = (first: number, resolution: number): SlaTargets => ({
  low: { first_response_minutes: first, resolution_minutes: resolution },
  normal: { first_response_minutes: first, resolution_minutes: resolution },
  high: { first_response_minutes: first, resolution_minutes: resolution },
  urgent: { first_response_minutes: first, resolution_minutes: resolution },
});

/** Helpers bound to one test context. */
function helpers(get: () => TestContext) {
  const api = {
    async createTicket(ws: Workspace, priority: Priority = 'normal'): Promise<TicketView> {
      const res = await get()
        .http.post('/v1/tickets')
        .set(bearer(ws.ownerKey))
        .send({ subject: `SLA ${priority}`, description: 'The printer is on fire', customer_email: `c-${Math.random().toString(36).slice(2, 10)}@cust.test`, priority });
      if (res.status !== 201) throw new Error(`create ticket: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as TicketView;
    },
    ticket: (ws: Workspace, id: string) => getTicket<TicketView>(get(), ws, id),
    patch: (ws: Workspace, id: string, body: Record<string, unknown>) => patchTicket<TicketView>(get(), ws, id, body),
    async reply(ws: Workspace, id: string, body = 'On it.'): Promise<TicketView> {
      const res = await get().http.post(`/v1/tickets/${id}/replies`).set(bearer(ws.ownerKey)).send({ body });
      if (res.status !== 201) throw new Error(`reply: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as TicketView;
    },
    async policies(token: string): Promise<PolicyView[]> {
      const res = await get().http.get('/v1/sla-policies').set(bearer(token));
      if (res.status !== 200) throw new Error(`list policies: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.sla_policies as PolicyView[];
    },
    /** Moves due times relative to the database clock: seconds from now(), negative for the past. */
    async setDues(id: string, dues: { first_response?: number; resolution?: number }): Promise<void> {
      const at = (secs: number) => sql<Date>`now() + make_interval(secs => ${secs}::double precision)`;
      await get()
        .db.updateTable('tickets')
        .set({
          ...(dues.first_response !== undefined ? { first_response_due: at(dues.first_response) } : {}),
          ...(dues.resolution !== undefined ? { resolution_due: at(dues.resolution) } : {}),
        })
        .where('id', '=', id)
        .execute();
    },
    row(id: string) {
      return get().db.selectFrom('tickets').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    },
  };
  return api;
}

describe('SLA policies, timers and breaches (no worker running)', () => {
  const { ctx } = useTestApp();
  const h = helpers(() => ctx);

  describe('policies', () => {
    test('a new workspace has exactly one policy, the default, readable by a viewer', async () => {
      const ws = await createWorkspace(ctx);
      const viewer = await addMember(ctx, ws, 'viewer');
      const res = await ctx.http.get('/v1/sla-policies').set(bearer(viewer.token));
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(['sla_policies']);
      expect(res.body.sla_policies).toHaveLength(1);
      const [p] = res.body.sla_policies as PolicyView[];
      expect(p).toEqual({ id: expect.any(String), name: expect.any(String), is_default: true, targets: DEFAULT_SLA_TARGETS, created_at: expect.any(String) });
    });

    test('a new ticket runs under the default policy, due at created_at + its priority\'s targets, and leaves no timer job in Redis', async () => {
      const ws = await createWorkspace(ctx);
      const [policy] = await h.policies(ws.ownerKey);
      const queue = ctx.runtime.queues.queue('maintenance');
      for (const priority of ['urgent', 'low'] as const) {
        const t = await h.createTicket(ws, priority);
        const target = policy!.targets[priority];
        expect(t.sla_policy_id).toBe(policy!.id);
        expect(t.sla_breached).toBe(false);
        expect(ms(t.first_response_due)).toBe(ms(t.created_at) + target.first_response_minutes * MIN);
        expect(ms(t.resolution_due)).toBe(ms(t.created_at) + target.resolution_minutes * MIN);

        // A priority change moves the due times; neither it nor the creation queues anything per ticket: the
        // sweep reads the due times from the row (the workers' suite below shows it breaching them).
        await h.patch(ws, t.id, { priority: priority === 'urgent' ? 'low' : 'urgent' });
        await ctx.services.later.settle();
        const jobs = await queue.getJobs(['delayed', 'waiting', 'prioritized']);
        expect(jobs.filter((j) => (j.data as { ticket_id?: string }).ticket_id === t.id)).toEqual([]);
      }
      // Urgent's targets are the tightest, low's the loosest: the two tickets really differ.
      expect(policy!.targets.urgent.first_response_minutes).toBeLessThan(policy!.targets.low.first_response_minutes);
    });

    test('POST /v1/sla-policies needs admin: an editor gets 403 and nothing is stored', async () => {
      const ws = await createWorkspace(ctx);
      const editor = await addMember(ctx, ws, 'editor');
      const res = await ctx.http
        .post('/v1/sla-policies')
        .set(bearer(editor.token))
        .send({ name: 'Editor policy', targets: uniformTargets(5, 50), is_default: true });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('insufficient_role');
      const list = await h.policies(ws.ownerKey);
      expect(list).toHaveLength(1);
      expect(list[0]!.is_default).toBe(true);
    });

    test('an admin\'s is_default policy replaces the old default for new tickets; older tickets keep theirs', async () => {
      const ws = await createWorkspace(ctx);
      const admin = await addMember(ctx, ws, 'admin');
      const [oldDefault] = await h.policies(ws.ownerKey);
      const before = await h.createTicket(ws, 'normal');

      const res = await ctx.http
        .post('/v1/sla-policies')
        .set(bearer(admin.token))
        .send({ name: 'Gold', targets: uniformTargets(7, 70), is_default: true });
      expect(res.status).toBe(201);
      const gold = res.body as PolicyView;
      expect(gold).toEqual({ id: expect.any(String), name: 'Gold', is_default: true, targets: uniformTargets(7, 70), created_at: expect.any(String) });

      const list = await h.policies(ws.ownerKey);
      expect(list).toHaveLength(2);
      expect(list.filter((p) => p.is_default).map((p) => p.id)).toEqual([gold.id]);
      expect(list.find((p) => p.id === oldDefault!.id)!.is_default).toBe(false);

      const t = await h.createTicket(ws, 'urgent');
      expect(t.sla_policy_id).toBe(gold.id);
      expect(ms(t.first_response_due)).toBe(ms(t.created_at) + 7 * MIN);
      expect(ms(t.resolution_due)).toBe(ms(t.created_at) + 70 * MIN);

      // The ticket opened under the old default keeps it, also when its priority changes.
      const moved = await h.patch(ws, before.id, { priority: 'urgent' });
      expect(moved.sla_policy_id).toBe(oldDefault!.id);
      expect(ms(moved.first_response_due)).toBe(ms(before.created_at) + DEFAULT_SLA_TARGETS.urgent.first_response_minutes * MIN);
    });

    test('a non-default policy does not change which policy new tickets use', async () => {
      const ws = await createWorkspace(ctx);
      const [def] = await h.policies(ws.ownerKey);
      const res = await ctx.http.post('/v1/sla-policies').set(bearer(ws.ownerKey)).send({ name: 'Side', targets: uniformTargets(3, 30) });
      expect(res.status).toBe(201);
      expect(res.body.is_default).toBe(false);
      const t = await h.createTicket(ws, 'normal');
      expect(t.sla_policy_id).toBe(def!.id);
      const list = await h.policies(ws.ownerKey);
      expect(list.filter((p) => p.is_default).map((p) => p.id)).toEqual([def!.id]);
    });

    test.each([
      ['a 0-minute first response target', { ...uniformTargets(10, 100), high: { first_response_minutes: 0, resolution_minutes: 100 } }],
      ['a 0-minute resolution target', { ...uniformTargets(10, 100), low: { first_response_minutes: 10, resolution_minutes: 0 } }],
      ['a missing priority', (({ urgent: _u, ...rest }) => rest)(uniformTargets(10, 100))],
      ['a priority missing a target', { ...uniformTargets(10, 100), normal: { first_response_minutes: 10 } }],
      ['fractional minutes', { ...uniformTargets(10, 100), urgent: { first_response_minutes: 1.5, resolution_minutes: 100 } }],
    ])('refuses %s with 400 and stores nothing', async (_what, targets) => {
      const ws = await createWorkspace(ctx);
      const res = await ctx.http.post('/v1/sla-policies').set(bearer(ws.ownerKey)).send({ name: 'Broken', targets, is_default: true });
      expect(res.status).toBe(400);
      const list = await h.policies(ws.ownerKey);
      expect(list).toHaveLength(1);
      expect(list[0]!.is_default).toBe(true);
    });

    test('two is_default policies created at once: neither request fails with 5xx, and exactly one default remains', async () => {
      const ws = await createWorkspace(ctx);
      // Hold the current default's row lock so both creations queue behind it and then run back to back.
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holder = ctx.db.transaction().execute(async (tx) => {
        await sql`SELECT id FROM sla_policies WHERE tenant_id = ${ws.tenantId} AND is_default FOR UPDATE`.execute(tx);
        locked();
        await gate;
      });
      await isLocked;
      const requests = ['A', 'B'].map((n) =>
        ctx.http.post('/v1/sla-policies').set(bearer(ws.ownerKey)).send({ name: `Race ${n}`, targets: uniformTargets(9, 90), is_default: true }).then((r) => r),
      );
      await eventually(
        async () => {
          const r = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(ctx.db);
          return r.rows[0]!.n >= 2 ? true : undefined;
        },
        5000,
        'both creations to wait on the default policy lock',
      );
      release();
      await holder;
      const responses = await Promise.all(requests);
      for (const r of responses) expect([201, 409]).toContain(r.status);
      const defaults = (await h.policies(ws.ownerKey)).filter((p) => p.is_default);
      expect(defaults).toHaveLength(1);
      expect(defaults[0]!.name).toMatch(/^Race [AB]$/);
    });
  });

  describe('checkSla', () => {
    test('a breach is recorded per target with one system sla_breached event carrying target and due_at', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'high');
      await h.setDues(t.id, { first_response: -60 });
      const due = (await h.row(t.id)).first_response_due;

      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(1);
      const row = await h.row(t.id);
      expect(row.first_response_breached_at).not.toBeNull();
      expect(row.resolution_breached_at).toBeNull();
      expect(row.sla_breached).toBe(true);

      const after = await h.ticket(ws, t.id);
      expect(after.sla_breached).toBe(true);
      const events = breachEvents(after);
      expect(events).toHaveLength(1);
      expect(events[0]!.actor_type).toBe('system');
      expect(events[0]!.actor_user_id).toBeUndefined();
      expect(events[0]!.meta).toEqual({ target: 'first_response', due_at: due.toISOString() });
    });

    test('a stale job does nothing: first reply sent, then the due passes → 0, not breached', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'urgent');
      await h.reply(ws, t.id, 'We are looking into it.');
      await h.setDues(t.id, { first_response: -60 });
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(0);
      const after = await h.ticket(ws, t.id);
      expect(after.sla_breached).toBe(false);
      expect(breachEvents(after)).toHaveLength(0);
      expect((await h.row(t.id)).first_response_breached_at).toBeNull();
    });

    test('an internal note is not a first response: the first response target still breaches', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'urgent');
      const res = await ctx.http.post(`/v1/tickets/${t.id}/notes`).set(bearer(ws.ownerKey)).send({ body: 'internal only' });
      expect(res.status).toBe(201);
      await h.setDues(t.id, { first_response: -60 });
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(1);
      expect(breachEvents(await h.ticket(ws, t.id)).map((e) => e.meta.target)).toEqual(['first_response']);
    });

    test('a solved ticket never breaches on resolution (nor on a first response it no longer owes)', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'normal');
      await h.patch(ws, t.id, { status: 'solved' });
      await h.setDues(t.id, { resolution: -60 });
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(0);
      await h.setDues(t.id, { first_response: -60 });
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(0);
      const after = await h.ticket(ws, t.id);
      expect(after.sla_breached).toBe(false);
      expect(breachEvents(after)).toHaveLength(0);
    });

    test('a closed ticket never breaches on resolution', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'normal');
      await h.reply(ws, t.id);
      await h.patch(ws, t.id, { status: 'closed' });
      await h.setDues(t.id, { first_response: -60, resolution: -60 });
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(0);
      expect((await h.ticket(ws, t.id)).sla_breached).toBe(false);
    });

    test('timers do not pause: pending and on_hold tickets breach', async () => {
      const ws = await createWorkspace(ctx);
      for (const status of ['pending', 'on_hold'] as const) {
        const t = await h.createTicket(ws, 'normal');
        await h.patch(ws, t.id, { status });
        await h.setDues(t.id, { first_response: -60, resolution: -30 });
        expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(2);
        expect((await h.ticket(ws, t.id)).sla_breached).toBe(true);
      }
    });

    test('exactly once under concurrency: 8 concurrent checks breach 2 targets with 2 events; a re-run finds nothing', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'normal');
      await h.setDues(t.id, { first_response: -120, resolution: -60 });

      const results = await Promise.all(Array.from({ length: 8 }, () => ctx.services.tickets.checkSla(ws.tenantId, t.id)));
      expect(results.reduce((a, b) => a + b, 0)).toBe(2);

      const after = await h.ticket(ws, t.id);
      expect(after.sla_breached).toBe(true);
      const events = breachEvents(after);
      expect(events).toHaveLength(2);
      expect(events.map((e) => e.meta.target).sort()).toEqual(['first_response', 'resolution']);

      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(0);
      expect(breachEvents(await h.ticket(ws, t.id))).toHaveLength(2);
    });

    test('a tenant cannot breach another workspace\'s ticket', async () => {
      const a = await createWorkspace(ctx);
      const b = await createWorkspace(ctx);
      const t = await h.createTicket(b, 'normal');
      await h.setDues(t.id, { first_response: -60, resolution: -60 });
      expect(await ctx.services.tickets.checkSla(a.tenantId, t.id)).toBe(0);
      expect((await h.row(t.id)).sla_breached).toBe(false);
      expect(await ctx.services.tickets.checkSla(b.tenantId, t.id)).toBe(2);
    });
  });

  describe('sweepSla', () => {
    test('catches timers whose job never ran, only on tickets that still owe the target, each under its own workspace', async () => {
      const ws = await createWorkspace(ctx);
      const other = await createWorkspace(ctx);

      const overdue = await h.createTicket(ws, 'normal');
      await h.setDues(overdue.id, { first_response: -120, resolution: -60 });

      const replied = await h.createTicket(ws, 'normal');
      await h.reply(ws, replied.id);
      await h.setDues(replied.id, { first_response: -120 });

      const solved = await h.createTicket(ws, 'normal');
      await h.patch(ws, solved.id, { status: 'solved' });
      await h.setDues(solved.id, { first_response: -120, resolution: -60 });

      const spam = await h.createTicket(ws, 'normal');
      await h.patch(ws, spam.id, { status: 'spam' });
      await h.setDues(spam.id, { first_response: -120, resolution: -60 });

      const notYet = await h.createTicket(ws, 'normal');

      const foreign = await h.createTicket(other, 'low');
      await h.setDues(foreign.id, { first_response: -120 });

      const { breached } = await ctx.services.tickets.sweepSla();
      // overdue (2) + foreign (1) at least; tickets left overdue by other tests in this database may add more.
      expect(breached).toBeGreaterThanOrEqual(3);

      const state = async (id: string) => {
        const r = await h.row(id);
        return { first: r.first_response_breached_at !== null, resolution: r.resolution_breached_at !== null, sla_breached: r.sla_breached };
      };
      expect(await state(overdue.id)).toEqual({ first: true, resolution: true, sla_breached: true });
      expect(await state(replied.id)).toEqual({ first: false, resolution: false, sla_breached: false });
      expect(await state(solved.id)).toEqual({ first: false, resolution: false, sla_breached: false });
      expect(await state(spam.id)).toEqual({ first: false, resolution: false, sla_breached: false });
      expect(await state(notYet.id)).toEqual({ first: false, resolution: false, sla_breached: false });
      expect(await state(foreign.id)).toEqual({ first: true, resolution: false, sla_breached: true });

      // Every breach event sits in the ticket's own workspace.
      const events = await ctx.db
        .selectFrom('ticket_events')
        .select(['tenant_id', 'ticket_id', 'meta'])
        .where('kind', '=', 'sla_breached')
        .where('ticket_id', 'in', [overdue.id, replied.id, solved.id, spam.id, notYet.id, foreign.id])
        .execute();
      expect(events.filter((e) => e.ticket_id === overdue.id).map((e) => e.meta.target).sort()).toEqual(['first_response', 'resolution']);
      expect(events.filter((e) => e.ticket_id === foreign.id).map((e) => e.meta.target)).toEqual(['first_response']);
      expect(events).toHaveLength(3);
      for (const e of events) expect(e.tenant_id).toBe(e.ticket_id === foreign.id ? other.tenantId : ws.tenantId);

      const foreignView = await h.ticket(other, foreign.id);
      expect(breachEvents(foreignView)).toHaveLength(1);
      // The other workspace cannot even see the ticket.
      expect((await ctx.http.get(`/v1/tickets/${foreign.id}`).set(bearer(ws.ownerKey))).status).toBe(404);

      // A second sweep finds nothing new on these tickets.
      await ctx.services.tickets.sweepSla();
      const again = await ctx.db.selectFrom('ticket_events').select('id').where('kind', '=', 'sla_breached').where('ticket_id', 'in', [overdue.id, foreign.id]).execute();
      expect(again).toHaveLength(3);
    });

    test('checks only the workspaces with a target due: a workspace with open, not-yet-due tickets is not visited', async () => {
      await ctx.services.tickets.sweepSla(); // whatever other tests left overdue
      const quiet = await createWorkspace(ctx);
      await h.createTicket(quiet, 'normal');
      const late = await createWorkspace(ctx);
      const t = await h.createTicket(late, 'normal');
      await h.setDues(t.id, { first_response: -30 });
      const first = await ctx.services.tickets.sweepSla();
      expect(first).toMatchObject({ breached: 1, workspaces: 1 });
      // Marked: it left the index, so the next sweep visits nobody.
      expect(await ctx.services.tickets.sweepSla()).toEqual({ breached: 0, workspaces: 0 });
    });

    test('finds due workspaces in the partial due indexes (no scan of open tickets)', async () => {
      // The sweep's statement (crossTenantWithBreachesDue): a paused resolution clock (issue 37) is out of its index.
      const plan = await ctx.db.transaction().execute(async (tx) => {
        await sql`SET LOCAL enable_seqscan = off`.execute(tx);
        const { rows } = await sql<{ 'QUERY PLAN': string }>`EXPLAIN SELECT tenant_id FROM tickets
          WHERE status IN ('open', 'pending', 'on_hold') AND first_responded_at IS NULL AND first_response_breached_at IS NULL AND first_response_due <= now()
          UNION SELECT tenant_id FROM tickets
          WHERE status IN ('open', 'pending', 'on_hold') AND solved_at IS NULL AND resolution_breached_at IS NULL AND resolution_paused_at IS NULL AND resolution_due <= now()
          UNION SELECT tenant_id FROM tickets
          WHERE status IN ('open', 'pending', 'on_hold') AND next_reply_due IS NOT NULL AND next_reply_breached_at IS NULL AND next_reply_due <= now()`.execute(tx);
        return rows.map((r) => r['QUERY PLAN']).join('\n');
      });
      // Each target's partial due index: the sweep's own (0026, 0040) or the time rules' (0041), which hold the same
      // tickets in (tenant_id, due) order; the planner may take either on a small table.
      expect(plan).toMatch(/Index (Only )?Scan using tickets_(rule_)?first_response_due/);
      expect(plan).toMatch(/Index (Only )?Scan using tickets_(rule_)?resolution_due/);
      expect(plan).toMatch(/Index (Only )?Scan using tickets_(rule_)?next_reply_due/);
      expect(plan).not.toContain('Seq Scan');
    });
  });

  describe('priority change', () => {
    test('normal → urgent moves both unmet targets to created_at + urgent targets', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'normal');
      const after = await h.patch(ws, t.id, { priority: 'urgent' });
      expect(after.priority).toBe('urgent');
      expect(ms(after.first_response_due)).toBe(ms(t.created_at) + DEFAULT_SLA_TARGETS.urgent.first_response_minutes * MIN);
      expect(ms(after.resolution_due)).toBe(ms(t.created_at) + DEFAULT_SLA_TARGETS.urgent.resolution_minutes * MIN);
    });

    test('a first response already given keeps its due time; the resolution target still moves', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'normal');
      await h.reply(ws, t.id);
      const after = await h.patch(ws, t.id, { priority: 'urgent' });
      expect(after.first_response_due).toBe(t.first_response_due);
      expect(ms(after.resolution_due)).toBe(ms(t.created_at) + DEFAULT_SLA_TARGETS.urgent.resolution_minutes * MIN);
    });

    test('a breached target keeps its due time', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'low');
      await h.setDues(t.id, { first_response: -60 });
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(1);
      const breachedDue = (await h.row(t.id)).first_response_due.toISOString();
      const after = await h.patch(ws, t.id, { priority: 'urgent' });
      expect(after.first_response_due).toBe(breachedDue);
      expect(ms(after.resolution_due)).toBe(ms(t.created_at) + DEFAULT_SLA_TARGETS.urgent.resolution_minutes * MIN);
      expect(after.sla_breached).toBe(true);
    });
  });

  describe('reopen', () => {
    test('clears both breaches, restarts both timers from now, and the new timers breach again', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'high');
      await h.setDues(t.id, { first_response: -120, resolution: -60 });
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(2);
      await h.reply(ws, t.id);
      const solved = await h.patch(ws, t.id, { status: 'solved' });
      expect(solved.sla_breached).toBe(true);

      const before = Date.now();
      const res = await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(ws.ownerKey));
      const after = Date.now();
      expect(res.status).toBe(200);
      const reopened = res.body as TicketView;
      expect(reopened.status).toBe('open');
      expect(reopened.sla_breached).toBe(false);
      expect(reopened.reopened_at).toBeDefined();
      const target = DEFAULT_SLA_TARGETS.high;
      expect(ms(reopened.first_response_due)).toBeGreaterThanOrEqual(before + target.first_response_minutes * MIN);
      expect(ms(reopened.first_response_due)).toBeLessThanOrEqual(after + target.first_response_minutes * MIN);
      expect(ms(reopened.resolution_due)).toBeGreaterThanOrEqual(before + target.resolution_minutes * MIN);
      expect(ms(reopened.resolution_due)).toBeLessThanOrEqual(after + target.resolution_minutes * MIN);
      expect(ms(reopened.first_response_due)).toBe(ms(reopened.reopened_at!) + target.first_response_minutes * MIN);
      const row = await h.row(t.id);
      expect(row.first_response_breached_at).toBeNull();
      expect(row.resolution_breached_at).toBeNull();

      // Nothing is due yet, so a check does nothing; once the new dues pass, both targets breach once more.
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(0);
      await h.setDues(t.id, { first_response: -20, resolution: -10 });
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(2);
      const final = await h.ticket(ws, t.id);
      expect(final.sla_breached).toBe(true);
      expect(breachEvents(final)).toHaveLength(4);
    });

    test('a priority change after a reopen counts from reopened_at', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws, 'low');
      await h.patch(ws, t.id, { status: 'solved' });
      const reopened = (await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(ws.ownerKey))).body as TicketView;
      const after = await h.patch(ws, t.id, { priority: 'urgent' });
      const from = ms(reopened.reopened_at!);
      expect(ms(after.first_response_due)).toBe(from + DEFAULT_SLA_TARGETS.urgent.first_response_minutes * MIN);
      expect(ms(after.resolution_due)).toBe(from + DEFAULT_SLA_TARGETS.urgent.resolution_minutes * MIN);
    });
  });

  describe('leaving spam after a resolution', () => {
    test('closed → spam → open restarts the clock like a reopen, so the resolution can breach again', async () => {
      const ws = await createWorkspace(ctx);
      const t = await h.createTicket(ws);
      await h.patch(ws, t.id, { status: 'closed' });
      await h.patch(ws, t.id, { status: 'spam' });
      const before = Date.now();
      const open = await h.patch(ws, t.id, { status: 'open' });
      expect(ms(open.resolution_due)).toBeGreaterThanOrEqual(before);
      expect((await h.row(t.id)).solved_at).toBeNull();
      await h.setDues(t.id, { first_response: -5, resolution: -5 });
      expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(2);
    });
  });
});

/** An app with its workers running and the SLA sweep every `sweepSeconds`, for the describe block it is called in. */
function withWorkers(sweepSeconds: number): () => TestContext {
  const { ctx } = useTestApp({ env: { SLA_SWEEP_SECONDS: String(sweepSeconds) }, workers: true });
  return () => ctx;
}

/** Waits until the ticket reads as breached, and returns that read. */
const breachedRead = (h: ReturnType<typeof helpers>, ws: Workspace, id: string) =>
  eventually(
    async () => {
      const v = await h.ticket(ws, id);
      return v.sla_breached ? v : undefined;
    },
    10_000,
    'the ticket to be breached',
  );

describe('SLA breaches with the workers running', () => {
  const get = withWorkers(1);
  const h = helpers(get);

  test('the worker registers the sla-sweep scheduler on the maintenance queue, every SLA_SWEEP_SECONDS (10 s unless set)', async () => {
    const schedulers = await get().runtime.queues.queue('maintenance').getJobSchedulers();
    const sweep = schedulers.find((s) => s.key === 'sla-sweep');
    expect(sweep).toBeDefined();
    expect(sweep!.name).toBe('sla.sweep');
    expect(Number(sweep!.every)).toBe(1000);
    expect(loadConfig({}).SLA_SWEEP_SECONDS).toBe(10);
  });

  test('a ticket created and re-prioritised through the API is breached by the sweep soon after its due time, once', async () => {
    const ws = await createWorkspace(get());
    const t = await h.createTicket(ws, 'normal');
    await h.patch(ws, t.id, { priority: 'high' });
    await h.setDues(t.id, { first_response: 2 });
    const due = (await h.row(t.id)).first_response_due;
    expect((await h.ticket(ws, t.id)).sla_breached).toBe(false);

    const breached = await breachedRead(h, ws, t.id);
    const row = await h.row(t.id);
    expect(row.first_response_breached_at!.getTime()).toBeGreaterThanOrEqual(due.getTime());
    // Within a few sweeps of the due time (one a second here), not at the next minute.
    expect(row.first_response_breached_at!.getTime() - due.getTime()).toBeLessThan(5000);
    expect(row.resolution_breached_at).toBeNull();
    const events = breachEvents(breached);
    expect(events).toHaveLength(1);
    expect(events[0]!.actor_type).toBe('system');
    expect(events[0]!.meta).toEqual({ target: 'first_response', due_at: due.toISOString() });

    // Later sweeps find nothing more to mark.
    await new Promise((r) => setTimeout(r, 2500));
    expect(breachEvents(await h.ticket(ws, t.id))).toHaveLength(1);
  });
});

describe('SLA checks an earlier version queued', () => {
  // The sweep runs once at start (nothing is due then) and not again during the test: what breaches is the job.
  const get = withWorkers(3600);
  const h = helpers(get);

  test('a delayed sla.check left in Redis still fires at its due time after an upgrade and breaches the ticket exactly once', async () => {
    const ws = await createWorkspace(get());
    const t = await h.createTicket(ws, 'normal');
    await h.setDues(t.id, { first_response: 1 });
    const due = (await h.row(t.id)).first_response_due;

    const jobId = await get().runtime.queues.enqueue('sla.check', { tenant_id: ws.tenantId, ticket_id: t.id }, { delayMs: 1000 });
    const queue = get().runtime.queues.queue('maintenance');
    expect(await (await Job.fromId(queue, jobId))!.getState()).toBe('delayed');
    expect((await h.ticket(ws, t.id)).sla_breached).toBe(false);

    const breached = await breachedRead(h, ws, t.id);
    const events = breachEvents(breached);
    expect(events).toHaveLength(1);
    expect(events[0]!.actor_type).toBe('system');
    expect(events[0]!.meta).toEqual({ target: 'first_response', due_at: due.toISOString() });

    const row = await h.row(t.id);
    expect(row.first_response_breached_at!.getTime()).toBeGreaterThanOrEqual(due.getTime());
    expect(row.resolution_breached_at).toBeNull();

    const job = await eventually(
      async () => {
        const j = await Job.fromId(queue, jobId);
        return j && (await j.getState()) === 'completed' ? j : undefined;
      },
      5000,
      `job ${jobId} to complete`,
    );
    expect(job.returnvalue).toEqual({ breached: 1 });

    // A repeat of the same check (a stale or duplicate job) finds nothing more.
    await get().runtime.queues.enqueue('sla.check', { tenant_id: ws.tenantId, ticket_id: t.id });
    await new Promise((r) => setTimeout(r, 500));
    expect(breachEvents(await h.ticket(ws, t.id))).toHaveLength(1);
  });
});
