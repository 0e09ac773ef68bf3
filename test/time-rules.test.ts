/**
 * Time-based rules (issue 37): macros whose trigger is a time condition, fired by the minute's sweep
 * (src/domains/macros/time-rules.ts). Time is moved by writing the anchor columns in SQL, never by sleeping. The
 * sweep is run directly (`workerServices.timeRules.run`, what the rules.run job calls) except where real worker
 * processes are the point: two of them sharing a rule, and one SIGKILLed mid-sweep.
 */
import type { ChildProcess } from 'node:child_process';
import { Migrator, sql } from 'kysely';
import { createDb } from '../src/db';
import { ensureDatabase } from '../src/db/admin';
import { migrationProvider } from '../src/db/migrations';
import { newId } from '../src/lib/ids';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { connect } from './helpers/ingest';
import { runId, serverUrl } from './helpers/db-names';
import { helpers, type TicketView } from './helpers/macros';
import { exited, killGroup, spawnWorker, workerStarted, type WorkerProcess } from './helpers/processes';
import { createTicket, setStatus } from './helpers/tickets';
import { nextBatchSize } from '../src/domains/macros/time-rules';
import { useTestApp } from './helpers/use-test-app';
import { eventually, sleep } from './helpers/wait';

const children: ChildProcess[] = [];
const { ctx, workspaces } = useTestApp({
  workspaces: 1,
  teardown: async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) killGroup(c);
    await Promise.all(children.map((c) => exited(c)));
  },
});
const [ws] = workspaces;
/** The workspace of the test running, where a test needs one of its own. */
let fw: Workspace;
const h = helpers(() => ctx);

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Creates a time rule through the API; returns its id. */
async function rule(w: Workspace, time: Json, conditions: Json, actions: Json[], name = `Rule ${Math.random().toString(36).slice(2, 8)}`): Promise<string> {
  const res = await ctx.http.post('/v1/macros').set(bearer(w.ownerKey)).send({ name, actions, trigger: { event: 'time', time, conditions } });
  if (res.status !== 201) throw new Error(`create rule: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

const run = (w: Workspace, macroId: string, opts?: Parameters<typeof ctx.workerServices.timeRules.run>[2]) => ctx.workerServices.timeRules.run(w.tenantId, macroId, opts);

/** Moves a ticket's anchor into the past (or the future, for due times) by rewriting the column: no sleeping. */
async function setAt(ticketId: string, column: string, at: string) {
  await sql`UPDATE tickets SET ${sql.ref(column)} = now() + ${at}::interval WHERE id = ${ticketId}`.execute(ctx.db);
}

async function row(ticketId: string) {
  return ctx.db.selectFrom('tickets').selectAll().where('id', '=', ticketId).executeTakeFirstOrThrow();
}

const fired = (t: TicketView, macroId: string) => t.events.filter((e) => e.kind === 'rule_fired' && e.meta.macro_id === macroId);

async function firings(macroId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM time_rule_firings WHERE macro_id = ${macroId}`.execute(ctx.db);
  return rows[0]!.n;
}

/**
 * `n` tickets of one workspace written in one statement (as a bench would), with the customer and policy of a
 * ticket made through the API; `set` is SQL over the generated row's columns.
 */
async function bulkTickets(w: Workspace, n: number, set: { status: string; statusEnteredAgo: string; tags?: string[] }): Promise<string[]> {
  const seed = (await createTicket(ctx, w)) as { id: string; customer_id: string; sla_policy_id: string };
  const { rows } = await sql<{ id: string }>`
    INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, tags, sla_policy_id,
                         first_response_due, resolution_due, status_entered_at, created_at, updated_at)
    SELECT gen_random_uuid(), ${w.tenantId}, 'Bulk ' || g, 'Generated', ${set.status}, 'normal', 'api', ${seed.customer_id}, ${set.tags ?? []}::text[],
           ${seed.sla_policy_id}, now() + interval '4 hours', now() + interval '1 day', now() - ${set.statusEnteredAgo}::interval,
           now() - interval '5 days', now() - interval '5 days'
    FROM generate_series(1, ${n}) g
    RETURNING id`.execute(ctx.db);
  return rows.map((r) => r.id);
}

/** Per ticket of `ids`: how many rule_fired events the macro left, and how many status changes it made. */
async function perTicket(macroId: string, ids: string[]) {
  const { rows } = await sql<{ ticket_id: string; fired: number; status_changes: number; firing_rows: number }>`
    SELECT t.id AS ticket_id,
      (SELECT count(*)::int FROM ticket_events e WHERE e.tenant_id = t.tenant_id AND e.ticket_id = t.id AND e.kind = 'rule_fired' AND e.meta->>'macro_id' = ${macroId}) AS fired,
      (SELECT count(*)::int FROM ticket_events e WHERE e.tenant_id = t.tenant_id AND e.ticket_id = t.id AND e.kind = 'status_changed' AND e.actor_name LIKE 'Rule: %') AS status_changes,
      (SELECT count(*)::int FROM time_rule_firings f WHERE f.tenant_id = t.tenant_id AND f.ticket_id = t.id AND f.macro_id = ${macroId}) AS firing_rows
    FROM tickets t WHERE t.id = ANY(${ids}::uuid[])`.execute(ctx.db);
  return rows;
}

describe('time conditions are validated', () => {
  test('a time rule is saved with hours_since or hours_until (hours or minutes) and read back as sent', async () => {
    const a = await h.macro(ws, { actions: [{ type: 'set_status', status: 'solved' }], trigger: { event: 'time', time: { hours_since: 'status_entered', hours: 72 }, conditions: { status: 'pending' } } });
    expect(a.trigger).toEqual({ event: 'time', time: { hours_since: 'status_entered', hours: 72 }, conditions: { status: 'pending' } });
    const b = await h.macro(ws, { actions: [{ type: 'add_tags', tags: ['at-risk'] }], trigger: { event: 'time', time: { hours_until: 'resolution_due', minutes: 90 } } });
    expect(b.trigger).toEqual({ event: 'time', time: { hours_until: 'resolution_due', minutes: 90 }, conditions: {} });
    const listed = await h.list(ws.ownerKey);
    expect(listed.find((m) => m.id === a.id)?.trigger).toEqual(a.trigger);
    // A time rule can become a ticket-event macro again, and back.
    const patched = await h.patchMacro(ws.ownerKey, a.id, { trigger: { event: 'ticket.updated', conditions: {} } });
    expect(patched.body.trigger).toEqual({ event: 'ticket.updated', conditions: {} });
  });

  test.each([
    ['hours and minutes both', { hours_since: 'created', hours: 1, minutes: 30 }],
    ['neither hours nor minutes', { hours_since: 'created' }],
    ['a fraction of an hour', { hours_since: 'created', hours: 0.5 }],
    ['more than a year', { hours_since: 'created', hours: 8761 }],
    ['more than a year of minutes', { hours_since: 'created', minutes: 525_601 }],
    ['a negative duration', { hours_since: 'created', hours: -1 }],
    ['hours_until of a timestamp that is not a due time', { hours_until: 'created', hours: 1 }],
    ['both hours_since and hours_until', { hours_since: 'created', hours_until: 'resolution_due', hours: 1 }],
    ['an unknown anchor', { hours_since: 'last_seen', hours: 1 }],
    ['an unknown field', { hours_since: 'created', hours: 1, business: true }],
  ])('a time condition with %s is refused 400 validation_failed', async (_what, time) => {
    const res = await h.postMacro(ws.ownerKey, { name: 'Bad rule', actions: [{ type: 'add_tags', tags: ['x'] }], trigger: { event: 'time', time } });
    expect([res.status, res.body.code]).toEqual([400, 'validation_failed']);
  });

  test('a time rule without a time condition, or a ticket-event trigger with one, is refused 400; bad conditions are the filters\' 422s', async () => {
    expect((await h.postMacro(ws.ownerKey, { name: 'x', actions: [{ type: 'add_tags', tags: ['x'] }], trigger: { event: 'time', conditions: {} } })).status).toBe(400);
    expect((await h.postMacro(ws.ownerKey, { name: 'x', actions: [{ type: 'add_tags', tags: ['x'] }], trigger: { event: 'ticket.created', time: { hours_since: 'created', hours: 1 } } })).status).toBe(400);
    const unknown = await h.postMacro(ws.ownerKey, { name: 'x', actions: [{ type: 'add_tags', tags: ['x'] }], trigger: { event: 'time', time: { hours_since: 'created', hours: 1 }, conditions: { colour: 'red' } } });
    expect([unknown.status, unknown.body.code]).toEqual([422, 'filter_unknown']);
    const invalid = await h.postMacro(ws.ownerKey, { name: 'x', actions: [{ type: 'add_tags', tags: ['x'] }], trigger: { event: 'time', time: { hours_since: 'created', hours: 1 }, conditions: { assignee_id: 'nobody' } } });
    expect([invalid.status, invalid.body.code]).toEqual([422, 'filter_invalid']);
  });
});

describe('the timestamps a rule counts from, kept by the writes that move them', () => {
  test('status_entered_at moves on a status change, a reopen and a merge, and on nothing else', async () => {
    const t = (await createTicket(ctx, ws)) as { id: string };
    const opened = await row(t.id);
    expect(opened.status_entered_at.getTime()).toBe(opened.created_at.getTime());
    await setAt(t.id, 'status_entered_at', '-1 day');
    const before = (await row(t.id)).status_entered_at;
    await h.patchTicket(ws, t.id, { priority: 'high', tags: ['x'] });
    await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'Looking' }).expect(201);
    expect((await row(t.id)).status_entered_at).toEqual(before);
    await setStatus(ctx, ws, t.id, 'pending');
    const pending = (await row(t.id)).status_entered_at;
    expect(pending.getTime()).toBeGreaterThan(before.getTime());
    await setStatus(ctx, ws, t.id, 'solved');
    await setAt(t.id, 'status_entered_at', '-1 day');
    await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(ws.ownerKey)).send().expect(200);
    expect(Date.now() - (await row(t.id)).status_entered_at.getTime()).toBeLessThan(60_000);
    const winner = (await createTicket(ctx, ws)) as { id: string };
    await setAt(t.id, 'status_entered_at', '-1 day');
    await ctx.http.post(`/v1/tickets/${t.id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: winner.id }).expect(200);
    expect(Date.now() - (await row(t.id)).status_entered_at.getTime()).toBeLessThan(60_000);
  });

  test('last_agent_reply_at is the latest reply (a note does not count); last_customer_message_at the latest inbound message, the opening one included', async () => {
    const t = (await createTicket(ctx, ws)) as { id: string };
    expect(await row(t.id)).toMatchObject({ last_agent_reply_at: null, last_customer_message_at: null });
    await ctx.http.post(`/v1/tickets/${t.id}/notes`).set(bearer(ws.ownerKey)).send({ body: 'Internal' }).expect(201);
    expect((await row(t.id)).last_agent_reply_at).toBeNull();
    await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'Hello' }).expect(201);
    const replied = (await row(t.id)).last_agent_reply_at!;
    expect(Date.now() - replied.getTime()).toBeLessThan(60_000);
    // The ticket's read shows what a rule counts from.
    const read = (await h.ticket(ws, t.id)) as unknown as Record<string, unknown>;
    expect(read.last_agent_reply_at).toBe(replied.toISOString());
    expect(read.status_entered_at).toBe((await row(t.id)).status_entered_at.toISOString());
    expect(read).not.toHaveProperty('last_customer_message_at');
    const { rows } = await sql<{ at: Date }>`SELECT created_at AS at FROM ticket_events WHERE ticket_id = ${t.id} AND kind = 'reply'`.execute(ctx.db);
    expect(Math.abs(replied.getTime() - rows[0]!.at.getTime())).toBeLessThan(1_000);

    // Ingest, through the worker's batch write (what POST /v1/ingest queues): the message opens a ticket, the next continues it.
    await connect(ctx, ws, 'sms', { config: { phone_number: '+15550001111' } }).catch(() => undefined);
    const from = `+1555${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;
    const item = (body: string) => ({ id: `corr-${Math.random().toString(36).slice(2)}`, tenant_id: ws.tenantId, channel: 'sms', message: { providerMessageId: `SM${Math.random().toString(16).slice(2)}`, sender: { handle: from }, conversationKey: from, body } });
    const [first] = await ctx.workerServices.ingestProcessor.processBatch([item('My parcel is late')]);
    const ticketId = (first!.value as { ticket_id: string }).ticket_id;
    const openedBy = await row(ticketId);
    expect(openedBy.last_customer_message_at?.getTime()).toBe(openedBy.created_at.getTime());
    await setAt(ticketId, 'last_customer_message_at', '-2 days');
    const [second] = await ctx.workerServices.ingestProcessor.processBatch([item('Any news?')]);
    expect((second!.value as { ticket_id: string }).ticket_id).toBe(ticketId);
    const { rows: inbound } = await sql<{ at: Date }>`SELECT max(created_at) AS at FROM ticket_events WHERE ticket_id = ${ticketId} AND kind = 'inbound_sms'`.execute(ctx.db);
    expect((await row(ticketId)).last_customer_message_at).toEqual(inbound[0]!.at);
  });

  test('a ticket filter of assignee_id=none (or team_id=none) lists the unassigned tickets, alone or with ids', async () => {
    const [a, b] = [(await createTicket(ctx, ws)) as { id: string }, (await createTicket(ctx, ws, { assignee_id: ws.ownerId })) as { id: string }];
    const list = async (q: string) => ((await ctx.http.get(`/v1/tickets?${q}&limit=500`).set(bearer(ws.ownerKey)).expect(200)).body.tickets as { id: string }[]).map((t) => t.id);
    expect(await list('assignee_id=none')).toContain(a.id);
    expect(await list('assignee_id=none')).not.toContain(b.id);
    expect(await list(`assignee_id=none,${ws.ownerId}`)).toEqual(expect.arrayContaining([a.id, b.id]));
    expect(await list(`assignee_id=${ws.ownerId}`)).not.toContain(a.id);
    expect(await list('team_id=none')).toEqual(expect.arrayContaining([a.id, b.id]));
    expect((await ctx.http.get('/v1/tickets?assignee_id=nobody').set(bearer(ws.ownerKey))).status).toBe(400);
  });
});

