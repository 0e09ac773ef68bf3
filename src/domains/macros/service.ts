import { LRUCache } from 'lru-cache';
import type { Db, Executor } from '../../db';
import { listen, type Listener } from '../../db/notifications';
import type { MacroRow, TicketRow } from '../../db/types';
import { notFound, refuse, requireVersion, type VersionCondition } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import { checkTicketFilters } from '../tickets/filters';
import type { PatchTicketInput } from '../tickets/schemas';
import { eventFor, TICKET_TRIGGERS, type EventActor, type LockedTicket, type NewEvent, type TicketCommands, type TicketTrigger, type TriggerSink } from '../tickets/commands';
import type { TicketQueries } from '../tickets/queries';
import { activeMember } from '../members/store';
import { teamExists } from '../teams/store';
import { canTransition } from '../tickets/status';
import { LIMITS } from '../tickets/schemas';
import { macroAction, type CreateMacroInput, type MacroAction, type PatchMacroInput, type TimeCondition } from './schemas';
import * as store from './store';

const present = (m: MacroRow) => ({
  id: m.id,
  name: m.name,
  description: m.description,
  actions: m.actions as Record<string, unknown>[],
  enabled: m.enabled,
  trigger: m.trigger as { event: string; conditions: Record<string, string>; time?: TimeCondition } | null,
  created_at: iso(m.created_at),
  updated_at: iso(m.updated_at),
  // In the body as well as the ETag: a client that read only the list can still send If-Match on PATCH.
  version: String(m.version),
});

interface Skip {
  action: MacroAction;
  reason: string;
}

/**
 * How a run is written down: an application by hand or by a ticket event (`macro_applied`), or a time rule's
 * firing (`rule_fired`, with what it counted from). `into`: the events are left there for the caller to write with
 * a whole batch (the time-rule sweep), instead of one write per ticket.
 */
interface RunRecord {
  kind: 'macro_applied' | 'rule_fired';
  meta?: Record<string, unknown>;
  into?: NewEvent[];
}

/** Who a time rule's changes are by: the system, named after the rule. */
const ruleActor = (macro: Pick<MacroRow, 'name'>): EventActor => ({ actor_type: 'system', actor_user_id: null, actor_name: `Rule: ${macro.name}` });

/**
 * Enqueues a trigger job only when the workspace has an enabled macro listening for the event. Whether one
 * listens is remembered per workspace and event while this process LISTENs to `macros` (migration 0030):
 * every change to a workspace's macros drops its answers, so a ticket write asks PostgreSQL nothing. Without
 * the listener (not started, or its connection lost and not yet back) every publish asks, as before.
 * A macro saved in another process is seen once its NOTIFY arrives here, milliseconds after its commit.
 */
export function createMacroTriggerSink(deps: { db: Db; queues: QueueHub }): TriggerSink & { listenForChanges(databaseUrl: string): Listener & { ready: Promise<void> } } {
  const known = new LRUCache<string, boolean>({ max: 50_000 });
  /** Bumped by each change notice for a workspace: an answer read across one is not kept (it may be stale). */
  const generation = new Map<string, number>();
  let live = false;
  const genOf = (tenantId: string) => generation.get(tenantId) ?? 0;

  async function listening(tenantId: string, event: TicketTrigger): Promise<boolean> {
    const key = `${tenantId}|${event}`;
    const cached = live ? known.get(key) : undefined;
    if (cached !== undefined) return cached;
    const [wasLive, gen] = [live, genOf(tenantId)];
    const answer = await store.anyTriggeredBy(deps.db, tenantId, event);
    if (wasLive && live && genOf(tenantId) === gen) known.set(key, answer);
    return answer;
  }

  return {
    async publish(tenantId, ticketId, event, eventId, memo) {
      const key = `${tenantId}|${event}`;
      let yes = memo?.get(key);
      if (yes === undefined) {
        yes = await listening(tenantId, event);
        memo?.set(key, yes);
      }
      if (!yes) return;
      await deps.queues.enqueue('macros.trigger', { tenant_id: tenantId, ticket_id: ticketId, event, event_id: eventId });
    },

    listenForChanges(databaseUrl: string) {
      const forget = () => {
        live = false;
        known.clear();
      };
      let isReady!: () => void;
      /** Resolves once LISTEN is first in place (from then on answers are remembered). */
      const ready = new Promise<void>((resolve) => (isReady = resolve));
      const listener = listen(
        databaseUrl,
        'macros',
        (tenantId) => {
          generation.set(tenantId, genOf(tenantId) + 1);
          for (const event of TICKET_TRIGGERS) known.delete(`${tenantId}|${event}`);
        },
        {
          onListening: () => {
            known.clear();
            live = true;
            isReady();
          },
          onLost: forget,
        },
      );
      return { ready, close: () => listener.close() };
    },
  };
}

