/**
 * Business-time SLA (issue 37): a policy naming a schedule counts its targets in business minutes, pauses the
 * resolution clock while the ticket is pending or on hold (Zendesk's requester wait time) and keeps a next-reply
 * clock. Expected due times are computed with src/domains/schedules/business-time.ts from the row's own instants
 * (that module is checked against a minute-by-minute walk in test/business-time.test.ts); calendar policies keep
 * their behaviour (test/sla.test.ts).
 */
import { sql } from 'kysely';
import { addBusinessMinutes, businessMinutesBetween, compileSchedule, type MinuteInterval } from '../src/domains/schedules/business-time';
import type { EventActor } from '../src/domains/tickets/commands';
import { bearer, type Workspace } from './helpers/factories';
import { getTicket, patchTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const OFFICE = { start: '09:00', end: '17:00' };
const WEEK = { mon: [OFFICE], tue: [OFFICE], wed: [OFFICE], thu: [OFFICE], fri: [OFFICE] };
const CLOCK = compileSchedule({ timeZone: 'Europe/Berlin', weekly: [0, 1, 2, 3, 4, 5, 6].map((d) => (d < 5 ? [[540, 1020]] : [])) as MinuteInterval[][], holidays: [] });
const TARGETS = {
  urgent: { first_response_minutes: 30, resolution_minutes: 240, next_reply_minutes: 60 },
  high: { first_response_minutes: 60, resolution_minutes: 480, next_reply_minutes: 120 },
  normal: { first_response_minutes: 120, resolution_minutes: 960, next_reply_minutes: 240 },
  low: { first_response_minutes: 480, resolution_minutes: 2400 },
};
const CUSTOMER: EventActor = { actor_type: 'customer', actor_user_id: null, actor_name: 'Maya Fischer' };

interface TicketView {
  id: string;
  status: string;
  first_response_due: string;
  resolution_due: string;
  next_reply_due?: string;
  resolution_paused_at?: string;
  resolution_remaining_minutes?: number;
  sla_breached: boolean;
  events: { kind: string; meta: Record<string, unknown> }[];
}

describe('SLA in business time', () => {
  const { ctx, ws } = useTestApp({
    workspaces: 1,
    // The workspace's default policy counts on office hours in Berlin.
    setup: async ({ ctx, ws }) => {
      const s = await ctx.http.post('/v1/schedules').set(bearer(ws.ownerKey)).send({ name: 'Berlin office', time_zone: 'Europe/Berlin', weekly_hours: WEEK });
      const p = await ctx.http.post('/v1/sla-policies').set(bearer(ws.ownerKey)).send({ name: 'Business hours', targets: TARGETS, schedule_id: s.body.id, is_default: true });
      if (p.status !== 201) throw new Error(`policy: ${p.status} ${JSON.stringify(p.body)}`);
    },
  });
  const row = (id: string) => ctx.db.selectFrom('tickets').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const patch = (id: string, body: Record<string, unknown>) => patchTicket<TicketView>(ctx, ws, id, body);
  async function open(w: Workspace, priority = 'normal'): Promise<TicketView> {
    const res = await ctx.http.post('/v1/tickets').set(bearer(w.ownerKey)).send({ subject: 'Invoice', description: 'Charged twice', customer_email: `c${Math.random()}@example.test`, priority });
    if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as TicketView;
  }
  async function customerWrites(id: string) {
    const commands = ctx.services.tickets.commands;
    await ctx.db.transaction().execute(async (tx) => {
      const t = await commands.lockForChange(tx, ws.tenantId, id);
      await commands.appendInbound(tx, ws.tenantId, [{ by: CUSTOMER, ticket: t, kind: 'inbound_email', body: 'Any news?', meta: {} }]);
    });
  }
  async function reply(id: string) {
    const res = await ctx.http.post(`/v1/tickets/${id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'Looking into it.' });
    if (res.status !== 201) throw new Error(`reply: ${res.status} ${JSON.stringify(res.body)}`);
  }
  const setColumn = (id: string, column: string, at: string) => sql`UPDATE tickets SET ${sql.ref(column)} = ${at}::timestamptz WHERE id = ${id}`.execute(ctx.db);

  test('a new ticket is due in business minutes from its creation, first response and resolution', async () => {
    const t = await open(ws, 'high');
    const r = await row(t.id);
    expect(r.first_response_due).toEqual(addBusinessMinutes(CLOCK, r.created_at, 60));
    expect(r.resolution_due).toEqual(addBusinessMinutes(CLOCK, r.created_at, 480));
    expect(r.next_reply_due).toBeNull();
  });

  test('pending and on hold stop the resolution clock with the minutes it had left; open runs them from then; the first response never pauses', async () => {
    const t = await open(ws);
    const before = await row(t.id);
    const pending = await patch(t.id, { status: 'pending' });
    const paused = await row(t.id);
    const left = Math.round(businessMinutesBetween(CLOCK, paused.resolution_paused_at!, before.resolution_due));
    expect(paused.resolution_remaining_minutes).toBe(left);
    expect(pending).toMatchObject({ resolution_paused_at: paused.resolution_paused_at!.toISOString(), resolution_remaining_minutes: left });

    // Pending to on hold: still paused, nothing moves.
    await patch(t.id, { status: 'on_hold' });
    expect(await row(t.id)).toMatchObject({ resolution_paused_at: paused.resolution_paused_at, resolution_remaining_minutes: left });

    // A paused clock is never overdue, however long the customer takes.
    await setColumn(t.id, 'resolution_due', '2001-01-01T00:00:00Z');
    expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(0);

    const resumed = await patch(t.id, { status: 'open' });
    const r = await row(t.id);
    expect(r.resolution_paused_at).toBeNull();
    expect(r.resolution_remaining_minutes).toBeNull();
    expect(r.resolution_due).toEqual(addBusinessMinutes(CLOCK, r.resolution_resumed_at!, left));
    expect(r.resolution_elapsed_minutes).toBe(960 - left);
    expect(resumed.resolution_paused_at).toBeUndefined();
    expect(r.first_response_due).toEqual(before.first_response_due);
    expect(r.resolution_breached_at).toBeNull();
  });

  test('a clock already overdue when paused keeps its due time when it runs again, and the sweep breaches it', async () => {
    const t = await open(ws);
    await setColumn(t.id, 'resolution_due', new Date(Date.now() - 3600_000).toISOString());
    const due = (await row(t.id)).resolution_due;
    await patch(t.id, { status: 'pending' });
    expect((await row(t.id)).resolution_remaining_minutes).toBeLessThanOrEqual(0);
    await patch(t.id, { status: 'open' });
    expect((await row(t.id)).resolution_due).toEqual(due);
    expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(1);
    expect((await row(t.id)).resolution_breached_at).not.toBeNull();
  });

  test('a new priority while paused moves the minutes left by the difference of the targets; after the pause it counts what was used', async () => {
    const t = await open(ws, 'normal');
    await patch(t.id, { status: 'pending' });
    // Paused moments after it opened: all of normal's 960 minutes are left.
    expect((await row(t.id)).resolution_remaining_minutes).toBe(960);
    await patch(t.id, { priority: 'urgent' });
    expect((await row(t.id)).resolution_remaining_minutes).toBe(240);
    await patch(t.id, { status: 'open', priority: 'high' });
    const r = await row(t.id);
    // Nothing was used before the pause, so high's 480 minutes run from the resume.
    expect(r.resolution_due).toEqual(addBusinessMinutes(CLOCK, r.resolution_resumed_at!, 480));
    expect(r.resolution_elapsed_minutes).toBe(0);
  });

  test('next reply: due from a customer message after an agent reply, not moved by a second one, met by the next reply; late, it breaches once', async () => {
    const t = await open(ws, 'high');
    // Before any reply the customer's message is the first response's business, not a next reply's.
    await customerWrites(t.id);
    expect((await row(t.id)).next_reply_due).toBeNull();
    await reply(t.id);
    await customerWrites(t.id);
    const started = await row(t.id);
    expect(started.next_reply_due).toEqual(addBusinessMinutes(CLOCK, started.next_reply_from!, 120));
    expect((await getTicket<TicketView>(ctx, ws, t.id)).next_reply_due).toBe(started.next_reply_due!.toISOString());
    await customerWrites(t.id);
    expect((await row(t.id)).next_reply_due).toEqual(started.next_reply_due);

    await reply(t.id);
    expect(await row(t.id)).toMatchObject({ next_reply_due: null, next_reply_from: null, next_reply_breached_at: null });

    await customerWrites(t.id);
    await setColumn(t.id, 'next_reply_due', new Date(Date.now() - 60_000).toISOString());
    expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(1);
    expect(await ctx.services.tickets.checkSla(ws.tenantId, t.id)).toBe(0);
    const view = await getTicket<TicketView>(ctx, ws, t.id);
    expect(view.events.filter((e) => e.kind === 'sla_breached').map((e) => e.meta.target)).toEqual(['next_reply']);
    // The flag stays the first response's and the resolution's (a next reply breach is its own mark and event).
    expect(view.sla_breached).toBe(false);
    expect((await row(t.id)).next_reply_breached_at).not.toBeNull();
  });

  test('a priority without a next-reply target starts no next-reply clock', async () => {
    const t = await open(ws, 'low');
    await reply(t.id);
    await customerWrites(t.id);
    expect((await row(t.id)).next_reply_due).toBeNull();
  });

  test('reopen clears the pause and the next reply and restarts the clocks from now, in business time', async () => {
    const t = await open(ws, 'high');
    await reply(t.id);
    await customerWrites(t.id);
    await patch(t.id, { status: 'pending' });
    await patch(t.id, { status: 'solved' });
    const res = await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
    const r = await row(t.id);
    expect(r).toMatchObject({ resolution_paused_at: null, resolution_remaining_minutes: null, next_reply_due: null, next_reply_from: null, resolution_elapsed_minutes: 0 });
    expect(r.first_response_due).toEqual(addBusinessMinutes(CLOCK, r.reopened_at!, 60));
    expect(r.resolution_due).toEqual(addBusinessMinutes(CLOCK, r.reopened_at!, 480));
  });
});