describe('the backfill of migration 0041', () => {
  test('status_entered_at: the latest status event (not a merge\'s copies), else created_at for a ticket still open, else updated_at; message times from the timeline; no ETag moves', async () => {
    const name = `hd_t_${runId()}_rules_backfill_${Math.random().toString(16).slice(2, 10)}`;
    const url = serverUrl(name);
    await ensureDatabase(url);
    const handle = createDb({ DATABASE_URL: url, PG_POOL_MAX: 2, PG_CONNECT_TIMEOUT_MS: 5_000, PG_STATEMENT_TIMEOUT_MS: 60_000 });
    try {
      const migrator = new Migrator({ db: handle.db, provider: migrationProvider });
      expect((await migrator.migrateTo('0040_schedules')).error).toBeUndefined();
      const db = handle.db;
      const [tenant, customer, policy] = [newId(), newId(), newId()];
      await sql`INSERT INTO tenants (id, name) VALUES (${tenant}, 'Backfill')`.execute(db);
      await sql`INSERT INTO customers (id, tenant_id, display_name, email) VALUES (${customer}, ${tenant}, 'Maya', 'maya@example.test')`.execute(db);
      await sql`INSERT INTO sla_policies (id, tenant_id, name, is_default, targets) VALUES (${policy}, ${tenant}, 'Default', true, '{}')`.execute(db);
      const ticket = async (status: string, created: string, updated: string) => {
        const id = newId();
        await sql`INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id, first_response_due, resolution_due, created_at, updated_at)
          VALUES (${id}, ${tenant}, 'S', 'D', ${status}, 'normal', 'email', ${customer}, ${policy}, now(), now(), ${created}::timestamptz, ${updated}::timestamptz)`.execute(db);
        return id;
      };
      const event = (ticketId: string, kind: string, at: string, meta: Json = {}) =>
        sql`INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, created_at)
          VALUES (${newId()}, ${tenant}, ${ticketId}, ${kind}, '', ${JSON.stringify(meta)}::jsonb, 'user', ${at}::timestamptz)`.execute(db);
      const moved = await ticket('pending', '2026-01-01T00:00:00Z', '2026-01-09T00:00:00Z');
      await event(moved, 'inbound_email', '2026-01-01T00:00:00Z');
      await event(moved, 'status_changed', '2026-01-03T00:00:00Z', { from: 'open', to: 'pending' });
      await event(moved, 'reply', '2026-01-04T00:00:00Z');
      await event(moved, 'inbound_sms', '2026-01-05T00:00:00Z');
      await event(moved, 'internal_note', '2026-01-08T00:00:00Z');
      // A merge's copy of another ticket's later status change is that ticket's history, not this one's.
      await event(moved, 'status_changed', '2026-01-06T00:00:00Z', { from: 'open', to: 'solved', via_merge: newId() });
      const untouched = await ticket('open', '2026-02-01T00:00:00Z', '2026-02-05T00:00:00Z');
      const unknown = await ticket('on_hold', '2026-03-01T00:00:00Z', '2026-03-04T00:00:00Z');
      const versions = await sql<{ id: string; version: string }>`SELECT id, version FROM tickets`.execute(db);

      expect((await migrator.migrateTo('0041_time_rules')).error).toBeUndefined();
      const { rows } = await sql<{ id: string; status_entered_at: Date; last_customer_message_at: Date | null; last_agent_reply_at: Date | null; version: string }>`
        SELECT id, status_entered_at, last_customer_message_at, last_agent_reply_at, version FROM tickets`.execute(db);
      const by = new Map(rows.map((r) => [r.id, r]));
      expect(by.get(moved)).toMatchObject({
        status_entered_at: new Date('2026-01-03T00:00:00Z'),
        last_customer_message_at: new Date('2026-01-05T00:00:00Z'),
        last_agent_reply_at: new Date('2026-01-04T00:00:00Z'),
      });
      expect(by.get(untouched)).toMatchObject({ status_entered_at: new Date('2026-02-01T00:00:00Z'), last_customer_message_at: null, last_agent_reply_at: null });
      expect(by.get(unknown)?.status_entered_at).toEqual(new Date('2026-03-04T00:00:00Z'));
      expect(rows.map((r) => [r.id, r.version]).sort()).toEqual(versions.rows.map((r) => [r.id, r.version]).sort());
      // NOT NULL from now on, with the time of the insert when a writer gives none.
      const later = await ticket('open', '2026-04-01T00:00:00Z', '2026-04-01T00:00:00Z');
      expect((await sql<{ at: Date }>`SELECT status_entered_at AS at FROM tickets WHERE id = ${later}`.execute(db)).rows[0]!.at).toBeInstanceOf(Date);
      await expect(sql`UPDATE tickets SET status_entered_at = NULL WHERE id = ${later}`.execute(db)).rejects.toThrow(/null value/);
    } finally {
      await handle.close();
      const admin = createDb({ DATABASE_URL: serverUrl('postgres'), PG_POOL_MAX: 1, PG_CONNECT_TIMEOUT_MS: 5_000, PG_STATEMENT_TIMEOUT_MS: 60_000 });
      await sql`DROP DATABASE IF EXISTS ${sql.id(name)} WITH (FORCE)`.execute(admin.db);
      await admin.close();
    }
  });
});

