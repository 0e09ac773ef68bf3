/**
 * Triggered macros with the worker running.
 */
import { bearer, createWorkspace } from './helpers/factories';
import { createTicket, setStatus } from './helpers/tickets';
import { sleep } from './helpers/wait';
import { applied, createdEventId, helpers, skippedEvents, type TicketView, type TriggerEvent } from './helpers/macros';
import { useTestApp } from './helpers/use-test-app';

describe('Triggered macros with the worker running', () => {
  const h = helpers(() => ctx);
  const { ctx } = useTestApp({ workers: true });

  test('a macro saved after the process remembered "no macro listens" fires on the next write (the change notice drops the memory)', async () => {
    const changes = ctx.services.macroTriggers.listenForChanges(ctx.config.DATABASE_URL);
    try {
      await changes.ready;
      const ws = await createWorkspace(ctx);
      const t = (await createTicket(ctx, ws)) as TicketView;
      // Remembered now: this workspace has no macro for ticket.updated.
      await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ tags: ['first'] }).expect(200);
      await sleep(100);
      const m = await h.macro(ws, { name: 'Late listener', actions: [{ type: 'add_tags', tags: ['late'] }], trigger: { event: 'ticket.updated', conditions: {} } });
      // The NOTIFY goes out at the macro's commit and takes well under a millisecond on one host.
      await sleep(200);
      await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ priority: 'high' }).expect(200);
      expect(await h.waitApplied(ws, t.id, m.id)).toMatchObject({ tags: expect.arrayContaining(['late']) });
    } finally {
      await changes.close();
    }
  });

  test('a ticket.created macro with conditions {priority: urgent} fires on an urgent ticket and not on a normal one', async () => {
    const ws = await createWorkspace(ctx);
    const m = await h.macro(ws, {
      name: 'Urgent triage',
      actions: [{ type: 'add_tags', tags: ['urgent-triage'] }, { type: 'set_status', status: 'on_hold' }, { type: 'add_note', body: 'Paged on-call.' }],
      trigger: { event: 'ticket.created', conditions: { priority: 'urgent' } },
    });
    const normal = (await createTicket(ctx, ws, { priority: 'normal' })) as TicketView;
    const urgent = (await createTicket(ctx, ws, { priority: 'urgent' })) as TicketView;

    const fired = await h.waitApplied(ws, urgent.id, m.id);
    expect(fired).toMatchObject({ status: 'on_hold', tags: ['urgent-triage'] });
    const byMacro = fired.events.filter((e) => e.actor_name === 'Macro: Urgent triage');
    expect(byMacro.map((e) => e.kind)).toEqual(['status_changed', 'fields_changed', 'internal_note', 'macro_applied']);
    for (const e of byMacro) expect(e.actor_type).toBe('system');

    await h.settled(normal.id, 1);
    const untouched = await h.ticket(ws, normal.id);
    expect(applied(untouched, m.id)).toHaveLength(0);
    expect(untouched).toMatchObject({ status: 'open', tags: [] });
    expect(untouched.events.map((e) => e.kind)).toEqual(['ticket_created']);
  });

  test('a disabled triggered macro never fires, while an enabled one on the same event does', async () => {
    const ws = await createWorkspace(ctx);
    const off = await h.macro(ws, { enabled: false, actions: [{ type: 'add_tags', tags: ['off'] }], trigger: { event: 'ticket.created' } });
    const turnedOff = await h.macro(ws, { actions: [{ type: 'add_tags', tags: ['turned-off'] }], trigger: { event: 'ticket.created' } });
    expect((await h.patchMacro(ws.ownerKey, turnedOff.id, { enabled: false })).status).toBe(200);
    const on = await h.macro(ws, { actions: [{ type: 'add_tags', tags: ['on'] }], trigger: { event: 'ticket.created' } });

    const t = (await createTicket(ctx, ws)) as TicketView;
    await h.waitApplied(ws, t.id, on.id);
    await h.settled(t.id, 1);
    const after = await h.ticket(ws, t.id);
    expect(after.tags).toEqual(['on']);
    expect(applied(after, off.id)).toHaveLength(0);
    expect(applied(after, turnedOff.id)).toHaveLength(0);
    expect(await h.runs(off.id)).toBe(0);
    expect(await h.runs(turnedOff.id)).toBe(0);

    // With only disabled macros listening, nothing is queued and nothing happens.
    expect((await h.patchMacro(ws.ownerKey, on.id, { enabled: false })).status).toBe(200);
    const t2 = (await createTicket(ctx, ws)) as TicketView;
    await sleep(1000);
    expect(await h.triggerJobs(t2.id)).toEqual([]);
    expect((await h.ticket(ws, t2.id)).events.map((e) => e.kind)).toEqual(['ticket_created']);
  });

  test('a macro whose trigger was removed (trigger: null) no longer fires on the events it named', async () => {
    const ws = await createWorkspace(ctx);
    const manual = await h.macro(ws, { actions: [{ type: 'add_tags', tags: ['was-triggered'] }], trigger: { event: 'ticket.created' } });
    const control = await h.macro(ws, { actions: [{ type: 'add_tags', tags: ['control'] }], trigger: { event: 'ticket.created' } });
    const res = await h.patchMacro(ws.ownerKey, manual.id, { trigger: null });
    expect(res.body.trigger).toBeNull();

    const t = (await createTicket(ctx, ws)) as TicketView;
    await h.waitApplied(ws, t.id, control.id);
    await h.settled(t.id, 1);
    const after = await h.ticket(ws, t.id);
    expect(after.tags).toEqual(['control']);
    expect(applied(after, manual.id)).toHaveLength(0);
  });

  test('a ticket.updated macro fires on each PATCH that changes the ticket, once per event, and not on create or a no-op PATCH', async () => {
    const ws = await createWorkspace(ctx);
    const m = await h.macro(ws, { name: 'On update', actions: [{ type: 'add_note', body: 'Ticket changed.' }], trigger: { event: 'ticket.updated' } });
    const t = (await createTicket(ctx, ws)) as TicketView;
    await sleep(500);
    expect(await h.triggerJobs(t.id)).toEqual([]);

    await h.patchTicket(ws, t.id, { priority: 'high' });
    const once = await h.waitApplied(ws, t.id, m.id, 1);
    expect(applied(once, m.id)[0]).toMatchObject({ actor_type: 'system', actor_name: 'Macro: On update' });

    await h.patchTicket(ws, t.id, { status: 'pending' });
    await h.waitApplied(ws, t.id, m.id, 2);

    // Changes nothing: no event, no trigger.
    await h.patchTicket(ws, t.id, { priority: 'high' });
    await h.settled(t.id, 2);
    await sleep(500);
    const after = await h.ticket(ws, t.id);
    expect(applied(after, m.id)).toHaveLength(2);
    expect(after.events.filter((e) => e.kind === 'internal_note')).toHaveLength(2);
    expect(await h.triggerJobs(t.id)).toHaveLength(2);
    expect(await h.runs(m.id)).toBe(2);
  });

  test('a ticket.reopened macro fires on reopen, not on create or on the PATCH that solved it', async () => {
    const ws = await createWorkspace(ctx);
    const m = await h.macro(ws, { name: 'Reopened', actions: [{ type: 'set_priority', priority: 'urgent' }, { type: 'add_tags', tags: ['reopened'] }], trigger: { event: 'ticket.reopened' } });
    const t = (await createTicket(ctx, ws)) as TicketView;
    await setStatus(ctx, ws, t.id, 'solved');
    await sleep(500);
    expect(applied(await h.ticket(ws, t.id), m.id)).toHaveLength(0);

    const res = await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(ws.ownerKey)).send();
    expect(res.status).toBe(200);
    const after = await h.waitApplied(ws, t.id, m.id);
    expect(after).toMatchObject({ status: 'open', priority: 'urgent', tags: ['reopened'] });
    await h.settled(t.id, 1);
    expect(applied(await h.ticket(ws, t.id), m.id)).toHaveLength(1);
  });

  test('a triggered macro skips a status the machine forbids and records it', async () => {
    const ws = await createWorkspace(ctx);
    const m = await h.macro(ws, {
      actions: [{ type: 'set_status', status: 'pending' }, { type: 'add_tags', tags: ['touched'] }],
      trigger: { event: 'ticket.updated', conditions: { status: 'solved' } },
    });
    const t = (await createTicket(ctx, ws)) as TicketView;
    await setStatus(ctx, ws, t.id, 'solved');
    const after = await h.waitApplied(ws, t.id, m.id);
    expect(after).toMatchObject({ status: 'solved', tags: ['touched'] });
    expect(skippedEvents(after, m.id)).toHaveLength(1);
    expect(skippedEvents(after, m.id)[0]).toMatchObject({ actor_type: 'system', meta: { action: { type: 'set_status', status: 'pending' } } });
  });

  test('the same job enqueued again (without and with a jobId) still applies the macro once', async () => {
    const ws = await createWorkspace(ctx);
    const m = await h.macro(ws, { actions: [{ type: 'add_note', body: 'Once.' }], trigger: { event: 'ticket.created' } });
    const t = (await createTicket(ctx, ws)) as TicketView;
    await h.waitApplied(ws, t.id, m.id);
    await h.settled(t.id, 1);

    const data = { tenant_id: ws.tenantId, ticket_id: t.id, event: 'ticket.created' as TriggerEvent, event_id: createdEventId(t) };
    const q = ctx.runtime.queues;
    const ids = [
      // Straight onto the queue, past the row's own job id: copies of the job as a replay or a retry from the
      // dashboard makes them (two without an id, two sharing one).
      (await q.queue('maintenance').add('macros.trigger', data)).id!,
      (await q.queue('maintenance').add('macros.trigger', data)).id!,
      (await q.queue('maintenance').add('macros.trigger', data, { jobId: `again-${data.event_id}` })).id!,
      (await q.queue('maintenance').add('macros.trigger', data, { jobId: `again-${data.event_id}` })).id!,
    ];
    expect(new Set(ids).size).toBe(3);
    const jobs = await h.settled(t.id, 4);
    const extra = jobs.filter((j) => ids.includes(j.id!));
    expect(extra).toHaveLength(3);
    for (const j of extra) expect(j.returnvalue).toEqual({ applied: 0 });

    const after = await h.ticket(ws, t.id);
    expect(applied(after, m.id)).toHaveLength(1);
    expect(after.events.filter((e) => e.kind === 'internal_note')).toHaveLength(1);
    expect(await h.runs(m.id, data.event_id)).toBe(1);
  });

  test('no loops: a triggered macro\'s own changes do not fire a ticket.updated macro; a user\'s PATCH does, once', async () => {
    const ws = await createWorkspace(ctx);
    const a = await h.macro(ws, { name: 'A', actions: [{ type: 'set_priority', priority: 'high' }], trigger: { event: 'ticket.created' } });
    const b = await h.macro(ws, { name: 'B', actions: [{ type: 'add_tags', tags: ['b'] }], trigger: { event: 'ticket.updated' } });
    const t = (await createTicket(ctx, ws)) as TicketView;

    const afterA = await h.waitApplied(ws, t.id, a.id);
    expect(afterA.priority).toBe('high');
    await h.settled(t.id, 1);
    await sleep(1500);
    const quiet = await h.ticket(ws, t.id);
    expect(applied(quiet, b.id)).toHaveLength(0);
    expect(quiet.tags).toEqual([]);
    expect((await h.triggerJobs(t.id)).map((j) => (j.data as { event: string }).event)).toEqual(['ticket.created']);

    // A person's change is an event B listens for; B's own change does not set B off again.
    await h.patchTicket(ws, t.id, { status: 'pending' });
    const afterB = await h.waitApplied(ws, t.id, b.id);
    expect(afterB.tags).toEqual(['b']);
    await h.settled(t.id, 2);
    await sleep(1500);
    const final = await h.ticket(ws, t.id);
    expect(applied(final, b.id)).toHaveLength(1);
    expect(applied(final, a.id)).toHaveLength(1);
    expect(await h.triggerJobs(t.id)).toHaveLength(2);
  });
});
