import type { Logger } from 'pino';
import type { AfterAnswer } from '../../lib/after-answer';
import type { Executor } from '../../db';
import type { NewTicketEvent, TicketRow } from '../../db/types';
import { notFound, refuse, ticketMerged } from '../../lib/errors';
import { isUuid, newId } from '../../lib/ids';
import type { Principal } from '../identity/principal';
import { activeMember, userName } from '../members/store';
import { mentionedIds, type NotificationService } from '../notifications/service';
import { dueTimes, type Priority } from '../sla/targets';
import { teamExists } from '../teams/store';
import type { PatchTicketInput, TicketFilters } from './schemas';
import { appendToTimeline, type TimelineOptions, type TimelineWatcher } from './timeline';
import type { EventSink } from '../events/types';
import type { TicketSla } from './sla';
import type { AttachmentSummary } from '../files/types';
import { canTransition, legalNextStates, REOPENABLE } from './status';
import * as store from './store';

/**
 * The tickets aggregate's front door: the transactional moves other domains (ingest, macros, teams, mailbox)
 * and the tickets' own use cases make, each inside the caller's transaction. A change needs a row locked
 * here (`LockedTicket` is only made by `lock` / `lockMany`), and every command that changes a ticket refuses
 * a merged one itself and writes its own events, so no caller repeats those rules.
 */

export { ticketMerged };

export type NewEvent = Omit<NewTicketEvent, 'tenant_id'>;

declare const lockedBrand: unique symbol;
/** A ticket row locked FOR UPDATE in the current transaction (only this module makes one). */
export type LockedTicket = TicketRow & { readonly [lockedBrand]: true };

/** Who an event is by: a person (directly or through their key), or the system (timers, triggered macros). */
export interface EventActor {
  actor_type: 'user' | 'system' | 'customer';
  actor_user_id: string | null;
  actor_name: string | null;
}

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
  /**
   * Binds files to the first event once the ticket row exists (the ticket's foreign key is not deferred; the
   * event's is), before the event is written, so the event shows them from the start (a web chat visitor's files).
   */
  files?: (ticketId: string, eventId: string) => Promise<AttachmentSummary[]>;
}

/** What an inbound message carries that says which conversation it continues. */
export interface InboundRef {
  /** Email threads by Message-ID (then the plus-address hash); other channels by conversation key. */
  email: boolean;
  inReplyTo?: string[];
  mailboxHash?: string;
  /** The ticket source of its channel. */
  source: string;
  conversationKey?: string;
}

export const TICKET_TRIGGERS = ['ticket.created', 'ticket.updated', 'ticket.reopened'] as const;
export type TicketTrigger = (typeof TICKET_TRIGGERS)[number];

/** Told after commit about events that triggered macros may react to (the macros domain listens). */
export interface TriggerSink {
  /** `memo` lets a caller publishing many events at once ask "does anyone listen?" once per workspace and event. */
  publish(tenantId: string, ticketId: string, event: TicketTrigger, eventId: string, memo?: Map<string, boolean>): Promise<void>;
}

/** A WhatsApp template a reply is sent as (past the 24-hour window only templates may be sent). */
export interface ReplyTemplate {
  name: string;
  language: string;
  components?: unknown[];
}

/** What the outbox made of a reply: its channel's delivery, as the timeline's first delivery event says it. */
export interface RecordedDelivery {
  channel: string;
  state: 'queued' | 'sent';
  detail: string;
  meta: Record<string, unknown>;
  /** Whether a send job must be queued after commit. */
  dispatch: boolean;
}

/**
 * Told about every reply (the outbound domain listens): `record` runs in the reply's transaction, so a reply
 * and its pending send commit together (or it refuses the reply: a closed WhatsApp window, a body the channel
 * cannot carry); `dispatch` runs after commit.
 */
export interface OutboundSink {
  record(tx: Executor, tenantId: string, ticket: TicketRow, replyEventId: string, reply: { body: string; template?: ReplyTemplate; attachments?: AttachmentSummary[] }): Promise<RecordedDelivery | undefined>;
  dispatch(tenantId: string, replyEventId: string): Promise<void>;
}