describe('each condition kind fires on the tickets past it, and only on those', () => {
  // A workspace per test: a rule sees every ticket of its workspace, and earlier tests leave theirs behind.
  beforeEach(async () => {
    fw = await createWorkspace(ctx);
  });
  /** One case: the rule's time condition and filters, and how to make a ticket qualify or (nearly) not. */
  const cases: [string, Json, Json, (id: string) => Promise<void>, (id: string) => Promise<void>][] = [
    ['hours since created', { hours_since: 'created', hours: 2 }, {}, (id) => setAt(id, 'created_at', '-3 hours'), (id) => setAt(id, 'created_at', '-1 hour')],
    ['hours since updated', { hours_since: 'updated', hours: 48 }, {}, (id) => setAt(id, 'updated_at', '-49 hours'), (id) => setAt(id, 'updated_at', '-47 hours')],
    ['hours since the last customer message', { hours_since: 'last_customer_message', hours: 24 }, {}, (id) => setAt(id, 'last_customer_message_at', '-25 hours'), (id) => setAt(id, 'last_customer_message_at', '-23 hours')],
    ['hours since the last agent reply', { hours_since: 'last_agent_reply', hours: 24 }, {}, (id) => setAt(id, 'last_agent_reply_at', '-25 hours'), async () => {}],
    [
      'hours since the status was entered (pending for 3 days)',
      { hours_since: 'status_entered', hours: 72 },
      { status: 'pending' },
      async (id) => {
        await setStatus(ctx, fw, id, 'pending');
        await setAt(id, 'status_entered_at', '-73 hours');
      },
      async (id) => {
        await setStatus(ctx, fw, id, 'on_hold');
        await setAt(id, 'status_entered_at', '-100 hours');
      },
    ],
    [
      'minutes since created, unassigned (30 minutes)',
      { hours_since: 'created', minutes: 30 },
      { assignee_id: 'none' },
      (id) => setAt(id, 'created_at', '-31 minutes'),
      async (id) => {
        await setAt(id, 'created_at', '-31 minutes');
        await h.patchTicket(fw, id, { assignee_id: fw.ownerId });
      },
    ],
    ['first response overdue by 2 hours', { hours_since: 'first_response_due', hours: 2 }, {}, (id) => setAt(id, 'first_response_due', '-3 hours'), (id) => setAt(id, 'first_response_due', '-1 hour')],
    [
      'first response overdue, but answered',
      { hours_since: 'first_response_due', hours: 0 },
      {},
      (id) => setAt(id, 'first_response_due', '-1 minute'),
      async (id) => {
        await ctx.http.post(`/v1/tickets/${id}/replies`).set(bearer(fw.ownerKey)).send({ body: 'Answered' }).expect(201);
        await setAt(id, 'first_response_due', '-1 hour');
      },
    ],
    [
      'next reply due within 30 minutes (a customer wrote again after a reply), and not once answered',
      { hours_until: 'next_reply_due', minutes: 30 },
      {},
      (id) => setAt(id, 'next_reply_due', '20 minutes'),
      async (id) => {
        await setAt(id, 'next_reply_due', '20 minutes');
        await ctx.http.post(`/v1/tickets/${id}/replies`).set(bearer(fw.ownerKey)).send({ body: 'Answered' }).expect(201);
      },
    ],
    ['resolution due within 4 hours', { hours_until: 'resolution_due', hours: 4 }, {}, (id) => setAt(id, 'resolution_due', '3 hours'), (id) => setAt(id, 'resolution_due', '5 hours')],
    [
      'resolution due within 4 hours, but solved',
      { hours_until: 'resolution_due', hours: 4 },
      {},
      (id) => setAt(id, 'resolution_due', '-1 hour'),
      async (id) => {
        await setStatus(ctx, fw, id, 'solved');
        await setAt(id, 'resolution_due', '-1 hour');
      },
    ],
  ];

  test.each(cases)('%s', async (_name, time, conditions, qualify, miss) => {
    const m = await rule(fw, time, conditions, [{ type: 'add_tags', tags: ['escalate'] }]);
    const yes = (await createTicket(ctx, fw)) as { id: string };
    const no = (await createTicket(ctx, fw)) as { id: string };
    const fresh = (await createTicket(ctx, fw)) as { id: string };
    await qualify(yes.id);
    await miss(no.id);
    const out = await run(fw, m);
    expect(out).toMatchObject({ fired: 1, done: true });
    expect((await h.ticket(fw, yes.id)).tags).toEqual(['escalate']);
    expect(fired(await h.ticket(fw, no.id), m)).toEqual([]);
    expect(fired(await h.ticket(fw, fresh.id), m)).toEqual([]);
    expect(await firings(m)).toBe(1);
  });
});