export function createMacroService(deps: {
  db: Db;
  tickets: Pick<TicketCommands, 'lock' | 'lockMany' | 'lockForChange' | 'userActor' | 'applyChanges' | 'addMessage' | 'recordEvents' | 'matches' | 'afterCommit'>;
  queries: Pick<TicketQueries, 'detailIn'>;
}) {
  const { db } = deps;
  const t = deps.tickets;

  async function validateWrite(tx: Executor, tenantId: string, input: { actions?: MacroAction[]; trigger?: { event: string; conditions: Record<string, unknown>; time?: TimeCondition } | null }) {
    for (const [i, a] of (input.actions ?? []).entries()) {
      if (a.type === 'assign_team' && !(await teamExists(tx, tenantId, a.team_id))) {
        throw refuse('team_unknown', 'No such team in this workspace.', [{ path: `body.actions.${i}.team_id`, message: 'unknown team' }]);
      }
      if (a.type === 'assign_user' && !(await activeMember(tx, tenantId, a.user_id))) {
        throw refuse('assignee_unknown', 'The user is not an active member of this workspace.', [{ path: `body.actions.${i}.user_id`, message: 'unknown member' }]);
      }
    }
    if (!input.trigger) return input.trigger;
    const conditions = checkTicketFilters(input.trigger.conditions, 'body.trigger.conditions').stored;
    // A time rule keeps its time condition as sent (validated by the schema); a ticket event's trigger has none.
    return { event: input.trigger.event, conditions, ...(input.trigger.time ? { time: input.trigger.time } : {}) };
  }

  /**
   * Runs a macro's actions in order on a locked ticket. An action the status machine (or a vanished team or
   * member) forbids is skipped and recorded as an event, never forced; the rest still apply.
   */
  async function run(tx: Executor, tenantId: string, by: EventActor, macro: MacroRow, ticket: LockedTicket, record: RunRecord = { kind: 'macro_applied' }) {
    const parsed = macroAction.array().safeParse(macro.actions);
    const actions = parsed.success ? parsed.data : [];
    const skipped: Skip[] = [];
    const patch: PatchTicketInput = {};
    const notes: string[] = [];
    let current = ticket;
    let changed = false;
    let tags = [...ticket.tags];
    for (const a of actions) {
      switch (a.type) {
        case 'set_status': {
          const to = a.status as TicketRow['status'];
          if (to === current.status) break;
          // Each step is judged where the earlier steps left the ticket, and applied at once.
          if (canTransition(current.status, to)) {
            await t.applyChanges(tx, tenantId, by, current, { status: to });
            current = await t.lock(tx, tenantId, ticket.id);
            changed = true;
          } else skipped.push({ action: a, reason: `a ${current.status} ticket cannot move to ${to}` });
          break;
        }
        case 'set_priority':
          patch.priority = a.priority;
          break;
        case 'add_tags': {
          const next = [...new Set([...tags, ...a.tags])];
          if (next.length > LIMITS.tags) skipped.push({ action: a, reason: `a ticket holds at most ${LIMITS.tags} tags` });
          else tags = next;
          patch.tags = tags;
          break;
        }
        case 'remove_tags':
          tags = tags.filter((x) => !a.tags.includes(x));
          patch.tags = tags;
          break;
        case 'assign_team':
          if (await teamExists(tx, tenantId, a.team_id)) patch.team_id = a.team_id;
          else skipped.push({ action: a, reason: 'the team no longer exists' });
          break;
        case 'assign_user':
          if (await activeMember(tx, tenantId, a.user_id)) patch.assignee_id = a.user_id;
          else skipped.push({ action: a, reason: 'the user is no longer an active member' });
          break;
        case 'add_note':
          notes.push(a.body);
          break;
      }
    }
    if (Object.keys(patch).length > 0) {
      const applied = await t.applyChanges(tx, tenantId, by, current, patch);
      changed = changed || applied.lastEventId !== undefined;
    }
    for (const body of notes) await t.addMessage(tx, tenantId, by, current, 'internal_note', body);
    changed = changed || notes.length > 0;
    const events = [
      ...skipped.map((s) => eventFor(by, ticket.id, 'macro_action_skipped', '', { macro_id: macro.id, action: s.action, reason: s.reason })),
      eventFor(by, ticket.id, record.kind, '', { macro_id: macro.id, name: macro.name, skipped: skipped.length, ...record.meta }),
    ];
    if (record.into) record.into.push(...events);
    else await t.recordEvents(tx, tenantId, events);
    return { changed, skipped, lastEventId: events.at(-1)!.id };
  }

  return {
    create: (actor: Principal, input: CreateMacroInput) =>
      db.transaction().execute(async (tx) => {
        const trigger = await validateWrite(tx, actor.tenantId, input);
        const row = await store.insertMacro(tx, actor.tenantId, { id: newId(), ...input, trigger: trigger ?? null, created_by_user_id: actor.userId });
        return present(row);
      }),

    async list(actor: Principal) {
      return { macros: (await store.listMacros(db, actor.tenantId)).map(present) };
    },

    patch: (actor: Principal, id: string, input: PatchMacroInput, ifMatch?: VersionCondition) =>
      db.transaction().execute(async (tx) => {
        const current = await store.lockMacro(tx, actor.tenantId, id);
        if (!current) throw notFound('macro');
        // No lost updates: a change made on a stale read is refused with nothing written.
        requireVersion(ifMatch, 'macro', current.version);
        const trigger = await validateWrite(tx, actor.tenantId, input);
        const row = await store.updateMacro(tx, actor.tenantId, id, { ...input, ...(input.trigger !== undefined ? { trigger } : {}) });
        if (!row) throw notFound('macro');
        return present(row);
      }),

    async apply(actor: Principal, ticketId: string, macroId: string) {
      const outcome = await db.transaction().execute(async (tx) => {
        const macro = await store.getMacro(tx, actor.tenantId, macroId);
        if (!macro) throw notFound('macro');
        if (!macro.enabled) throw refuse('macro_disabled', 'This macro is disabled; enable it before applying it.');
        const ticket = await t.lockForChange(tx, actor.tenantId, ticketId);
        const result = await run(tx, actor.tenantId, await t.userActor(tx, actor), macro, ticket);
        return { ...result, ticket: await deps.queries.detailIn(tx, actor.tenantId, ticketId) };
      });
      await t.afterCommit(actor.tenantId, ticketId, {
        trigger: outcome.changed ? { event: 'ticket.updated', eventId: outcome.lastEventId } : undefined,
      });
      return { ticket: outcome.ticket, skipped: outcome.skipped.map((s) => ({ action: s.action, reason: s.reason })) };
    },

    /**
     * A time rule's firing on a ticket the sweep locked and claimed (src/domains/macros/time-rules.ts): the rule's
     * actions exactly as an application's, then `rule_fired` naming the rule and the stretch it fired for. Its events
     * go to `into`, written with the sweep's batch. Like a triggered macro's, its changes publish no trigger.
     */
    fireRule: (tx: Executor, tenantId: string, macro: MacroRow, ticket: LockedTicket, meta: Record<string, unknown>, into: NewEvent[]) =>
      run(tx, tenantId, ruleActor(macro), macro, ticket, { kind: 'rule_fired', meta, into }),

    /**
     * The macros.trigger job. Each macro claims (macro, event) in the transaction that applies it, so a job
     * run twice, or two workers racing, apply it once. Changes made by a macro publish no trigger of their
     * own, so macros cannot set each other off in a loop.
     */
    async runTriggered(data: { tenant_id: string; ticket_id: string; event: TicketTrigger; event_id: string }) {
      let applied = 0;
      for (const macro of await store.triggeredBy(db, data.tenant_id, data.event)) {
        const outcome = await db.transaction().execute(async (tx) => {
          if (!(await store.claimRun(tx, data.tenant_id, macro.id, data.event_id))) return null;
          // Disabled since the list was read: a disabled macro never fires.
          if (!(await store.getMacro(tx, data.tenant_id, macro.id))?.enabled) return null;
          const [ticket] = await t.lockMany(tx, data.tenant_id, [data.ticket_id]);
          if (!ticket || ticket.status === 'merged') return null;
          const conditions = checkTicketFilters((macro.trigger as { conditions?: Record<string, unknown> })?.conditions ?? {}, 'trigger.conditions').parsed;
          if (!(await t.matches(tx, data.tenant_id, data.ticket_id, conditions))) return null;
          const by: EventActor = { actor_type: 'system', actor_user_id: null, actor_name: `Macro: ${macro.name}` };
          return run(tx, data.tenant_id, by, macro, ticket);
        });
        if (outcome) applied += 1;
      }
      return { applied };
    },
  };
}

export type MacroService = ReturnType<typeof createMacroService>;
