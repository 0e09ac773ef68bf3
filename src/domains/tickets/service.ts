import type { Logger } from 'pino';
import type { Db, Executor } from '../../db';
import type { NewTicketEvent, SlaPolicyRow, TicketEventRow, TicketRow } from '../../db/types';
import { notFound, refuse } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import type { CustomerService } from '../customers/service';
import { mentionedIds, type NotificationService } from '../notifications/service';
import type { CreateTicketInput, PatchTicketInput, TicketFilters } from './schemas';
import { dueTimes, DEFAULT_SLA_TARGETS, type Priority } from '../sla/targets';
import * as slaStore from '../sla/store';
import { canTransition, legalNextStates, REOPENABLE } from './status';
import * as store from './store';
import { listTenantIds, lockTenant } from '../workspaces/store';

type NewEvent = Omit<NewTicketEvent, 'tenant_id'>;

/** One ticket to open: who opened it, its fields, and the kind and meta of its first event. */
export interface OpenSpec {
  by: EventActor;
  fields: {
    id?: string;
    subject: string;
    description: string;
    priority: Priority;
    source: string;
    customer_id: string;
    assignee_id: string | null;
    team_id: string | null;
    tags: string[];
    metadata: Record<string, unknown>;
    conversation_key: string | null;
  };
  kind: string;
  meta?: Record<string, unknown>;
}

/** Who an event is by: a person (directly or through their key), or the system (timers, triggered macros). */
export interface EventActor {
  actor_type: 'user' | 'system' | 'customer';
  actor_user_id: string | null;
  actor_name: string | null;
}

export type TicketTrigger = 'ticket.created' | 'ticket.updated' | 'ticket.reopened';

/** Told after commit about events that triggered macros may react to (the macros domain listens). */
export interface TriggerSink {
  /** `memo` lets a caller publishing many events at once ask "does anyone listen?" once per workspace and event. */
  publish(tenantId: string, ticketId: string, event: TicketTrigger, eventId: string, memo?: Map<string, boolean>): Promise<void>;
}

/**
 * Told about replies on tickets that came in by email (the mailbox domain listens): `record` runs in the
 * reply's transaction, so a reply and its pending send commit together; `dispatch` runs after commit.
 */
export interface OutboundSink {
  record(tx: Executor, tenantId: string, ticket: TicketRow, replyEventId: string): Promise<boolean>;
  dispatch(tenantId: string, replyEventId: string): Promise<void>;
}

export const eventFor = (by: EventActor, ticketId: string, kind: string, body: string, meta: Record<string, unknown>): NewEvent => ({
  id: newId(),
  ticket_id: ticketId,
  kind,
  body,
  meta: JSON.stringify(meta),
  ...by,
});

const presentEvent = (e: TicketEventRow) => ({
  id: e.id,
  kind: e.kind,
  body: e.body,
  meta: e.meta,
  actor_type: e.actor_type,
  ...(e.actor_user_id ? { actor_user_id: e.actor_user_id } : {}),
  ...(e.actor_name ? { actor_name: e.actor_name } : {}),
  created_at: iso(e.created_at),
});

const presentSummary = (t: TicketRow) => ({
  id: t.id,
  subject: t.subject,
  status: t.status,
  priority: t.priority,
  source: t.source,
  ...(t.assignee_id ? { assignee_id: t.assignee_id } : {}),
  customer_id: t.customer_id,
  ...(t.team_id ? { team_id: t.team_id } : {}),
  tags: t.tags,
  first_response_due: iso(t.first_response_due),
  resolution_due: iso(t.resolution_due),
  sla_breached: t.sla_breached,
  ...(t.merged_into_id ? { merged_into_id: t.merged_into_id } : {}),
  created_at: iso(t.created_at),
  updated_at: iso(t.updated_at),
});

const ticketMerged = (id: string) => refuse('ticket_merged', `Ticket ${id} is merged; merged tickets are terminal.`);

