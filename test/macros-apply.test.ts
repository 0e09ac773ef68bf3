/**
 * Macros applied by hand, and the macros.trigger job body run without a worker.
 */
import { addMember, bearer, createWorkspace, mintKey } from './helpers/factories';
import { createTicket, setStatus } from './helpers/tickets';
import { applied, createdEventId, helpers, skippedEvents, type TicketView, type TriggerEvent } from './helpers/macros';
import { useTestApp } from './helpers/use-test-app';

describe('Macros: definitions and manual apply (no worker running)', () => {
  const h = helpers(() => ctx);
  const { ctx, workspaces: [ws, other] } = useTestApp({ workspaces: 2 });

  describe('POST /v1/tickets/{ticket_id}/macros/{macro_id}/apply', () => {
    test('applies the actions in order: status, priority, tags added then removed, team, assignee, and a note as internal_note', async () => {
      const editor = await addMember(ctx, ws, 'editor');
      const agent = await addMember(ctx, ws, 'editor');
      const team = await h.makeTeam(ws, 'Billing');
      const m = await h.macro(ws, {
        name: 'Billing triage',
        actions: [
          { type: 'set_status', status: 'pending' },
          { type: 'set_priority', priority: 'high' },
          { type: 'add_tags', tags: ['billing', 'temp', 'vip'] },
          { type: 'remove_tags', tags: ['temp', 'legacy'] },
          { type: 'assign_team', team_id: team },
          { type: 'assign_user', user_id: agent.userId },
          { type: 'add_note', body: 'Routed to billing by macro.' },
        ],
      });
      const t = (await createTicket(ctx, ws, { tags: ['legacy', 'vip'] })) as TicketView;
      const res = await h.apply(editor.token, t.id, m.id);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['skipped', 'ticket']);
      expect(res.body.skipped).toEqual([]);
      const after = res.body.ticket as TicketView;
      expect(after).toMatchObject({ status: 'pending', priority: 'high', tags: ['vip', 'billing'], team_id: team, assignee_id: agent.userId });

      const added = after.events.slice(t.events.length);
      expect(added.map((e) => e.kind)).toEqual(['status_changed', 'fields_changed', 'internal_note', 'macro_applied']);
      for (const e of added) expect(e).toMatchObject({ actor_type: 'user', actor_user_id: editor.userId });
      expect(added[0]!.meta).toEqual({ from: 'open', to: 'pending' });
      expect(added[1]!.meta).toEqual({
        changes: {
          priority: { from: 'normal', to: 'high' },
          assignee_id: { from: null, to: agent.userId },
          team_id: { from: null, to: team },
          tags: { from: ['legacy', 'vip'], to: ['vip', 'billing'] },
        },
      });
      expect(added[2]!.body).toBe('Routed to billing by macro.');
      expect(added[3]!.meta).toEqual({ macro_id: m.id, name: 'Billing triage', skipped: 0 });
      expect(skippedEvents(after, m.id)).toHaveLength(0);
      // Stored as answered.
      expect(await h.ticket(ws, t.id)).toEqual(after);
    });

    test('order matters: later actions see earlier ones (add then remove, remove then add, last priority wins)', async () => {
      const m1 = await h.macro(ws, { actions: [{ type: 'add_tags', tags: ['x'] }, { type: 'remove_tags', tags: ['x'] }, { type: 'set_priority', priority: 'low' }, { type: 'set_priority', priority: 'urgent' }] });
      const m2 = await h.macro(ws, { actions: [{ type: 'remove_tags', tags: ['x'] }, { type: 'add_tags', tags: ['x'] }] });
      const t = (await createTicket(ctx, ws)) as TicketView;
      const r1 = await h.apply(ws.ownerKey, t.id, m1.id);
      expect(r1.status).toBe(200);
      expect(r1.body.ticket).toMatchObject({ tags: [], priority: 'urgent' });
      const r2 = await h.apply(ws.ownerKey, t.id, m2.id);
      expect(r2.body.ticket.tags).toEqual(['x']);
    });

    test('a status the machine forbids is skipped, recorded as macro_action_skipped, never forced; the other actions still apply', async () => {
      const m = await h.macro(ws, {
        name: 'Chase up',
        actions: [
          { type: 'set_priority', priority: 'high' },
          { type: 'set_status', status: 'open' },
          { type: 'add_tags', tags: ['followup'] },
          { type: 'add_note', body: 'Chasing.' },
        ],
      });
      const t = (await createTicket(ctx, ws)) as TicketView;
      await setStatus(ctx, ws, t.id, 'solved');
      const solved = (await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey))).body as TicketView;
      const res = await h.apply(ws.ownerKey, t.id, m.id);
      expect(res.status).toBe(200);
      expect(res.body.skipped).toEqual([{ action: { type: 'set_status', status: 'open' }, reason: expect.any(String) }]);
      const after = res.body.ticket as TicketView;
      expect(after).toMatchObject({ status: 'solved', priority: 'high', tags: ['followup'] });

      const added = after.events.slice(solved.events.length);
      expect(added.map((e) => e.kind)).toEqual(['fields_changed', 'internal_note', 'macro_action_skipped', 'macro_applied']);
      expect(added.some((e) => e.kind === 'status_changed')).toBe(false);
      expect(added[2]!.meta).toEqual({ macro_id: m.id, action: { type: 'set_status', status: 'open' }, reason: res.body.skipped[0].reason });
      expect(added[3]!.meta).toEqual({ macro_id: m.id, name: 'Chase up', skipped: 1 });
      expect((await h.ticket(ws, t.id)).status).toBe('solved');

      // A closed ticket cannot go to pending by macro either.
      const c = (await createTicket(ctx, ws)) as TicketView;
      await setStatus(ctx, ws, c.id, 'closed');
      const pend = await h.macro(ws, { actions: [{ type: 'set_status', status: 'pending' }] });
      const r2 = await h.apply(ws.ownerKey, c.id, pend.id);
      expect(r2.status).toBe(200);
      expect(r2.body.ticket.status).toBe('closed');
      expect(r2.body.skipped).toHaveLength(1);
      expect(skippedEvents(r2.body.ticket as TicketView, pend.id)).toHaveLength(1);
    });

    test('status actions are judged in order, each from where the earlier ones left the ticket: legal steps are never skipped', async () => {
      // open → pending → open: both steps are legal moves of the status machine.
      const there = await h.macro(ws, { actions: [{ type: 'set_status', status: 'pending' }, { type: 'set_status', status: 'open' }] });
      const t = (await createTicket(ctx, ws)) as TicketView;
      const r1 = await h.apply(ws.ownerKey, t.id, there.id);
      expect(r1.status).toBe(200);
      expect([r1.body.ticket.status, r1.body.skipped]).toEqual(['open', []]);
      expect(skippedEvents(r1.body.ticket as TicketView, there.id)).toHaveLength(0);

      // spam → open → pending: spam may only go to open, and open may go to pending.
      const outOfSpam = await h.macro(ws, { actions: [{ type: 'set_status', status: 'open' }, { type: 'set_status', status: 'pending' }] });
      const s = (await createTicket(ctx, ws)) as TicketView;
      await setStatus(ctx, ws, s.id, 'spam');
      const r2 = await h.apply(ws.ownerKey, s.id, outOfSpam.id);
      expect(r2.status).toBe(200);
      expect([r2.body.ticket.status, r2.body.skipped]).toEqual(['pending', []]);
    });

    test('team and member are re-checked when the macro runs: gone since the write, the action is skipped and recorded', async () => {
      const agent = await addMember(ctx, ws, 'editor');
      const team = await h.makeTeam(ws, 'Short-lived');
      const m = await h.macro(ws, {
        actions: [{ type: 'assign_team', team_id: team }, { type: 'assign_user', user_id: agent.userId }, { type: 'set_priority', priority: 'low' }],
      });
      await ctx.db.deleteFrom('teams').where('id', '=', team).execute();
      await ctx.db.updateTable('memberships').set({ status: 'deactivated' }).where('tenant_id', '=', ws.tenantId).where('user_id', '=', agent.userId).execute();

      const t = (await createTicket(ctx, ws)) as TicketView;
      const res = await h.apply(ws.ownerKey, t.id, m.id);
      expect(res.status).toBe(200);
      expect(res.body.skipped).toEqual([
        { action: { type: 'assign_team', team_id: team }, reason: expect.any(String) },
        { action: { type: 'assign_user', user_id: agent.userId }, reason: expect.any(String) },
      ]);
      const after = res.body.ticket as TicketView;
      expect(after.priority).toBe('low');
      expect(after).not.toHaveProperty('team_id');
      expect(after).not.toHaveProperty('assignee_id');
      expect(skippedEvents(after, m.id).map((e) => e.meta.action)).toEqual([
        { type: 'assign_team', team_id: team },
        { type: 'assign_user', user_id: agent.userId },
      ]);
    });

    test('a merged ticket is 409 ticket_merged and is left as it was', async () => {
      const m = await h.macro(ws, { actions: [{ type: 'set_priority', priority: 'urgent' }, { type: 'add_note', body: 'n' }] });
      const source = (await createTicket(ctx, ws)) as TicketView;
      const target = (await createTicket(ctx, ws)) as TicketView;
      const merged = await ctx.http.post(`/v1/tickets/${source.id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: target.id });
      expect(merged.status).toBe(200);
      const before = await h.ticket(ws, source.id);
      const res = await h.apply(ws.ownerKey, source.id, m.id);
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('ticket_merged');
      expect(await h.ticket(ws, source.id)).toEqual(before);
    });

    test('applying needs tickets:write: a helpdesk-ops:write key can manage macros but gets 403 insufficient_scope on apply', async () => {
      const opsKey = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ops:write'] });
      const ticketsKey = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:write'] });
      const created = await h.postMacro(opsKey.secret, { name: 'Ops', actions: [{ type: 'set_priority', priority: 'high' }] });
      expect(created.status).toBe(201);
      const t = (await createTicket(ctx, ws)) as TicketView;
      const before = await h.ticket(ws, t.id);

      const denied = await h.apply(opsKey.secret, t.id, created.body.id);
      expect(denied.status).toBe(403);
      expect(denied.body.code).toBe('insufficient_scope');
      expect(await h.ticket(ws, t.id)).toEqual(before);

      const ok = await h.apply(ticketsKey.secret, t.id, created.body.id);
      expect(ok.status).toBe(200);
      expect(ok.body.ticket.priority).toBe('high');
    });

    test('a viewer is 403; another workspace\'s macro or ticket is 404', async () => {
      const viewer = await addMember(ctx, ws, 'viewer');
      const mine = await h.macro(ws, { actions: [{ type: 'set_priority', priority: 'high' }] });
      const theirs = await h.macro(other, { actions: [{ type: 'set_priority', priority: 'high' }] });
      const t = (await createTicket(ctx, ws)) as TicketView;
      const theirTicket = (await createTicket(ctx, other)) as TicketView;

      const v = await h.apply(viewer.token, t.id, mine.id);
      expect(v.status).toBe(403);
      expect(v.body.code).toBe('insufficient_role');
      expect((await h.apply(ws.ownerKey, t.id, theirs.id)).status).toBe(404);
      expect((await h.apply(ws.ownerKey, theirTicket.id, mine.id)).status).toBe(404);
      expect((await h.ticket(ws, t.id)).priority).toBe('normal');
    });
  });

  describe('triggered runs without a worker (the macros.trigger job body)', () => {
    test('the write path enqueues one macros.trigger job per event when an enabled macro listens', async () => {
      const w = await createWorkspace(ctx);
      await h.macro(w, { actions: [{ type: 'add_tags', tags: ['auto'] }], trigger: { event: 'ticket.created' } });
      const t = (await createTicket(ctx, w)) as TicketView;
      const jobs = await h.triggerJobs(t.id);
      expect(jobs.map((j) => j.data)).toEqual([{ tenant_id: w.tenantId, ticket_id: t.id, event: 'ticket.created', event_id: createdEventId(t) }]);
      // Nothing ran yet: no worker.
      expect(t.tags).toEqual([]);
    });

    test('exactly once per event: runTriggered run repeatedly and 5× concurrently applies the macro once, with one macro_runs row', async () => {
      const w = await createWorkspace(ctx);
      const m = await h.macro(w, { name: 'Auto tag', actions: [{ type: 'add_tags', tags: ['auto'] }, { type: 'add_note', body: 'Tagged.' }], trigger: { event: 'ticket.created' } });
      const t = (await createTicket(ctx, w)) as TicketView;
      const data = { tenant_id: w.tenantId, ticket_id: t.id, event: 'ticket.created' as TriggerEvent, event_id: createdEventId(t) };

      const concurrent = await Promise.all(Array.from({ length: 5 }, () => ctx.services.macros.runTriggered(data)));
      const sequential = [];
      for (let i = 0; i < 3; i++) sequential.push(await ctx.services.macros.runTriggered(data));
      expect([...concurrent, ...sequential].reduce((n, r) => n + r.applied, 0)).toBe(1);
      expect(sequential).toEqual([{ applied: 0 }, { applied: 0 }, { applied: 0 }]);

      const after = await h.ticket(w, t.id);
      expect(applied(after, m.id)).toHaveLength(1);
      expect(applied(after, m.id)[0]).toMatchObject({ actor_type: 'system', actor_name: 'Macro: Auto tag', meta: { macro_id: m.id, name: 'Auto tag', skipped: 0 } });
      expect(applied(after, m.id)[0]).not.toHaveProperty('actor_user_id');
      expect(after.events.filter((e) => e.kind === 'internal_note')).toHaveLength(1);
      expect(after.tags).toEqual(['auto']);
      expect(await h.runs(m.id, data.event_id)).toBe(1);
      expect(await h.runs(m.id)).toBe(1);
    });

    test('a disabled macro never fires: no job is enqueued for it, and a job for the event applies nothing', async () => {
      const w = await createWorkspace(ctx);
      const m = await h.macro(w, { enabled: false, actions: [{ type: 'add_tags', tags: ['never'] }], trigger: { event: 'ticket.created' } });
      const t = (await createTicket(ctx, w)) as TicketView;
      expect(await h.triggerJobs(t.id)).toEqual([]);
      const data = { tenant_id: w.tenantId, ticket_id: t.id, event: 'ticket.created' as TriggerEvent, event_id: createdEventId(t) };
      expect(await ctx.services.macros.runTriggered(data)).toEqual({ applied: 0 });
      expect(applied(await h.ticket(w, t.id), m.id)).toHaveLength(0);

      // Enabled when the event happened but disabled before the job ran: still nothing.
      const m2 = await h.macro(w, { actions: [{ type: 'add_tags', tags: ['late'] }], trigger: { event: 'ticket.created' } });
      const t2 = (await createTicket(ctx, w)) as TicketView;
      expect(await h.triggerJobs(t2.id)).toHaveLength(1);
      expect((await h.patchMacro(w.ownerKey, m2.id, { enabled: false })).status).toBe(200);
      const out = await ctx.services.macros.runTriggered({ ...data, ticket_id: t2.id, event_id: createdEventId(t2) });
      expect(out).toEqual({ applied: 0 });
      const after = await h.ticket(w, t2.id);
      expect(applied(after, m2.id)).toHaveLength(0);
      expect(after.tags).toEqual([]);
    });

    test('a triggered macro\'s changes publish no trigger: no further job is enqueued for the ticket', async () => {
      const w = await createWorkspace(ctx);
      await h.macro(w, { actions: [{ type: 'set_priority', priority: 'high' }], trigger: { event: 'ticket.created' } });
      const b = await h.macro(w, { actions: [{ type: 'add_tags', tags: ['b'] }], trigger: { event: 'ticket.updated' } });
      const t = (await createTicket(ctx, w)) as TicketView;
      const out = await ctx.services.macros.runTriggered({ tenant_id: w.tenantId, ticket_id: t.id, event: 'ticket.created', event_id: createdEventId(t) });
      expect(out).toEqual({ applied: 1 });
      expect((await h.ticket(w, t.id)).priority).toBe('high');
      const jobs = await h.triggerJobs(t.id);
      expect(jobs.map((j) => (j.data as { event: string }).event)).toEqual(['ticket.created']);
      expect(await h.runs(b.id)).toBe(0);
    });
  });
});