describe('once per stretch', () => {
  beforeEach(async () => {
    fw = await createWorkspace(ctx);
  });
  test('a rule fires once per stretch: a second sweep is a no-op; a new stretch (the anchor reset) fires it again', async () => {
    const m = await rule(fw, { hours_since: 'status_entered', hours: 72 }, { status: 'pending' }, [{ type: 'add_note', body: 'Still waiting on the customer.' }]);
    const t = (await createTicket(ctx, fw)) as { id: string };
    await setStatus(ctx, fw, t.id, 'pending');
    await setAt(t.id, 'status_entered_at', '-73 hours');
    expect((await run(fw, m)).fired).toBe(1);
    // A note is never "already done": only the stretch keeps it from firing again.
    expect((await run(fw, m)).fired).toBe(0);
    expect(fired(await h.ticket(fw, t.id), m)).toHaveLength(1);

    // Back to open and pending again: a new stretch, not yet 72 hours old.
    await setStatus(ctx, fw, t.id, 'open');
    await setStatus(ctx, fw, t.id, 'pending');
    expect((await run(fw, m)).fired).toBe(0);
    await setAt(t.id, 'status_entered_at', '-80 hours');
    expect((await run(fw, m)).fired).toBe(1);
    const view = await h.ticket(fw, t.id);
    expect(fired(view, m)).toHaveLength(2);
    expect(view.events.filter((e) => e.kind === 'internal_note' && e.body === 'Still waiting on the customer.')).toHaveLength(2);
    expect(await firings(m)).toBe(2);
  });

  test('a rule whose actions already hold leaves the ticket alone: "→ on hold" fires once and not on the on-hold ticket; "→ add tag" not on a tagged one', async () => {
    const hold = await rule(fw, { hours_since: 'status_entered', hours: 48 }, {}, [{ type: 'set_status', status: 'on_hold' }]);
    const t = (await createTicket(ctx, fw)) as { id: string };
    await setAt(t.id, 'status_entered_at', '-49 hours');
    expect((await run(fw, hold)).fired).toBe(1);
    expect((await h.ticket(fw, t.id)).status).toBe('on_hold');
    // On hold for 49 hours too (the rule has no status filter): putting it on hold again would change nothing.
    await setAt(t.id, 'status_entered_at', '-49 hours');
    expect((await run(fw, hold)).fired).toBe(0);
    expect(fired(await h.ticket(fw, t.id), hold)).toHaveLength(1);

    const tag = await rule(fw, { hours_since: 'created', hours: 1 }, {}, [{ type: 'add_tags', tags: ['stale', 'old'] }]);
    const tagged = (await createTicket(ctx, fw, { tags: ['old', 'stale'] })) as { id: string };
    const half = (await createTicket(ctx, fw, { tags: ['old'] })) as { id: string };
    await setAt(tagged.id, 'created_at', '-2 hours');
    await setAt(half.id, 'created_at', '-2 hours');
    expect((await run(fw, tag)).fired).toBe(1);
    expect(fired(await h.ticket(fw, tagged.id), tag)).toEqual([]);
    expect((await h.ticket(fw, half.id)).tags.sort()).toEqual(['old', 'stale']);
  });

  test('each firing is on the timeline (rule_fired naming the rule, after its changes) and in the outbound events', async () => {
    const m = await rule(fw, { hours_since: 'status_entered', hours: 72 }, { status: 'pending' }, [{ type: 'set_status', status: 'solved' }, { type: 'add_tags', tags: ['auto-solved'] }], 'Solve stale pending');
    const t = (await createTicket(ctx, fw)) as { id: string };
    await setStatus(ctx, fw, t.id, 'pending');
    await setAt(t.id, 'status_entered_at', '-73 hours');
    const anchor = (await row(t.id)).status_entered_at;
    await run(fw, m);
    const view = await h.ticket(fw, t.id);
    const byRule = view.events.filter((e) => e.actor_name === 'Rule: Solve stale pending');
    expect(byRule.map((e) => e.kind)).toEqual(['status_changed', 'fields_changed', 'rule_fired']);
    for (const e of byRule) expect(e.actor_type).toBe('system');
    expect(byRule.at(-1)!.meta).toEqual({ macro_id: m, name: 'Solve stale pending', skipped: 0, condition: { hours_since: 'status_entered', hours: 72 }, anchor_at: anchor.toISOString() });

    const log = (await ctx.http.get('/v1/events?limit=500').set(bearer(fw.ownerKey)).expect(200)).body.events as { type: string; data: Json }[];
    const mine = log.filter((e) => e.data.ticket?.id === t.id).map((e) => e.type);
    expect(mine.slice(-3)).toEqual(['ticket.status_changed', 'ticket.updated', 'ticket.rule_fired']);
    const ruleFired = log.find((e) => e.type === 'ticket.rule_fired' && e.data.ticket.id === t.id)!;
    expect(ruleFired.data).toMatchObject({ ticket: { id: t.id, status: 'solved', tags: ['auto-solved'] }, event: { kind: 'rule_fired', meta: { macro_id: m } } });
    const filtered = (await ctx.http.get('/v1/events?types=ticket.rule_fired&limit=500').set(bearer(fw.ownerKey)).expect(200)).body.events as { type: string }[];
    expect(filtered.length).toBeGreaterThan(0);
    expect(new Set(filtered.map((e) => e.type))).toEqual(new Set(['ticket.rule_fired']));
  });

  test('a disabled rule never fires; solved, closed, spam and merged tickets are never touched; the rule is its workspace\'s alone', async () => {
    const m = await rule(fw, { hours_since: 'created', hours: 1 }, {}, [{ type: 'add_tags', tags: ['touched'] }]);
    const [open, solved, closed, spam, merged, winner] = await Promise.all(Array.from({ length: 6 }, () => createTicket(ctx, fw) as Promise<{ id: string }>));
    await setStatus(ctx, fw, solved!.id, 'solved');
    await setStatus(ctx, fw, closed!.id, 'closed');
    await setStatus(ctx, fw, spam!.id, 'spam');
    await ctx.http.post(`/v1/tickets/${merged!.id}/merge`).set(bearer(fw.ownerKey)).send({ target_ticket_id: winner!.id }).expect(200);
    for (const t of [open, solved, closed, spam, merged]) await setAt(t!.id, 'created_at', '-2 hours');
    expect((await h.patchMacro(fw.ownerKey, m, { enabled: false })).status).toBe(200);
    expect(await run(fw, m)).toMatchObject({ fired: 0, done: true });
    expect((await h.patchMacro(fw.ownerKey, m, { enabled: true })).status).toBe(200);
    // Asked of another workspace, the rule's id names no rule there.
    expect(await ctx.workerServices.timeRules.run('00000000-0000-4000-8000-000000000000', m)).toMatchObject({ fired: 0, batches: 0 });
    expect((await run(fw, m)).fired).toBeGreaterThanOrEqual(1);
    expect(fired(await h.ticket(fw, open!.id), m)).toHaveLength(1);
    for (const t of [solved, closed, spam, merged]) expect(fired(await h.ticket(fw, t!.id), m)).toEqual([]);
  });

  test('a rule\'s changes set off no ticket-event macro (rules and triggers cannot set each other off in a loop)', async () => {
    const listener = await h.macro(fw, { actions: [{ type: 'add_tags', tags: ['triggered'] }], trigger: { event: 'ticket.updated', conditions: {} } });
    const m = await rule(fw, { hours_since: 'created', hours: 1 }, {}, [{ type: 'set_priority', priority: 'urgent' }]);
    const t = (await createTicket(ctx, fw)) as { id: string };
    await setAt(t.id, 'created_at', '-2 hours');
    expect((await run(fw, m)).fired).toBe(1);
    expect(await h.triggerJobs(t.id)).toEqual([]);
    expect(await h.runs(listener.id)).toBe(0);
    expect((await h.ticket(fw, t.id)).priority).toBe('urgent');
  });

  test('the sweep queues one rules.run per enabled time rule, once per minute however often it runs', async () => {
    const [one, two, off] = [
      await rule(fw, { hours_since: 'created', hours: 1 }, {}, [{ type: 'add_tags', tags: ['a'] }]),
      await rule(fw, { hours_until: 'resolution_due', hours: 1 }, {}, [{ type: 'add_tags', tags: ['b'] }]),
      await rule(fw, { hours_since: 'updated', hours: 1 }, {}, [{ type: 'add_tags', tags: ['c'] }]),
    ];
    await h.patchMacro(fw.ownerKey, off, { enabled: false });
    await h.macro(fw, { actions: [{ type: 'add_tags', tags: ['d'] }], trigger: { event: 'ticket.created', conditions: {} } });
    const before = await ctx.runtime.queues.queue('maintenance').getJobs(['wait', 'waiting', 'prioritized', 'delayed']);
    const now = Date.UTC(2030, 0, 1, 12, 0, 30);
    const first = await ctx.workerServices.timeRules.sweep(now);
    await ctx.workerServices.timeRules.sweep(now + 20_000);
    const jobs = (await ctx.runtime.queues.queue('maintenance').getJobs(['wait', 'waiting', 'prioritized', 'delayed'])).filter((j) => j.name === 'rules.run' && !before.some((b) => b.id === j.id));
    const mine = jobs.filter((j) => j.data.tenant_id === fw.tenantId);
    expect(first.rules).toBeGreaterThanOrEqual(mine.length);
    expect(mine.map((j) => j.data.macro_id).sort()).toEqual([one, two].sort());
    expect(new Set(mine.map((j) => j.id))).toEqual(new Set([one, two].map((m) => `rules-${fw.tenantId}-${m}-${Math.floor(now / 60_000)}`)));
    for (const j of jobs) await j.remove();
  });
});

