import type { Job } from 'bullmq';
import { sql } from 'kysely';
import { newId } from '../src/lib/ids';
import { startTestApp, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { createTicket, setStatus } from './helpers/tickets';
import { eventually, sleep } from './helpers/wait';

interface Ev {
  id: string;
  kind: string;
  body: string;
  meta: Record<string, unknown>;
  actor_type: string;
  actor_user_id?: string;
  actor_name?: string;
  created_at: string;
}

interface TicketView {
  id: string;
  status: string;
  priority: string;
  tags: string[];
  team_id?: string;
  assignee_id?: string;
  updated_at: string;
  legal_next_states: string[];
  events: Ev[];
}

interface MacroView {
  id: string;
  name: string;
  description: string;
  actions: Record<string, unknown>[];
  enabled: boolean;
  trigger: { event: string; conditions: Record<string, string> } | null;
  created_at: string;
  updated_at: string;
}

type TriggerEvent = 'ticket.created' | 'ticket.updated' | 'ticket.reopened';

const MACRO_FIELDS = ['id', 'name', 'description', 'actions', 'enabled', 'trigger', 'created_at', 'updated_at'];
const ms = (iso: string) => new Date(iso).getTime();

const applied = (t: TicketView, macroId: string) => t.events.filter((e) => e.kind === 'macro_applied' && e.meta.macro_id === macroId);
const skippedEvents = (t: TicketView, macroId: string) => t.events.filter((e) => e.kind === 'macro_action_skipped' && e.meta.macro_id === macroId);
const createdEventId = (t: TicketView) => t.events.find((e) => e.kind === 'ticket_created')!.id;

/** Helpers bound to one test context. */
function helpers(get: () => TestContext) {
  const h = {
    postMacro: (token: string, body: Record<string, unknown>) => get().http.post('/v1/macros').set(bearer(token)).send(body),
    patchMacro: (token: string, id: string, body: Record<string, unknown>) => get().http.patch(`/v1/macros/${id}`).set(bearer(token)).send(body),
    apply: (token: string, ticketId: string, macroId: string) => get().http.post(`/v1/tickets/${ticketId}/macros/${macroId}/apply`).set(bearer(token)).send(),

    async macro(ws: Workspace, body: Record<string, unknown>, token = ws.ownerKey): Promise<MacroView> {
      const res = await h.postMacro(token, { name: `Macro ${Math.random().toString(36).slice(2, 8)}`, ...body });
      if (res.status !== 201) throw new Error(`create macro: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as MacroView;
    },
    async list(token: string): Promise<MacroView[]> {
      const res = await get().http.get('/v1/macros').set(bearer(token));
      if (res.status !== 200) throw new Error(`list macros: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.macros as MacroView[];
    },
    async ticket(ws: Workspace, id: string): Promise<TicketView> {
      const res = await get().http.get(`/v1/tickets/${id}`).set(bearer(ws.ownerKey));
      if (res.status !== 200) throw new Error(`get ticket: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as TicketView;
    },
    async patchTicket(ws: Workspace, id: string, body: Record<string, unknown>): Promise<TicketView> {
      const res = await get().http.patch(`/v1/tickets/${id}`).set(bearer(ws.ownerKey)).send(body);
      if (res.status !== 200) throw new Error(`patch ticket: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as TicketView;
    },
    async makeTeam(ws: Workspace, name = 'Tier 2'): Promise<string> {
      const id = newId();
      await get().db.insertInto('teams').values({ id, tenant_id: ws.tenantId, name }).execute();
      return id;
    },
    async macroCount(tenantId: string): Promise<number> {
      const r = await sql<{ n: number }>`select count(*)::int as n from macros where tenant_id = ${tenantId}`.execute(get().db);
      return r.rows[0]!.n;
    },
    async runs(macroId: string, eventId?: string): Promise<number> {
      let q = get().db.selectFrom('macro_runs').select(sql<number>`count(*)::int`.as('n')).where('macro_id', '=', macroId);
      if (eventId) q = q.where('event_id', '=', eventId);
      return (await q.executeTakeFirstOrThrow()).n;
    },
    /** Every macros.trigger job (any state) in the maintenance queue for a ticket. */
    async triggerJobs(ticketId: string): Promise<Job[]> {
      const q = get().runtime.queues.queue('maintenance');
      const jobs = await q.getJobs(['wait', 'waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed']);
      const seen = new Set<string>();
      return jobs.filter((j) => {
        if (!j || j.name !== 'macros.trigger' || (j.data as { ticket_id?: string }).ticket_id !== ticketId || seen.has(j.id!)) return false;
        seen.add(j.id!);
        return true;
      });
    },
    /** Waits until at least `min` trigger jobs exist for the ticket and all of them have completed. */
    async settled(ticketId: string, min: number): Promise<Job[]> {
      return eventually(
        async () => {
          const jobs = await h.triggerJobs(ticketId);
          for (const j of jobs) {
            if (j.failedReason) throw new Error(`macros.trigger job ${j.id} failed: ${j.failedReason}`);
          }
          if (jobs.length < min) return undefined;
          const states = await Promise.all(jobs.map((j) => j.getState()));
          // Re-read once all are complete: the job objects above may predate their return values.
          return states.every((s) => s === 'completed') ? h.triggerJobs(ticketId) : undefined;
        },
        10_000,
        `${min} settled macros.trigger job(s) for ticket ${ticketId}`,
      );
    },
    /** Polls GET ticket until the macro has applied `count` times (≤ 10 s). */
    async waitApplied(ws: Workspace, ticketId: string, macroId: string, count = 1): Promise<TicketView> {
      return eventually(
        async () => {
          const t = await h.ticket(ws, ticketId);
          return applied(t, macroId).length >= count ? t : undefined;
        },
        10_000,
        `macro ${macroId} applied ${count}× on ticket ${ticketId}`,
      );
    },
  };
  return h;
}

describe('Macros: definitions and manual apply (no worker running)', () => {
  let ctx: TestContext;
  let ws: Workspace;
  let other: Workspace;
  const h = helpers(() => ctx);
  beforeAll(async () => {
    ctx = await startTestApp();
    ws = await createWorkspace(ctx);
    other = await createWorkspace(ctx);
  });
  afterAll(async () => {
    await ctx.close();
  });

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
      expect(after).toEqual({ ...m, ...expected, updated_at: expect.any(String) });
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
      const solved = (await setStatus(ctx, ws, t.id, 'solved')) as TicketView;
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

describe('Triggered macros with the worker running', () => {
  let ctx: TestContext;
  const h = helpers(() => ctx);
  beforeAll(async () => {
    ctx = await startTestApp();
    await ctx.startWorkers();
  });
  afterAll(async () => {
    await ctx.close();
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