/** Who writes delivery events on the timeline. */
export const DELIVERY_ACTOR: EventActor = { actor_type: 'system', actor_user_id: null, actor_name: 'Delivery' };

export const eventFor = (by: EventActor, ticketId: string, kind: string, body: string, meta: Record<string, unknown>): NewEvent => ({
  id: newId(),
  ticket_id: ticketId,
  kind,
  body,
  meta: JSON.stringify(meta),
  ...by,
});

/** The timeline's option for the detail row an UPDATE just returned (its events are presented from it). */
const freshly = (row: store.TicketDetailRow | undefined) => ({ fresh: row ? [row] : [] });

/** The files some events are written with, by event id (only those `bind` gave files to), bound one event after another. */
async function filesOf(events: NewEvent[], bind: (e: NewEvent, i: number) => Promise<AttachmentSummary[]> | undefined): Promise<Map<string, AttachmentSummary[]>> {
  const out = new Map<string, AttachmentSummary[]>();
  for (const [i, e] of events.entries()) {
    const attached = await bind(e, i);
    if (attached && attached.length > 0) out.set(e.id as string, attached);
  }
  return out;
}

/** How many merges an inbound message follows to reach the live ticket (merge chains are short). */
const MAX_MERGE_HOPS = 16;

export function createTicketCommands(deps: {
  notifications: NotificationService;
  logger: Logger;
  sla: TicketSla;
  /** Where the timeline's outbound events go (issue 19); without it the timeline emits none. */
  events?: EventSink | undefined;
  /** Told about every event the timeline appends (the reports: issue 37). */
  reports?: TimelineWatcher | undefined;
  triggers: TriggerSink;
  outbound?: OutboundSink;
  threadWindowHours: number;
  /** Where a request's after-commit work runs once its answer is on its way (see `afterAnswer`). */
  later?: AfterAnswer;
}) {
  const { notifications, logger, sla, triggers, outbound } = deps;
  /**
   * Writes timeline events and the outbound events they are, in the caller's transaction: the timeline module
   * below this one, given this module's sink (issue 35: nothing is injected from the service above).
   */
  const timeline = (tx: Executor, tenantId: string, events: NewEvent[], opts?: TimelineOptions) => appendToTimeline(deps, tx, tenantId, events, opts);

  /** A merged ticket is terminal: every change refuses it here, with the one merged error. */
  const refuseMerged = (t: TicketRow): void => {
    if (t.status === 'merged') throw ticketMerged(t.id);
  };

  async function userActor(tx: Executor, actor: Principal): Promise<EventActor> {
    // The name came with the credential when it could (one round trip fewer per write); else it is read here.
    const name = actor.userName !== undefined ? actor.userName : await userName(tx, actor.userId);
    return { actor_type: 'user', actor_user_id: actor.userId, actor_name: name };
  }

  async function lock(tx: Executor, tenantId: string, id: string): Promise<LockedTicket> {
    const [row] = await store.lockTickets(tx, tenantId, [id]);
    if (!row) throw notFound('ticket');
    return row as LockedTicket;
  }

  /** A ticket locked to be changed: a merged one is refused before anything else is read or decided. */
  async function lockForChange(tx: Executor, tenantId: string, id: string): Promise<LockedTicket> {
    const t = await lock(tx, tenantId, id);
    refuseMerged(t);
    return t;
  }

  /** Row locks in id order, all at once: two transactions locking the same tickets cannot deadlock. */
  const lockMany = async (tx: Executor, tenantId: string, ids: string[]) => (await store.lockTickets(tx, tenantId, ids)) as LockedTicket[];

  async function validateRefs(tx: Executor, tenantId: string, refs: { assignee_id?: string | null; team_id?: string | null }) {
    if (refs.assignee_id && !(await activeMember(tx, tenantId, refs.assignee_id))) {
      throw refuse('assignee_unknown', 'The assignee is not an active member of this workspace.', [{ path: 'body.assignee_id', message: 'unknown member' }]);
    }
    if (refs.team_id && !(await teamExists(tx, tenantId, refs.team_id))) {
      throw refuse('team_unknown', 'No such team in this workspace.', [{ path: 'body.team_id', message: 'unknown team' }]);
    }
  }

  /**
   * New tickets with their first events, two statements however many (an ingest batch opens dozens at once);
   * `id` may be chosen by the caller. Returned in the order asked.
   */
  async function openTickets(tx: Executor, tenantId: string, specs: OpenSpec[]): Promise<{ row: TicketRow; eventId: string }[]> {
    if (specs.length === 0) return [];
    const policy = await sla.policyFor(tx, tenantId);
    const clock = await sla.clockFor(tx, tenantId, policy);
    const now = new Date();
    const rows = await store.insertTickets(
      tx,
      tenantId,
      specs.map(({ fields: f }, i) => ({
        ...f,
        id: f.id ?? newId(),
        status: 'open' as const,
        metadata: JSON.stringify(f.metadata),
        sla_policy_id: policy.id,
        ...dueTimes(policy.targets, f.priority, now, clock),
        created_at: now,
        updated_at: now,
        status_entered_at: now,
        // A ticket a customer's message opened starts with that message (the time rules count from it).
        last_customer_message_at: specs[i]!.kind.startsWith('inbound_') ? now : null,
      })),
    );
    const firsts = rows.map((row, i) => eventFor(specs[i]!.by, row.id, specs[i]!.kind, specs[i]!.fields.description, specs[i]!.meta ?? {}));
    const attachments = await filesOf(firsts, (e, i) => specs[i]!.files?.(rows[i]!.id, e.id));
    await timeline(tx, tenantId, firsts, { opened: true, ...(attachments.size > 0 ? { attachments } : {}) });
    return rows.map((row, i) => ({ row, eventId: firsts[i]!.id }));
  }

  /**
   * Which live ticket each inbound message continues, locked: an email by the newest ticket any of its
   * Message-IDs reached (then its plus-address hash), another channel by its conversation's latest ticket
   * active within the thread window. Merges are followed to the winner; a closed or spam conversation is over,
   * so such a message (absent from the result) starts a new ticket.
   */
  async function threadInbound<K>(tx: Executor, tenantId: string, refs: Map<K, InboundRef>): Promise<Map<K, LockedTicket>> {
    const all = [...refs.entries()];
    const byMessageId = await store.ticketsByMessageIds(tx, tenantId, [...new Set(all.filter(([, r]) => r.email).flatMap(([, r]) => r.inReplyTo ?? []))]);
    const conversations = all.filter(([, r]) => !r.email && r.conversationKey).map(([, r]) => ({ source: r.source, key: r.conversationKey! }));
    const byConversation = await store.openConversationTickets(tx, tenantId, conversations, deps.threadWindowHours);

    const wanted = new Map<K, string>();
    for (const [k, r] of all) {
      let id: string | undefined;
      if (r.email) {
        // The rows come newest first.
        const cited = new Set(r.inReplyTo ?? []);
        id = byMessageId.find((row) => cited.has(row.message_id))?.ticket_id;
        if (!id && r.mailboxHash && isUuid(r.mailboxHash)) id = r.mailboxHash.toLowerCase();
      } else if (r.conversationKey) {
        id = byConversation.get(store.conversationId(r.source, r.conversationKey));
      }
      if (id) wanted.set(k, id);
    }
    const locked = new Map((await lockMany(tx, tenantId, [...new Set(wanted.values())])).map((r) => [r.id, r]));
    const live = async (id: string) => {
      let ticket = locked.get(id);
      for (let hops = 0; ticket && ticket.status === 'merged' && ticket.merged_into_id && hops < MAX_MERGE_HOPS; hops++) {
        const winner: string = ticket.merged_into_id;
        ticket = locked.get(winner) ?? (await lock(tx, tenantId, winner));
        locked.set(winner, ticket);
      }
      return ticket && !['closed', 'spam', 'merged'].includes(ticket.status) ? ticket : undefined;
    };
    const out = new Map<K, LockedTicket>();
    for (const [k, id] of wanted) {
      const ticket = await live(id);
      if (ticket) out.set(k, ticket);
    }
    return out;
  }

  /** Reopen's writes on a solved or closed ticket: status open, clock restarted, reopen + status events. */
  async function reopen(tx: Executor, tenantId: string, by: EventActor, t: LockedTicket): Promise<string> {
    // Only solved and closed reopen; a merged ticket is refused here too (it is neither).
    if (!REOPENABLE.includes(t.status)) throw refuse('reopen_not_allowed', `Only a solved or closed ticket can be reopened; this one is ${t.status}.`);
    const now = new Date();
    // A conversation erased by retention goes on: once solved again, the sweep erases what was added (issue 38).
    const fresh = await store.updateTicketDetail(tx, tenantId, t.id, { status: 'open', status_entered_at: now, reopened_at: now, content_erased_at: null, ...(await sla.restartedClock(tx, tenantId, t, now)) });
    const reopenEvent = eventFor(by, t.id, 'reopen', '', { from: t.status });
    await timeline(tx, tenantId, [reopenEvent, eventFor(by, t.id, 'status_changed', '', { from: t.status, to: 'open' })], freshly(fresh));
    return reopenEvent.id;
  }

  /**
   * Customers' inbound messages on locked tickets: the events, the tickets touched, the assignees told. `files`
   * binds files to the event about to be written (a web chat visitor's uploads), so the event shows them.
   */
  async function appendInbound(
    tx: Executor,
    tenantId: string,
    entries: { by: EventActor; ticket: LockedTicket; kind: string; body: string; meta: Record<string, unknown>; files?: (eventId: string) => Promise<AttachmentSummary[]> }[],
  ) {
    if (entries.length === 0) return [];
    for (const e of entries) refuseMerged(e.ticket);
    await store.touchTickets(tx, tenantId, [...new Set(entries.map((e) => e.ticket.id))]);
    // A customer writing after an agent's reply starts the next-reply clock (issue 37), unless one runs.
    await sla.startNextReplies(tx, tenantId, entries.map((e) => e.ticket), new Date());
    const events = entries.map((e) => eventFor(e.by, e.ticket.id, e.kind, e.body, e.meta));
    const attachments = await filesOf(events, (e, i) => entries[i]!.files?.(e.id));
    await timeline(tx, tenantId, events, attachments.size > 0 ? { attachments } : {});
    for (const e of entries) {
      if (e.ticket.assignee_id) {
        await notifications.notify(tx, tenantId, [e.ticket.assignee_id], null, { kind: 'reply_on_assigned', ticketId: e.ticket.id, body: e.ticket.subject });
      }
    }
    return events.map((e) => e.id);
  }

  /**
   * A reply or note on a locked ticket, with the notifications it causes. A reply on an email ticket is also
   * recorded for sending; `queued` tells the caller to `dispatch` it after commit. `files` binds the caller's
   * uploads to the event about to be written (it may refuse the write), so the event shows them from the start.
   */
  async function addMessage(
    tx: Executor,
    tenantId: string,
    by: EventActor,
    t: LockedTicket,
    kind: 'reply' | 'internal_note',
    body: string,
    template?: ReplyTemplate,
    files?: (eventId: string) => Promise<AttachmentSummary[]>,
  ) {
    refuseMerged(t);
    const firstResponse = kind === 'reply' && t.first_responded_at === null;
    // The outbox first: it may refuse the reply (nothing is written then), and its row names the event to come.
    const replyId = newId();
    // The uploads are bound first (the event's foreign key is deferred), so the outbox checks the channel's limits on
    // them; a refusal rolls all of it back.
    const attached = files ? await files(replyId) : [];
    const delivery = kind === 'reply' && outbound ? await outbound.record(tx, tenantId, t, replyId, { body, ...(template ? { template } : {}), ...(attached.length > 0 ? { attachments: attached } : {}) }) : undefined;
    if (template && !delivery) throw refuse('template_not_allowed', `A template reply is a WhatsApp feature; this ticket came in by ${t.source}.`);
    const at = new Date();
    // A reply meets the next-reply target that was running (issue 37); its breach mark stays until the next one starts.
    const nextReplyMet = kind === 'reply' && t.next_reply_due !== null ? { next_reply_due: null, next_reply_from: null } : {};
    const fresh = await store.updateTicketDetail(tx, tenantId, t.id, kind === 'reply' ? { last_agent_reply_at: at, ...(firstResponse ? { first_responded_at: at } : {}), ...nextReplyMet } : {});
    const meta = kind === 'reply' ? { first_response: firstResponse, ...(delivery ? { delivery: delivery.state, channel: delivery.channel } : {}), ...(template ? { template } : {}) } : {};
    const event = { ...eventFor(by, t.id, kind, body, meta), id: replyId };
    const deliveryEvent = delivery ? [eventFor(DELIVERY_ACTOR, t.id, 'delivery', delivery.detail, delivery.meta)] : [];
    await timeline(tx, tenantId, [event, ...deliveryEvent], { ...freshly(fresh), ...(attached.length > 0 ? { attachments: new Map([[replyId, attached]]) } : {}) });
    const queued = delivery?.dispatch === true;
    if (kind === 'reply' && t.assignee_id) {
      await notifications.notify(tx, tenantId, [t.assignee_id], by.actor_user_id, { kind: 'reply_on_assigned', ticketId: t.id, body: t.subject });
    }
    if (kind === 'internal_note') {
      await notifications.notify(tx, tenantId, mentionedIds(body), by.actor_user_id, { kind: 'mentioned', ticketId: t.id, body: t.subject });
    }
    return { eventId: event.id, queued };
  }

  /**
   * The one place ticket fields change: PATCH and macros both come here. Returns whether due times moved and
   * the id of the last event written (for triggers).
   */
  async function applyChanges(tx: Executor, tenantId: string, by: EventActor, t: LockedTicket, input: PatchTicketInput) {
    refuseMerged(t);
    await validateRefs(tx, tenantId, input);
    const update: store.TicketUpdate = {};
    const events: NewEvent[] = [];
    const changes: Record<string, { from: unknown; to: unknown }> = {};
    let restarted = false;

    if (input.status !== undefined && input.status !== t.status) {
      const to = input.status as TicketRow['status'];
      if (!canTransition(t.status, to)) {
        const allowed = legalNextStates(t.status);
        const hint = REOPENABLE.includes(t.status) && to === 'open' ? ' Use POST /v1/tickets/{ticket_id}/reopen.' : '';
        throw refuse('illegal_transition', `A ${t.status} ticket cannot move to ${to}; allowed: ${allowed.length ? allowed.join(', ') : 'none'}.${hint}`);
      }
      update.status = to;
      update.status_entered_at = new Date();
      if ((to === 'solved' || to === 'closed') && t.solved_at === null) update.solved_at = new Date();
      // Leaving spam after the ticket had been resolved (closed → spam → open) is a way back to work, so it
      // gets reopen's clock: otherwise the ticket would be open with its resolution already counted as met.
      if (t.status === 'spam' && t.solved_at !== null) {
        Object.assign(update, await sla.restartedClock(tx, tenantId, { ...t, priority: input.priority ?? t.priority }, new Date()));
        // As reopen: a conversation retention erased is live again, and due again once resolved (issue 38).
        update.content_erased_at = null;
        restarted = true;
      }
      events.push(eventFor(by, t.id, 'status_changed', '', { from: t.status, to }));
    }
    if (input.priority !== undefined && input.priority !== t.priority) {
      update.priority = input.priority;
      changes.priority = { from: t.priority, to: input.priority };
    }
    // The SLA clock (issue 37): a new priority moves the targets not yet met or breached; on a business-time policy
    // pending and on_hold stop the resolution clock and leaving them starts it again (a restart above covers both).
    if (!restarted && (update.status !== undefined || update.priority !== undefined)) {
      Object.assign(update, await sla.afterChange(tx, tenantId, t, { status: update.status ?? t.status, priority: update.priority ?? t.priority }, new Date()));
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
    const fresh = Object.keys(update).length > 0 ? await store.updateTicketDetail(tx, tenantId, t.id, update) : undefined;
    await timeline(tx, tenantId, events, freshly(fresh));
    return { lastEventId: events.at(-1)?.id };
  }

  /** Round robin's write: team and assignee set, one `assigned` event, the assignee notified. */
  async function assign(tx: Executor, tenantId: string, by: EventActor, t: LockedTicket, teamId: string, userId: string, meta: Record<string, unknown>) {
    refuseMerged(t);
    const fresh = await store.updateTicketDetail(tx, tenantId, t.id, { team_id: teamId, assignee_id: userId });
    const event = eventFor(by, t.id, 'assigned', '', { team_id: teamId, assignee_id: userId, from_assignee_id: t.assignee_id, ...meta });
    await timeline(tx, tenantId, [event], freshly(fresh));
    await notifications.notify(tx, tenantId, [userId], by.actor_user_id, { kind: 'assigned', ticketId: t.id, body: t.subject, meta: { team_id: teamId } });
    return event.id;
  }

  /**
   * Events about a ticket that change none of its fields (deliveries, macro bookkeeping), by the system or a
   * person. The timeline is part of what the ticket reads as, so its version (ETag) moves on.
   */
  async function recordEvents(tx: Executor, tenantId: string, events: NewEvent[]) {
    await timeline(tx, tenantId, events);
    await store.bumpVersions(tx, tenantId, [...new Set(events.map((e) => e.ticket_id))]);
  }

  /**
   * After commit: triggered macros for the event (never for system changes). A due time a write moved needs
   * nothing here: the SLA sweep reads the due times themselves.
   */
  async function afterCommit(tenantId: string, ticketId: string, o: { trigger?: { event: TicketTrigger; eventId: string }; memo?: Map<string, boolean> }) {
    if (o.trigger) {
      try {
        await triggers.publish(tenantId, ticketId, o.trigger.event, o.trigger.eventId, o.memo);
      } catch (err) {
        logger.warn({ ticket_id: ticketId, err: (err as Error).message }, 'macro trigger not enqueued');
      }
    }
  }

  /**
   * `afterCommit` for a request: its caller gets the answer without waiting for the trigger lookup (the write
   * is committed; the enqueue is best effort). Awaited where there is no `later` (workers run it inside their job).
   */
  async function afterAnswer(tenantId: string, ticketId: string, o: Parameters<typeof afterCommit>[2]) {
    if (!deps.later) return afterCommit(tenantId, ticketId, o);
    deps.later.run('ticket after-commit', () => afterCommit(tenantId, ticketId, o));
  }

  return {
    userActor,
    lock,
    lockForChange,
    lockMany,
    validateRefs,
    open: openTickets,
    threadInbound,
    /** Message-IDs an email reached, so replies citing them thread into the ticket. */
    rememberMessageIds: (tx: Executor, tenantId: string, pairs: { message_id: string; ticket_id: string }[]) => store.rememberMessageIds(tx, tenantId, pairs),
    reopen,
    appendInbound,
    addMessage,
    applyChanges,
    assign,
    recordEvents,
    /** Something the ticket's read shows changed elsewhere (work logged on it): its version moves on. */
    bumpVersion: (tx: Executor, tenantId: string, id: string) => store.bumpVersions(tx, tenantId, [id]),
    /** Whether one ticket passes a filter set, with exactly the list's semantics (macro trigger conditions). */
    matches: (tx: Executor, tenantId: string, ticketId: string, f: TicketFilters) => store.matchesFilters(tx, tenantId, ticketId, f),
    afterCommit,
    afterAnswer,
  };
}

export type TicketCommands = ReturnType<typeof createTicketCommands>;