export function createTicketService(deps: {
  db: Db;
  customers: CustomerService;
  notifications: NotificationService;
  queues: QueueHub;
  logger: Logger;
  triggers: TriggerSink;
  outbound?: OutboundSink;
}) {
  const { db, customers, notifications, queues, logger, triggers, outbound } = deps;

  async function userActor(tx: Executor, actor: Principal): Promise<EventActor> {
    return { actor_type: 'user', actor_user_id: actor.userId, actor_name: await store.userName(tx, actor.userId) };
  }

  // Within one transaction the default policy cannot change under us (a new default takes the workspace
  // lock), so a batch of ingested tickets reads it once.
  const defaults = new WeakMap<Executor, Map<string, SlaPolicyRow>>();

  async function policyFor(tx: Executor, tenantId: string, policyId?: string) {
    if (!policyId) {
      const memo = defaults.get(tx)?.get(tenantId);
      if (memo) return memo;
    }
    const policy = policyId ? await slaStore.getPolicy(tx, tenantId, policyId) : await slaStore.defaultPolicy(tx, tenantId);
    if (policy && !policyId && tx !== db) {
      if (!defaults.has(tx)) defaults.set(tx, new Map());
      defaults.get(tx)!.set(tenantId, policy);
    }
    if (policy) return policy;
    // A workspace always gets a default policy; this only covers one created before SLA policies existed.
    await lockTenant(tx, tenantId);
    const raced = await slaStore.defaultPolicy(tx, tenantId);
    if (raced) return raced;
    return slaStore.insertPolicy(tx, tenantId, { id: newId(), name: 'Default', is_default: true, targets: DEFAULT_SLA_TARGETS });
  }

  /**
   * Delayed jobs at each due time. Enqueued after commit; if Redis is unreachable the ticket is still
   * written and the per-minute sweep catches the breach instead.
   */
  async function scheduleSla(tenantId: string, t: Pick<TicketRow, 'id' | 'first_response_due' | 'resolution_due'>) {
    const now = Date.now();
    try {
      for (const due of [t.first_response_due, t.resolution_due]) {
        await queues.enqueue(
          'sla.check',
          { tenant_id: tenantId, ticket_id: t.id },
          { jobId: `sla-${t.id}-${due.getTime()}`, delayMs: due.getTime() - now },
        );
      }
    } catch (err) {
      logger.warn({ ticket_id: t.id, err: (err as Error).message }, 'SLA timer not scheduled; the sweep will catch it');
    }
  }

  async function validateRefs(tx: Executor, tenantId: string, refs: { assignee_id?: string | null; team_id?: string | null }) {
    if (refs.assignee_id && !(await store.activeMember(tx, tenantId, refs.assignee_id))) {
      throw refuse('assignee_unknown', 'The assignee is not an active member of this workspace.', [{ path: 'body.assignee_id', message: 'unknown member' }]);
    }
    if (refs.team_id && !(await store.teamExists(tx, tenantId, refs.team_id))) {
      throw refuse('team_unknown', 'No such team in this workspace.', [{ path: 'body.team_id', message: 'unknown team' }]);
    }
  }

  async function detail(exec: Executor, tenantId: string, id: string) {
    const t = await store.getTicketDetail(exec, tenantId, id);
    if (!t) throw notFound('ticket');
    const [events, totals] = await Promise.all([store.listEvents(exec, tenantId, id), store.workTotals(exec, tenantId, id)]);
    return {
      ...presentSummary(t),
      description: t.description,
      ...(t.assignee_id && t.assignee_name ? { assignee_name: t.assignee_name, assignee_email: t.assignee_email! } : {}),
      customer_name: t.customer_name,
      customer_email: t.customer_email,
      ...(t.team_id && t.team_name ? { team_name: t.team_name } : {}),
      metadata: t.metadata,
      sla_policy_id: t.sla_policy_id,
      ...(t.reopened_at ? { reopened_at: iso(t.reopened_at) } : {}),
      legal_next_states: legalNextStates(t.status),
      time_total_minutes: totals.time.total,
      time_billable_minutes: totals.time.billable,
      todo_counts: totals.todos,
      events: events.map(presentEvent),
    };
  }

  // One snapshot for the row and its timeline: read as separate statements, a change committing in between
  // showed its event next to the fields from before it.
  const snapshotDetail = (tenantId: string, id: string) =>
    db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute((tx) => detail(tx, tenantId, id));

  async function lockOne(tx: Executor, tenantId: string, id: string): Promise<TicketRow> {
    const [row] = await store.lockTickets(tx, tenantId, [id]);
    if (!row) throw notFound('ticket');
    return row;
  }

  /** A new or reset clock: both targets counted from `from` under the ticket's policy and priority. */
  async function clockFrom(tx: Executor, tenantId: string, policyId: string, priority: Priority, from: Date) {
    const policy = await policyFor(tx, tenantId, policyId);
    return dueTimes(policy.targets, priority, from);
  }

  /** What reopen does to the SLA: every target unmet again, no breach, both timers from `now`. */
  async function restartedClock(tx: Executor, tenantId: string, t: TicketRow, now: Date): Promise<store.TicketUpdate> {
    return {
      solved_at: null,
      first_responded_at: null,
      first_response_breached_at: null,
      resolution_breached_at: null,
      ...(await clockFrom(tx, tenantId, t.sla_policy_id, t.priority, now)),
    };
  }

  /** A new open ticket under the workspace's default policy, with its first event; inside the caller's tx. */
  /**
   * New tickets with their first events, two statements however many (an ingest batch opens dozens at once);
   * `id` may be chosen by the caller. Returned in the order asked.
   */
  async function openTickets(tx: Executor, tenantId: string, specs: OpenSpec[]): Promise<{ row: TicketRow; eventId: string }[]> {
    if (specs.length === 0) return [];
    const policy = await policyFor(tx, tenantId);
    const now = new Date();
    const rows = await store.insertTickets(
      tx,
      tenantId,
      specs.map(({ fields: f }) => ({
        ...f,
        id: f.id ?? newId(),
        status: 'open' as const,
        metadata: JSON.stringify(f.metadata),
        sla_policy_id: policy.id,
        ...dueTimes(policy.targets, f.priority, now),
        created_at: now,
        updated_at: now,
      })),
    );
    const firsts = rows.map((row, i) => eventFor(specs[i]!.by, row.id, specs[i]!.kind, specs[i]!.fields.description, specs[i]!.meta ?? {}));
    await store.insertEvents(tx, tenantId, firsts);
    return rows.map((row, i) => ({ row, eventId: firsts[i]!.id }));
  }

  const openTicket = async (tx: Executor, tenantId: string, by: EventActor, fields: OpenSpec['fields'], kind: string, meta: Record<string, unknown> = {}) =>
    (await openTickets(tx, tenantId, [{ by, fields, kind, meta }]))[0]!;

  /** Reopen's writes on a locked solved or closed ticket: status open, clock restarted, reopen + status events. */
  async function reopenLocked(tx: Executor, tenantId: string, by: EventActor, t: TicketRow): Promise<string> {
    const now = new Date();
    await store.updateTicket(tx, tenantId, t.id, { status: 'open', reopened_at: now, ...(await restartedClock(tx, tenantId, t, now)) });
    const reopenEvent = eventFor(by, t.id, 'reopen', '', { from: t.status });
    await store.insertEvents(tx, tenantId, [reopenEvent, eventFor(by, t.id, 'status_changed', '', { from: t.status, to: 'open' })]);
    return reopenEvent.id;
  }

  /** Customers' inbound messages on locked tickets: the events, the tickets touched, the assignees told. */
  async function addInbounds(tx: Executor, tenantId: string, entries: { by: EventActor; ticket: TicketRow; kind: string; body: string; meta: Record<string, unknown> }[]) {
    if (entries.length === 0) return [];
    await store.touchTickets(tx, tenantId, [...new Set(entries.map((e) => e.ticket.id))]);
    const events = entries.map((e) => eventFor(e.by, e.ticket.id, e.kind, e.body, e.meta));
    await store.insertEvents(tx, tenantId, events);
    for (const e of entries) {
      if (e.ticket.assignee_id) {
        await notifications.notify(tx, tenantId, [e.ticket.assignee_id], null, { kind: 'reply_on_assigned', ticketId: e.ticket.id, body: e.ticket.subject });
      }
    }
    return events.map((e) => e.id);
  }

  /**
   * Appends a reply or note on a locked ticket, with the notifications it causes. A reply on an email
   * ticket is also recorded for sending; `queued` tells the caller to dispatch it after commit.
   */
  async function addMessage(tx: Executor, tenantId: string, by: EventActor, t: TicketRow, kind: 'reply' | 'internal_note', body: string) {
    const firstResponse = kind === 'reply' && t.first_responded_at === null;
    await store.updateTicket(tx, tenantId, t.id, firstResponse ? { first_responded_at: new Date() } : {});
    const sendsEmail = kind === 'reply' && t.source === 'email' && outbound !== undefined;
    const event = eventFor(by, t.id, kind, body, kind === 'reply' ? { first_response: firstResponse, ...(sendsEmail ? { email_delivery: 'queued' } : {}) } : {});
    await store.insertEvents(tx, tenantId, [event]);
    const queued = sendsEmail ? await outbound!.record(tx, tenantId, t, event.id) : false;
    if (kind === 'reply' && t.assignee_id) {
      await notifications.notify(tx, tenantId, [t.assignee_id], by.actor_user_id, { kind: 'reply_on_assigned', ticketId: t.id, body: t.subject });
    }
    if (kind === 'internal_note') {
      await notifications.notify(tx, tenantId, mentionedIds(body), by.actor_user_id, { kind: 'mentioned', ticketId: t.id, body: t.subject });
    }
    return { eventId: event.id, queued };
  }

  async function message(actor: Principal, id: string, kind: 'reply' | 'internal_note', body: string) {
    const { view, sent } = await db.transaction().execute(async (tx) => {
      const t = await lockOne(tx, actor.tenantId, id);
      if (t.status === 'merged') throw ticketMerged(id);
      const sent = await addMessage(tx, actor.tenantId, await userActor(tx, actor), t, kind, body);
      return { view: await detail(tx, actor.tenantId, id), sent };
    });
    if (sent.queued) await outbound!.dispatch(actor.tenantId, sent.eventId);
    return view;
  }

  /**
   * The one place ticket fields change, on a row the caller has locked: PATCH and macros both come here.
   * Returns whether due times moved and the id of the last event written (for triggers).
   */
  async function applyChanges(tx: Executor, tenantId: string, by: EventActor, t: TicketRow, input: PatchTicketInput) {
    await validateRefs(tx, tenantId, input);
    const update: store.TicketUpdate = {};
    const events: NewEvent[] = [];
    const changes: Record<string, { from: unknown; to: unknown }> = {};

    if (input.status !== undefined && input.status !== t.status) {
      const to = input.status as TicketRow['status'];
      if (!canTransition(t.status, to)) {
        const allowed = legalNextStates(t.status);
        const hint = REOPENABLE.includes(t.status) && to === 'open' ? ' Use POST /v1/tickets/{ticket_id}/reopen.' : '';
        throw refuse('illegal_transition', `A ${t.status} ticket cannot move to ${to}; allowed: ${allowed.length ? allowed.join(', ') : 'none'}.${hint}`);
      }
      update.status = to;
      if ((to === 'solved' || to === 'closed') && t.solved_at === null) update.solved_at = new Date();
      // Leaving spam after the ticket had been resolved (closed → spam → open) is a way back to work, so it
      // gets reopen's clock: otherwise the ticket would be open with its resolution already counted as met.
      if (t.status === 'spam' && t.solved_at !== null) Object.assign(update, await restartedClock(tx, tenantId, t, new Date()));
      events.push(eventFor(by, t.id, 'status_changed', '', { from: t.status, to }));
    }
    if (input.priority !== undefined && input.priority !== t.priority) {
      update.priority = input.priority;
      changes.priority = { from: t.priority, to: input.priority };
      // A new priority moves the targets not yet met or breached, counted from the clock's start.
      const due = await clockFrom(tx, tenantId, t.sla_policy_id, input.priority, t.reopened_at ?? t.created_at);
      if (t.first_responded_at === null && t.first_response_breached_at === null) update.first_response_due = due.first_response_due;
      if (t.solved_at === null && t.resolution_breached_at === null) update.resolution_due = due.resolution_due;
    }
    if (input.assignee_id !== undefined && input.assignee_id !== t.assignee_id) {
      update.assignee_id = input.assignee_id;
      changes.assignee_id = { from: t.assignee_id, to: input.assignee_id };
      if (input.assignee_id) {
        await notifications.notify(tx, tenantId, [input.assignee_id], by.actor_user_id, { kind: 'assigned', ticketId: t.id, body: t.subject });
      }
    }
    if (input.team_id !== undefined && input.team_id !== t.team_id) {
      update.team_id = input.team_id;
      changes.team_id = { from: t.team_id, to: input.team_id };
    }
    if (input.tags !== undefined) {
      const tags = [...new Set(input.tags)];
      if (tags.join('\u0000') !== t.tags.join('\u0000')) {
        update.tags = tags;
        changes.tags = { from: t.tags, to: tags };
      }
    }
    if (input.metadata !== undefined) {
      update.metadataPatch = input.metadata;
      changes.metadata = { from: null, to: input.metadata };
    }
    if (Object.keys(changes).length > 0) events.push(eventFor(by, t.id, 'fields_changed', '', { changes }));
    if (Object.keys(update).length > 0) await store.updateTicket(tx, tenantId, t.id, update);
    await store.insertEvents(tx, tenantId, events);
    return { dueMoved: update.first_response_due !== undefined || update.resolution_due !== undefined, lastEventId: events.at(-1)?.id };
  }

  /** Round robin's write: team and assignee set, one `assigned` event, the assignee notified. */
  async function assign(tx: Executor, tenantId: string, by: EventActor, t: TicketRow, teamId: string, userId: string, meta: Record<string, unknown>) {
    await store.updateTicket(tx, tenantId, t.id, { team_id: teamId, assignee_id: userId });
    const event = eventFor(by, t.id, 'assigned', '', { team_id: teamId, assignee_id: userId, from_assignee_id: t.assignee_id, ...meta });
    await store.insertEvents(tx, tenantId, [event]);
    await notifications.notify(tx, tenantId, [userId], by.actor_user_id, { kind: 'assigned', ticketId: t.id, body: t.subject, meta: { team_id: teamId } });
    return event.id;
  }

  /** After commit: timers for moved due times, and triggered macros for the event (never for system changes). */
  async function afterCommit(
    tenantId: string,
    ticketId: string,
    o: { dueMoved: boolean; trigger?: { event: TicketTrigger; eventId: string }; memo?: Map<string, boolean> },
  ) {
    if (o.dueMoved) {
      const row = await store.getTicket(db, tenantId, ticketId);
      if (row) await scheduleSla(tenantId, row);
    }
    if (o.trigger) {
      try {
        await triggers.publish(tenantId, ticketId, o.trigger.event, o.trigger.eventId, o.memo);
      } catch (err) {
        logger.warn({ ticket_id: ticketId, err: (err as Error).message }, 'macro trigger not enqueued');
      }
    }
  }

  /** The sla.check job: marks what is overdue, appending one sla_breached event per ticket and target. */
  async function checkSla(tenantId: string, ticketId?: string): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const events: NewEvent[] = [];
      for (const target of ['first_response', 'resolution'] as const) {
        for (const hit of await store.markBreaches(tx, tenantId, target, ticketId)) {
          events.push({
            id: newId(),
            ticket_id: hit.id,
            kind: 'sla_breached',
            body: '',
            meta: JSON.stringify({ target, due_at: iso(hit.due) }),
            actor_type: 'system',
            actor_user_id: null,
            actor_name: null,
          });
        }
      }
      await store.insertEvents(tx, tenantId, events);
      return events.length;
    });
  }

  return {
    checkSla,
    /** Building blocks for other domains' transactions (round robin, macros). */
    internals: { lockOne, lockMany: store.lockTickets, openTickets, reopenLocked, addInbounds, userActor, applyChanges, addMessage, assign, afterCommit, detailIn: detail, recordEvents: store.insertEvents, matches: store.matchesFilters },
    detail: (actor: Principal, id: string) => snapshotDetail(actor.tenantId, id),

    async create(actor: Principal, input: CreateTicketInput) {
      const created = await db.transaction().execute(async (tx) => {
        await validateRefs(tx, actor.tenantId, input);
        let customerId = input.customer_id;
        if (customerId) {
          if (!(await customers.exists(tx, actor.tenantId, customerId))) throw refuse('customer_unknown', 'No such customer in this workspace.', [{ path: 'body.customer_id', message: 'unknown customer' }]);
        } else {
          customerId = (await customers.findOrCreateByEmail(tx, actor.tenantId, input.customer_email!)).id;
        }
        const { row, eventId } = await openTicket(tx, actor.tenantId, await userActor(tx, actor), {
          subject: input.subject,
          description: input.description,
          priority: input.priority,
          source: input.source,
          customer_id: customerId,
          assignee_id: input.assignee_id ?? null,
          team_id: input.team_id ?? null,
          tags: [...new Set(input.tags)],
          metadata: input.metadata,
          conversation_key: null,
        }, 'ticket_created');
        if (row.assignee_id) {
          await notifications.notify(tx, actor.tenantId, [row.assignee_id], actor.userId, { kind: 'assigned', ticketId: row.id, body: row.subject });
        }
        return { ...row, createdEventId: eventId };
      });
      await scheduleSla(actor.tenantId, created);
      await afterCommit(actor.tenantId, created.id, { dueMoved: false, trigger: { event: 'ticket.created', eventId: created.createdEventId } });
      return snapshotDetail(actor.tenantId, created.id);
    },

    async list(actor: Principal, query: TicketFilters & { limit: number; offset: number }) {
      const { limit, offset, ...filters } = query;
      const [rows, total] = await Promise.all([
        store.listTickets(db, actor.tenantId, filters, { limit, offset }),
        store.countTickets(db, actor.tenantId, filters),
      ]);
      return { total, limit, offset, tickets: rows.map(presentSummary) };
    },

    async patch(actor: Principal, id: string, input: PatchTicketInput) {
      const { result, applied } = await db.transaction().execute(async (tx) => {
        const t = await lockOne(tx, actor.tenantId, id);
        if (t.status === 'merged') throw ticketMerged(id);
        const applied = await applyChanges(tx, actor.tenantId, await userActor(tx, actor), t, input);
        return { result: await detail(tx, actor.tenantId, id), applied };
      });
      await afterCommit(actor.tenantId, id, {
        dueMoved: applied.dueMoved,
        trigger: applied.lastEventId ? { event: 'ticket.updated', eventId: applied.lastEventId } : undefined,
      });
      return result;
    },

    reply: (actor: Principal, id: string, body: string) => message(actor, id, 'reply', body),
    note: (actor: Principal, id: string, body: string) => message(actor, id, 'internal_note', body),

    async reopen(actor: Principal, id: string) {
      const result = await db.transaction().execute(async (tx) => {
        const t = await lockOne(tx, actor.tenantId, id);
        if (!REOPENABLE.includes(t.status)) {
          throw refuse('reopen_not_allowed', `Only a solved or closed ticket can be reopened; this one is ${t.status}.`);
        }
        const eventId = await reopenLocked(tx, actor.tenantId, await userActor(tx, actor), t);
        return { detail: await detail(tx, actor.tenantId, id), eventId };
      });
      await afterCommit(actor.tenantId, id, { dueMoved: true, trigger: { event: 'ticket.reopened', eventId: result.eventId } });
      return result.detail;
    },

    async merge(actor: Principal, sourceId: string, targetId: string) {
      if (sourceId === targetId) throw refuse('merge_self', 'A ticket cannot be merged into itself.');
      return db.transaction().execute(async (tx) => {
        const locked = await store.lockTickets(tx, actor.tenantId, [sourceId, targetId]);
        const source = locked.find((t) => t.id === sourceId);
        const target = locked.find((t) => t.id === targetId);
        if (!source) throw notFound('ticket');
        if (!target) throw notFound('target ticket');
        if (source.status === 'merged') throw ticketMerged(sourceId);
        if (target.status === 'merged') throw ticketMerged(targetId);

        // The winner's timeline is complete: every source event, with its time and actor, marked via_merge.
        const copies: NewEvent[] = (await store.listEvents(tx, actor.tenantId, sourceId)).map((e) => ({
          id: newId(),
          ticket_id: targetId,
          kind: e.kind,
          body: e.body,
          meta: JSON.stringify({ ...e.meta, via_merge: sourceId }),
          actor_type: e.actor_type,
          actor_user_id: e.actor_user_id,
          actor_name: e.actor_name,
          created_at: e.created_at,
        }));
        await store.insertEvents(tx, actor.tenantId, copies);
        await store.updateTicket(tx, actor.tenantId, sourceId, { status: 'merged', merged_into_id: targetId });
        await store.updateTicket(tx, actor.tenantId, targetId, {});
        const by = await userActor(tx, actor);
        await store.insertEvents(tx, actor.tenantId, [
          eventFor(by, sourceId, 'merged', '', { merged_into: targetId, from_status: source.status }),
          eventFor(by, targetId, 'merged', '', { merged_from: sourceId, events_copied: copies.length }),
        ]);
        return detail(tx, actor.tenantId, sourceId);
      });
    },

    async sweepSla(): Promise<{ breached: number }> {
      let breached = 0;
      for (const tenantId of await listTenantIds(db)) breached += await checkSla(tenantId);
      return { breached };
    },
  };
}

export type TicketService = ReturnType<typeof createTicketService>;
