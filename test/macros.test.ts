/**
 * Macros (issue 4): definitions (create, list, patch). Manual apply and trigger runs without a worker:
 * macros-apply.test.ts; triggered macros with the worker: macros-triggered.test.ts.
 */
import { newId } from '../src/lib/ids';
import { addMember, bearer, createWorkspace } from './helpers/factories';
import { createTicket } from './helpers/tickets';
import { sleep } from './helpers/wait';
import { MACRO_FIELDS, applied, createdEventId, helpers, ms, type MacroView, type TicketView } from './helpers/macros';
import { useTestApp } from './helpers/use-test-app';

describe('Macros: definitions and manual apply (no worker running)', () => {
  const h = helpers(() => ctx);
  const { ctx, workspaces: [ws, other] } = useTestApp({ workspaces: 2 });

  describe('POST /v1/macros', () => {
    test('an editor creates a macro: 201 with id, name, description, actions, enabled, trigger, created_at, updated_at', async () => {
      const editor = await addMember(ctx, ws, 'editor');
      const actions = [
        { type: 'set_status', status: 'pending' },
        { type: 'set_priority', priority: 'high' },
        { type: 'add_tags', tags: ['billing'] },
        { type: 'add_note', body: 'Escalated to billing.' },
      ];
      const res = await h.postMacro(editor.token, { name: 'Escalate billing', actions });
      expect(res.status).toBe(201);
      const m = res.body as MacroView;
      expect(Object.keys(m).sort()).toEqual([...MACRO_FIELDS].sort());
      expect(m).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        name: 'Escalate billing',
        description: '',
        actions,
        enabled: true,
        trigger: null,
        created_at: expect.any(String),
        updated_at: expect.any(String),
        version: '1',
      });
      expect(Number.isNaN(ms(m.created_at))).toBe(false);
      expect(m.updated_at).toBe(m.created_at);
      expect((await h.list(ws.ownerKey)).map((x) => x.id)).toContain(m.id);
    });

    test('a trigger is stored with its conditions in GET /v1/tickets query form; omitted conditions mean {}', async () => {
      const withConds = await h.macro(ws, {
        description: 'Urgent and breached',
        enabled: false,
        actions: [{ type: 'add_tags', tags: ['hot'] }],
        trigger: { event: 'ticket.updated', conditions: { priority: 'urgent', sla_breached: true } },
      });
      expect(withConds).toMatchObject({
        description: 'Urgent and breached',
        enabled: false,
        trigger: { event: 'ticket.updated', conditions: { priority: 'urgent', sla_breached: 'true' } },
      });
      const bare = await h.macro(ws, { actions: [{ type: 'add_tags', tags: ['x'] }], trigger: { event: 'ticket.reopened' } });
      expect(bare.trigger).toEqual({ event: 'ticket.reopened', conditions: {} });
    });

    test('a viewer gets 403 insufficient_role and nothing is stored', async () => {
      const viewer = await addMember(ctx, ws, 'viewer');
      const before = await h.macroCount(ws.tenantId);
      const res = await h.postMacro(viewer.token, { name: 'Nope', actions: [{ type: 'set_priority', priority: 'low' }] });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('insufficient_role');
      expect(await h.macroCount(ws.tenantId)).toBe(before);
    });

    test.each([
      [{ actions: [] }, 'an empty actions array'],
      [{ actions: undefined }, 'no actions at all'],
      [{ actions: [{ type: 'close_forever' }] }, 'an unknown action type'],
      [{ actions: [{ status: 'open' }] }, 'an action without a type'],
      [{ actions: [{ type: 'set_status', status: 'merged' }] }, 'set_status merged (merge is its own operation)'],
      [{ actions: [{ type: 'set_status', status: 'resolved' }] }, 'set_status to a status that does not exist'],
      [{ actions: [{ type: 'set_priority', priority: 'critical' }] }, 'set_priority critical'],
      [{ actions: [{ type: 'set_priority', priority: 'high', extra: 1 }] }, 'an action with an unknown field'],
      [{ actions: [{ type: 'add_tags', tags: [] }] }, 'add_tags with no tags'],
      [{ actions: [{ type: 'remove_tags', tags: ['   '] }] }, 'remove_tags with a blank tag'],
      [{ actions: [{ type: 'assign_team', team_id: 'not-a-uuid' }] }, 'assign_team with a malformed id'],
      [{ actions: [{ type: 'assign_user' }] }, 'assign_user without user_id'],
      [{ actions: [{ type: 'add_note', body: '  ' }] }, 'add_note with a blank body'],
      [{ actions: [{ type: 'set_priority', priority: 'high' }, { type: 'set_status', status: 'merged' }] }, 'one bad action among good ones'],
      [{ trigger: { event: 'ticket.deleted', conditions: {} } }, 'an unknown trigger event'],
      [{ trigger: { event: 'ticket.merged' } }, 'ticket.merged as trigger event'],
      [{ trigger: { conditions: {} } }, 'a trigger without event'],
      [{ trigger: { event: 'ticket.created', conditions: {}, when: 'now' } }, 'a trigger with an unknown field'],
      [{ trigger: 'ticket.created' }, 'a trigger that is not an object'],
      [{ name: '   ' }, 'a blank name'],
      [{ enabled: 'yes' }, 'a non-boolean enabled'],
    ])('refuses %p (%s) with 400 validation_failed and stores nothing', async (override, _why) => {
      const before = await h.macroCount(ws.tenantId);
      const res = await h.postMacro(ws.ownerKey, { name: 'Bad', actions: [{ type: 'set_priority', priority: 'low' }], ...override });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
      expect(await h.macroCount(ws.tenantId)).toBe(before);
    });

    test('assign_team naming no team of this workspace is 422 team_unknown (also another workspace\'s team)', async () => {
      const theirs = await h.makeTeam(other, 'Their team');
      const before = await h.macroCount(ws.tenantId);
      for (const teamId of [newId(), theirs]) {
        const res = await h.postMacro(ws.ownerKey, {
          name: 'Route',
          actions: [{ type: 'set_priority', priority: 'high' }, { type: 'assign_team', team_id: teamId }],
        });
        expect(res.status).toBe(422);
        expect(res.body.code).toBe('team_unknown');
        expect(res.body.errors).toEqual([{ path: 'body.actions.1.team_id', message: expect.any(String) }]);
      }
      expect(await h.macroCount(ws.tenantId)).toBe(before);
    });

    test('assign_user naming no active member of this workspace is 422 assignee_unknown', async () => {
      const outsider = await addMember(ctx, other, 'editor');
      const before = await h.macroCount(ws.tenantId);
      for (const userId of [newId(), outsider.userId]) {
        const res = await h.postMacro(ws.ownerKey, { name: 'Give', actions: [{ type: 'assign_user', user_id: userId }] });
        expect(res.status).toBe(422);
        expect(res.body.code).toBe('assignee_unknown');
        expect(res.body.errors).toEqual([{ path: 'body.actions.0.user_id', message: expect.any(String) }]);
      }
      expect(await h.macroCount(ws.tenantId)).toBe(before);
    });

    test('trigger conditions use GET /v1/tickets filters: an unknown key is 422 filter_unknown, a bad value 422 filter_invalid', async () => {
      const before = await h.macroCount(ws.tenantId);
      const unknown = await h.postMacro(ws.ownerKey, {
        name: 'Bad conditions',
        actions: [{ type: 'add_tags', tags: ['x'] }],
        trigger: { event: 'ticket.created', conditions: { priority: 'urgent', vip_level: 'gold' } },
      });
      expect(unknown.status).toBe(422);
      expect(unknown.body.code).toBe('filter_unknown');
      expect(unknown.body.errors).toEqual([{ path: 'body.trigger.conditions.vip_level', message: expect.any(String) }]);

      for (const conditions of [{ priority: 'critical' }, { assignee_id: 'nobody' }, { created_after: 'yesterday' }, { tag: { any: 'x' } }, { sla_breached: 'maybe' }]) {
        const res = await h.postMacro(ws.ownerKey, { name: 'Bad value', actions: [{ type: 'add_tags', tags: ['x'] }], trigger: { event: 'ticket.created', conditions } });
        expect([res.status, res.body.code, conditions]).toEqual([422, 'filter_invalid', conditions]);
      }
      expect(await h.macroCount(ws.tenantId)).toBe(before);
    });
  });

  describe('GET /v1/macros', () => {
    test('lists the workspace\'s macros in creation order, readable by a viewer; another workspace\'s are not shown', async () => {
      const w = await createWorkspace(ctx);
      const viewer = await addMember(ctx, w, 'viewer');
      const first = await h.macro(w, { name: 'First', actions: [{ type: 'set_priority', priority: 'low' }] });
      const second = await h.macro(w, { name: 'Second', actions: [{ type: 'add_note', body: 'hi' }], trigger: { event: 'ticket.created', conditions: { priority: 'urgent' } } });
      await h.macro(other, { name: 'Elsewhere', actions: [{ type: 'set_priority', priority: 'low' }] });

      const res = await ctx.http.get('/v1/macros').set(bearer(viewer.token));
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(['macros']);
      expect(res.body.macros).toEqual([first, second]);
      for (const m of res.body.macros as MacroView[]) expect(Object.keys(m).sort()).toEqual([...MACRO_FIELDS].sort());
    });
  });

  describe('PATCH /v1/macros/{macro_id}', () => {
    const base = () => ({
      name: 'Patch me',
      description: 'before',
      actions: [{ type: 'set_priority', priority: 'low' }],
      trigger: { event: 'ticket.created', conditions: { priority: 'urgent' } },
    });

    test.each([
      ['name', { name: 'Renamed' }],
      ['description', { description: 'after' }],
      ['actions', { actions: [{ type: 'add_tags', tags: ['a', 'b'] }, { type: 'assign_user', user_id: '__owner__' }] }],
      ['enabled', { enabled: false }],
      ['trigger', { trigger: { event: 'ticket.reopened', conditions: { tag: 'vip', sla_breached: false } } }],
    ])('changes %s alone and leaves every other field as it was', async (field, patchIn) => {
      const editor = await addMember(ctx, ws, 'editor');
      const m = await h.macro(ws, base());
      const patch = JSON.parse(JSON.stringify(patchIn).replace('__owner__', ws.ownerId)) as Record<string, unknown>;
      await sleep(5);
      const res = await h.patchMacro(editor.token, m.id, patch);
      expect(res.status).toBe(200);
      const after = res.body as MacroView;
      expect(Object.keys(after).sort()).toEqual([...MACRO_FIELDS].sort());
      const expected = field === 'trigger' ? { trigger: { event: 'ticket.reopened', conditions: { tag: 'vip', sla_breached: 'false' } } } : patch;
      expect(after).toEqual({ ...m, ...expected, updated_at: expect.any(String), version: expect.any(String) });
      expect(ms(after.updated_at)).toBeGreaterThan(ms(m.updated_at));
      expect(after.created_at).toBe(m.created_at);
      // Stored, not just echoed.
      expect((await h.list(ws.ownerKey)).find((x) => x.id === m.id)).toEqual(after);
    });

    test('trigger: null removes the trigger (manual-only): no job for later events, the trigger job applies nothing, applying by hand works', async () => {
      const w = await createWorkspace(ctx);
      const m = await h.macro(w, { ...base(), actions: [{ type: 'add_tags', tags: ['manual'] }], trigger: { event: 'ticket.created', conditions: {} } });
      const res = await h.patchMacro(w.ownerKey, m.id, { trigger: null });
      expect(res.status).toBe(200);
      expect(res.body.trigger).toBeNull();
      expect((await h.list(w.ownerKey)).find((x) => x.id === m.id)!.trigger).toBeNull();

      const t = (await createTicket(ctx, w)) as TicketView;
      expect(await h.triggerJobs(t.id)).toEqual([]);
      const out = await ctx.services.macros.runTriggered({ tenant_id: w.tenantId, ticket_id: t.id, event: 'ticket.created', event_id: createdEventId(t) });
      expect(out).toEqual({ applied: 0 });
      expect(applied(await h.ticket(w, t.id), m.id)).toHaveLength(0);

      const manual = await h.apply(w.ownerKey, t.id, m.id);
      expect(manual.status).toBe(200);
      expect(manual.body.ticket.tags).toEqual(['manual']);
    });

    test('a PATCH without trigger leaves the trigger unchanged', async () => {
      const m = await h.macro(ws, base());
      for (const patch of [{ name: 'Only the name' }, { enabled: false }, { actions: [{ type: 'add_note', body: 'n' }] }, { description: 'd' }]) {
        const res = await h.patchMacro(ws.ownerKey, m.id, patch);
        expect(res.status).toBe(200);
        expect(res.body.trigger).toEqual({ event: 'ticket.created', conditions: { priority: 'urgent' } });
      }
      expect((await h.list(ws.ownerKey)).find((x) => x.id === m.id)!.trigger).toEqual({ event: 'ticket.created', conditions: { priority: 'urgent' } });
    });

    test('a PATCH is validated like a create and a refused one changes nothing', async () => {
      const m = await h.macro(ws, base());
      const cases: [Record<string, unknown>, number, string][] = [
        [{}, 400, 'validation_failed'],
        [{ actions: [] }, 400, 'validation_failed'],
        [{ actions: [{ type: 'set_status', status: 'merged' }] }, 400, 'validation_failed'],
        [{ actions: [{ type: 'set_priority', priority: 'critical' }] }, 400, 'validation_failed'],
        [{ trigger: { event: 'ticket.solved', conditions: {} } }, 400, 'validation_failed'],
        [{ unknown_field: 1 }, 400, 'validation_failed'],
        [{ actions: [{ type: 'assign_team', team_id: newId() }] }, 422, 'team_unknown'],
        [{ actions: [{ type: 'assign_user', user_id: newId() }] }, 422, 'assignee_unknown'],
        [{ trigger: { event: 'ticket.updated', conditions: { colour: 'red' } } }, 422, 'filter_unknown'],
        [{ trigger: { event: 'ticket.updated', conditions: { status: 'sleeping' } } }, 422, 'filter_invalid'],
      ];
      for (const [body, status, code] of cases) {
        const res = await h.patchMacro(ws.ownerKey, m.id, body);
        expect([body, res.status, res.body.code]).toEqual([body, status, code]);
      }
      expect((await h.list(ws.ownerKey)).find((x) => x.id === m.id)).toEqual(m);
    });

    test('enabled: false, then applying by hand is 409 macro_disabled and the ticket is untouched', async () => {
      const editor = await addMember(ctx, ws, 'editor');
      const m = await h.macro(ws, { name: 'Off soon', actions: [{ type: 'set_priority', priority: 'urgent' }, { type: 'add_tags', tags: ['x'] }, { type: 'add_note', body: 'n' }] });
      const off = await h.patchMacro(editor.token, m.id, { enabled: false });
      expect(off.status).toBe(200);
      expect(off.body.enabled).toBe(false);

      const t = (await createTicket(ctx, ws)) as TicketView;
      const before = await h.ticket(ws, t.id);
      const res = await h.apply(editor.token, t.id, m.id);
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('macro_disabled');
      expect(await h.ticket(ws, t.id)).toEqual(before);

      // Enabled again, it applies.
      expect((await h.patchMacro(editor.token, m.id, { enabled: true })).status).toBe(200);
      const ok = await h.apply(editor.token, t.id, m.id);
      expect(ok.status).toBe(200);
      expect(ok.body.ticket.priority).toBe('urgent');
    });

    test('another workspace\'s macro is 404 and stays as it was; a viewer is 403', async () => {
      const theirs = await h.macro(other, base());
      const res = await h.patchMacro(ws.ownerKey, theirs.id, { name: 'Hijacked', enabled: false, trigger: null });
      expect(res.status).toBe(404);
      expect((await h.list(other.ownerKey)).find((x) => x.id === theirs.id)).toEqual(theirs);
      expect((await h.patchMacro(ws.ownerKey, newId(), { name: 'Ghost' })).status).toBe(404);
      expect((await h.patchMacro(ws.ownerKey, 'not-a-uuid', { name: 'Ghost' })).status).toBe(404);

      const viewer = await addMember(ctx, other, 'viewer');
      const denied = await h.patchMacro(viewer.token, theirs.id, { name: 'Viewer' });
      expect(denied.status).toBe(403);
      expect(denied.body.code).toBe('insufficient_role');
    });
  });
});