describe('each batch is sized to last about TIME_RULE_BATCH_MS', () => {
  test('a batch that took twice the target halves the next; a fast one at most doubles it; never past the most, never under one', () => {
    expect(nextBatchSize(400, 2_000, 1_000, 500)).toBe(200);
    expect(nextBatchSize(100, 100, 1_000, 500)).toBe(200);
    expect(nextBatchSize(400, 100, 1_000, 500)).toBe(500);
    expect(nextBatchSize(300, 1_000, 1_000, 500)).toBe(300);
    expect(nextBatchSize(1, 60_000, 1_000, 500)).toBe(1);
    expect(nextBatchSize(50, 0, 1_000, 500)).toBe(100);
  });
});

describe('10,000 qualifying tickets in one sweep, no row locked longer than its batch', () => {
  test('one run fires all 10,000 in transactions of at most 500 rows (TIME_RULE_LANES of them at once); a committed batch\'s tickets are free while later ones run', async () => {
    await sql`CREATE EXTENSION IF NOT EXISTS pgrowlocks`.execute(ctx.db);
    const w = await createWorkspace(ctx);
    const ids = await bulkTickets(w, 10_000, { status: 'pending', statusEnteredAgo: '4 days' });
    const m = await rule(w, { hours_since: 'status_entered', hours: 72 }, { status: 'pending' }, [{ type: 'add_tags', tags: ['stale'] }]);

    // Sampled while the run goes: the distinct tickets row-locked at once (pgrowlocks reads the lock bits in the
    // heap; joined to the versions this snapshot sees, a ticket counts once however often the batch rewrote it).
    const samples: number[] = [];
    let freeWhileRunning = 0;
    let running = true;
    const sampler = (async () => {
      while (running) {
        const { rows } = await sql<{ n: number }>`SELECT count(DISTINCT t.id)::int AS n FROM pgrowlocks('tickets') p JOIN tickets t ON t.ctid = p.locked_row WHERE t.tenant_id = ${w.tenantId}`.execute(ctx.db);
        samples.push(rows[0]!.n);
        // Tickets of a committed batch, locked NOWAIT while the run is still taking later batches: nothing holds them.
        const firedSoFar = await firings(m);
        const done = await sql<{ ticket_id: string }>`SELECT ticket_id FROM time_rule_firings WHERE macro_id = ${m} LIMIT 500`.execute(ctx.db);
        if (running && firedSoFar > 0 && firedSoFar < 10_000) {
          await ctx.db.transaction().execute(async (tx) => {
            await sql`SELECT id FROM tickets WHERE tenant_id = ${w.tenantId} AND id = ANY(${done.rows.map((r) => r.ticket_id)}::uuid[]) FOR UPDATE NOWAIT`.execute(tx);
          });
          freeWhileRunning += 1;
        }
        await sleep(100);
      }
    })();
    // One run without the job's 50-second budget (a job stopped by it leaves the rest to the next minute's).
    const sizes: { limit: number; seen: number }[] = [];
    const out = await run(w, m, { budgetMs: 600_000, onBatch: (b) => sizes.push(b) }).finally(() => {
      running = false;
    });
    await sampler;

    expect(out).toMatchObject({ fired: 10_000, seen: 10_000, done: true });
    // At least 20 transactions (at most TIME_RULE_BATCH_SIZE = 500 each: how many depends on what a ticket costs here).
    expect(out.batches).toBeGreaterThanOrEqual(21);
    expect(sizes.filter((b) => b.seen > b.limit || b.limit > 500)).toEqual([]);
    expect(sizes.reduce((n, b) => n + b.seen, 0)).toBe(10_000);
    // Each lane holds at most one batch's locks; the lanes (two by default) together at most that many batches'.
    expect(ctx.config.TIME_RULE_LANES).toBe(2);
    expect(Math.max(...samples)).toBeLessThanOrEqual(500 * ctx.config.TIME_RULE_LANES);
    expect(samples.some((n) => n > 0)).toBe(true);
    expect(freeWhileRunning).toBeGreaterThan(0);
    const counts = await perTicket(m, ids);
    expect(counts.filter((c) => c.fired !== 1 || c.firing_rows !== 1)).toEqual([]);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM tickets WHERE tenant_id = ${w.tenantId} AND tags @> ARRAY['stale']`.execute(ctx.db);
    expect(rows[0]!.n).toBe(10_000);
    // The sweep after it finds nothing: every ticket carries the tag (and fired for this stretch); each lane one empty batch.
    expect(await run(w, m)).toMatchObject({ fired: 0, seen: 0, batches: ctx.config.TIME_RULE_LANES });
  }, 600_000);
});

describe('real worker processes', () => {
  const workerEnv = { TIME_RULE_BATCH_SIZE: '40', WORKER_CONCURRENCY: '2', LOG_LEVEL: 'info' };
  function worker(): WorkerProcess {
    const w = spawnWorker(ctx.config, { detached: true, env: workerEnv });
    children.push(w.proc);
    return w;
  }
  /** What one worker process's "time rule run" lines add up to: tickets fired, by rule. */
  const firedBy = (w: WorkerProcess, macroId: string) =>
    w
      .stdout()
      .split('\n')
      .filter((l) => l.includes('"time rule run"') && l.includes(macroId))
      .reduce((n, l) => n + (JSON.parse(l) as { fired: number }).fired, 0);
  /** No rules.run of the workspace waiting or running (the schedulers' own next runs are always there, delayed). */
  const runsDone = async (tenantId: string) => {
    const jobs = await ctx.runtime.queues.queue('maintenance').getJobs(['wait', 'waiting', 'active', 'prioritized']);
    return !jobs.some((j) => j?.name === 'rules.run' && (j.data as { tenant_id?: string }).tenant_id === tenantId);
  };

  test('exactly once with two workers: two rules, each run four times at once across both processes; every ticket fired once per rule', async () => {
    const w = await createWorkspace(ctx);
    const ids = await bulkTickets(w, 1_500, { status: 'pending', statusEnteredAgo: '4 days' });
    // Both rules keep every ticket live (a rule that solved them would rightly leave the other nothing to fire on).
    const hold = await rule(w, { hours_since: 'status_entered', hours: 72 }, { status: 'pending' }, [{ type: 'set_status', status: 'on_hold' }, { type: 'add_note', body: 'On hold for inactivity.' }]);
    const tag = await rule(w, { hours_since: 'created', hours: 24 }, {}, [{ type: 'set_priority', priority: 'high' }, { type: 'add_tags', tags: ['aged'] }]);
    const [a, b] = [worker(), worker()];
    await Promise.all([workerStarted(a), workerStarted(b)]);
    // As four minutes' sweeps would queue them, all at once: eight runs racing over the same tickets.
    for (const slot of [1, 2, 3, 4]) {
      for (const m of [hold, tag]) await ctx.runtime.queues.enqueue('rules.run', { tenant_id: w.tenantId, macro_id: m, slot });
    }
    await eventually(async () => ((await firings(hold)) === 1_500 && (await firings(tag)) === 1_500 && (await runsDone(w.tenantId)) ? true : undefined), 300_000, 'both rules to fire on every ticket', 250);

    // The processes' logs reach this one through pipes: wait for their accounts to arrive before adding them up.
    await eventually(async () => (firedBy(a, hold) + firedBy(b, hold) >= 1_500 && firedBy(a, tag) + firedBy(b, tag) >= 1_500 ? true : undefined), 10_000, 'the workers\' run logs');
    for (const m of [hold, tag]) {
      const counts = await perTicket(m, ids);
      expect(counts.filter((c) => c.fired !== 1 || c.firing_rows !== 1)).toEqual([]);
      // Applied exactly as often as it fired: the processes' own accounts add up to one application per ticket.
      expect(firedBy(a, m) + firedBy(b, m)).toBe(1_500);
    }
    expect((await perTicket(hold, ids)).filter((c) => c.status_changes !== 1)).toEqual([]);
    // Both processes took part.
    expect(firedBy(a, hold) + firedBy(a, tag)).toBeGreaterThan(0);
    expect(firedBy(b, hold) + firedBy(b, tag)).toBeGreaterThan(0);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM ticket_events WHERE tenant_id = ${w.tenantId} AND kind = 'internal_note' AND body = 'On hold for inactivity.'`.execute(ctx.db);
    expect(rows[0]!.n).toBe(1_500);
    for (const p of [a, b]) {
      killGroup(p.proc);
      await exited(p.proc);
    }
  }, 400_000);

  test('under a worker SIGKILL mid-sweep: the killed batch commits nothing, the next run finishes, every ticket fired exactly once', async () => {
    const w = await createWorkspace(ctx);
    const ids = await bulkTickets(w, 2_000, { status: 'pending', statusEnteredAgo: '4 days' });
    const m = await rule(w, { hours_since: 'status_entered', hours: 72 }, { status: 'pending' }, [{ type: 'set_status', status: 'solved' }, { type: 'add_tags', tags: ['auto'] }, { type: 'add_note', body: 'Solved by rule.' }]);
    const a = worker();
    await workerStarted(a);
    await ctx.runtime.queues.enqueue('rules.run', { tenant_id: w.tenantId, macro_id: m, slot: 1 });
    // Killed once some batches committed and more remain: mid-sweep, most likely inside a batch's transaction.
    const atKill = await eventually(
      async () => {
        const n = await firings(m);
        return n >= 80 && n < 2_000 ? n : undefined;
      },
      60_000,
      'the run to be mid-sweep',
      5,
    );
    killGroup(a.proc);
    await exited(a.proc);
    // Whatever the killed batch did is gone with its transaction: firing row, rule_fired event and changes go together.
    const afterKill = await perTicket(m, ids);
    const states = await ctx.db.selectFrom('tickets').select(['id', 'status']).where('tenant_id', '=', w.tenantId).where('id', 'in', ids).execute();
    const solved = new Set(states.filter((s) => s.status === 'solved').map((s) => s.id));
    expect(afterKill.filter((c) => c.fired !== c.firing_rows || c.fired !== (solved.has(c.ticket_id) ? 1 : 0) || c.fired > 1)).toEqual([]);
    expect(afterKill.filter((c) => c.fired === 1).length).toBeGreaterThanOrEqual(atKill);
    expect(afterKill.filter((c) => c.fired === 1).length).toBeLessThan(2_000);

    // The next minutes' sweeps queue the rule again (new slots: the dead worker's job still holds the old one), one
    // every two seconds here, until every ticket has fired: a ticket the dead connection still held when a run
    // passed it was skipped, and is the next run's.
    const b = worker();
    await workerStarted(b);
    let slot = 2;
    await eventually(
      async () => {
        if ((await firings(m)) === 2_000) return true;
        await ctx.runtime.queues.enqueue('rules.run', { tenant_id: w.tenantId, macro_id: m, slot: slot++ });
        await sleep(2_000);
        return undefined;
      },
      300_000,
      'the rule to fire on every ticket',
      0,
    );
    const final = await perTicket(m, ids);
    expect(final.filter((c) => c.fired !== 1 || c.firing_rows !== 1 || c.status_changes !== 1)).toEqual([]);
    const { rows } = await sql<{ notes: number; tagged: number }>`
      SELECT (SELECT count(*)::int FROM ticket_events WHERE tenant_id = ${w.tenantId} AND kind = 'internal_note' AND body = 'Solved by rule.') AS notes,
             (SELECT count(*)::int FROM tickets WHERE tenant_id = ${w.tenantId} AND status = 'solved' AND tags @> ARRAY['auto']) AS tagged`.execute(ctx.db);
    expect(rows[0]).toEqual({ notes: 2_000, tagged: 2_000 });
    killGroup(b.proc);
    await exited(b.proc);
  }, 400_000);
});
