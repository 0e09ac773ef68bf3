import type { Logger } from 'pino';
import type { AfterAnswer } from '../../lib/after-answer';
import type { ReadRouting } from '../../db/reads';
import type { Db, Executor } from '../../db';
import type { NewTicketEvent } from '../../db/types';
import { notFound, refuse, requireVersion, ticketMerged, type VersionCondition } from '../../lib/errors';
import { newId } from '../../lib/ids';
import type { QueueHub } from '../../queue/hub';
import type { CustomerService } from '../customers/service';
import type { Principal } from '../identity/principal';
import type { NotificationService } from '../notifications/service';
import { createTicketCommands, eventFor, type OutboundSink, type ReplyTemplate, type TriggerSink } from './commands';
import { createTicketQueries, presentEvent } from './queries';
import { appendToTimeline, writtenIn, type TimelineWatcher } from './timeline';
import type { EventSink } from '../events/types';
import type { CreateTicketInput, ListTicketsQuery, PatchTicketInput } from './schemas';
import { createTicketSla } from './sla';
import * as store from './store';
import type { AttachmentBinder } from '../files/types';
import type { TicketSearch } from '../search/engine';

/** The later of two times, either of which may be missing. */
const latest = (a: Date | null, b: Date | null) => (a && b ? (a > b ? a : b) : (a ?? b));

/**
 * The tickets' own use cases (the operations of the tickets routes), each one transaction over the commands,
 * answered with the ticket as its read shows it. Other domains use `commands` (narrowed to what they call).
 */
export function createTicketService(deps: {
  db: Db;
  /** Where list reads go (a replica when configured and the caller may use it). */
  reads?: Pick<ReadRouting, 'forReading'>;
  customers: CustomerService;
  notifications: NotificationService;
  queues: QueueHub;
  logger: Logger;
  triggers: TriggerSink;
  outbound?: OutboundSink;
  /** Where outbound events go (issue 19); without it the timeline emits none. */
  events?: EventSink;
  /** Told about every event the timeline appends (the reports journal their facts in the same transaction: issue 37). */
  reports?: TimelineWatcher;
  threadWindowHours: number;
  later?: AfterAnswer;
  /** Rendered timelines kept for GET, in bytes (0 or absent: none). */
  timelineCacheBytes?: number;
  /** Binds agents' uploads to replies and notes (issue 34); without it a write naming attachments is refused. */
  attachments?: AttachmentBinder;
  /** Where `q` on the list goes (issue 36), and the limits a query is parsed under. */
  search: TicketSearch;
}) {
  const { db, customers, notifications } = deps;
  const queries = createTicketQueries(deps);
  /**
   * A write's answer (PATCH, reply, note): the ticket as it now stands and the events this transaction appended
   * to it. Its cost does not depend on the timeline's length: the timeline is not read.
   */
  async function answerOf(tx: Executor, tenantId: string, id: string) {
    // What this transaction's timeline wrote (kept by the timeline module, per transaction).
    const w = writtenIn(tx);
    const fresh = w?.fresh.get(id);
    const ticket = (await queries.manyWithoutTimeline(tx, tenantId, [id], fresh ? [fresh] : [])).get(id);
    if (!ticket) throw notFound('ticket');
    return { ...ticket, new_events: (w?.rows ?? []).filter((r) => r.ticket_id === id).map((r) => presentEvent(r, w?.files.get(r.id))) };
  }
  // Both write the timeline through `timeline.ts` themselves, given the events sink; nothing of this service's flows down.
  const sla = createTicketSla(deps);
  const commands = createTicketCommands({ ...deps, sla });

  async function message(actor: Principal, id: string, kind: 'reply' | 'internal_note', body: string, template?: ReplyTemplate, tokens: string[] = []) {
    const { view, sent } = await db.transaction().execute(async (tx) => {
      const t = await commands.lockForChange(tx, actor.tenantId, id);
      // The caller's uploads are bound to the event about to be written, or the write is refused (issue 34).
      const files =
        tokens.length > 0
          ? (eventId: string) => {
              if (!deps.attachments) throw refuse('upload_token_invalid', 'This service takes no attachments.');
              return deps.attachments.bindUploads(tx, actor, tokens, { ticketId: t.id, eventId, internal: kind === 'internal_note' });
            }
          : undefined;
      const sent = await commands.addMessage(tx, actor.tenantId, await commands.userActor(tx, actor), t, kind, body, template, files);
      return { view: await answerOf(tx, actor.tenantId, id), sent };
    });
    if (sent.queued) await deps.outbound!.dispatch(actor.tenantId, sent.eventId);
    return view;
  }

  return {
    commands,
    queries,
    checkSla: sla.check,
    sweepSla: sla.sweepAllTenants,
    /** The schedules.recompute job (issue 37): open tickets' due times after their schedule changed. */
    recomputeSchedule: sla.recomputeSchedule,
    /** GET's read: the timeline as JSON bytes, rendered once per version (see `queries.rendered`). */
    rendered: (actor: Principal, id: string) => queries.rendered(actor.tenantId, id),
    /**
     * A write's answer read again (an idempotent replay of an answer too large to keep): the ticket as it now
     * stands, and the events that write appended.
     */
    async writeAnswerAgain(actor: Principal, id: string, eventIds: string[]) {
      const { version: _etag, ...ticket } = await queries.withoutTimeline(db, actor.tenantId, id);
      return { ...ticket, new_events: (await store.eventsByIds(db, actor.tenantId, id, eventIds)).map((e) => presentEvent(e)) };
    },
    list: async (actor: Principal, query: ListTicketsQuery) => queries.list(actor.tenantId, query, actor, deps.reads ? await deps.reads.forReading(actor) : db),

    async create(actor: Principal, input: CreateTicketInput) {
      const created = await db.transaction().execute(async (tx) => {
        await commands.validateRefs(tx, actor.tenantId, input);
        let customerId = input.customer_id;
        if (customerId) {
          if (!(await customers.exists(tx, actor.tenantId, customerId))) throw refuse('customer_unknown', 'No such customer in this workspace.', [{ path: 'body.customer_id', message: 'unknown customer' }]);
        } else {
          customerId = (await customers.findOrCreateByEmail(tx, actor.tenantId, input.customer_email!)).id;
        }
        const [opened] = await commands.open(tx, actor.tenantId, [
          {
            by: await commands.userActor(tx, actor),
            fields: {
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
            },
            kind: 'ticket_created',
          },
        ]);
        const { row, eventId } = opened!;
        if (row.assignee_id) {
          await notifications.notify(tx, actor.tenantId, [row.assignee_id], actor.userId, { kind: 'assigned', ticketId: row.id, body: row.subject });
        }
        return { ...row, createdEventId: eventId };
      });
      await commands.afterAnswer(actor.tenantId, created.id, { trigger: { event: 'ticket.created', eventId: created.createdEventId } });
      return queries.detail(actor.tenantId, created.id);
    },

    async patch(actor: Principal, id: string, input: PatchTicketInput, ifMatch?: VersionCondition) {
      const { result, applied } = await db.transaction().execute(async (tx) => {
        const t = await commands.lockForChange(tx, actor.tenantId, id);
        // No lost updates: a change made on a stale read is refused with nothing written.
        requireVersion(ifMatch, 'ticket', t.version);
        const applied = await commands.applyChanges(tx, actor.tenantId, await commands.userActor(tx, actor), t, input);
        return { result: await answerOf(tx, actor.tenantId, id), applied };
      });
      await commands.afterAnswer(actor.tenantId, id, {
        trigger: applied.lastEventId ? { event: 'ticket.updated', eventId: applied.lastEventId } : undefined,
      });
      return result;
    },

    reply: (actor: Principal, id: string, body: string, template?: ReplyTemplate, attachments?: string[]) => message(actor, id, 'reply', body, template, attachments),
    note: (actor: Principal, id: string, body: string, attachments?: string[]) => message(actor, id, 'internal_note', body, undefined, attachments),

    async reopen(actor: Principal, id: string) {
      const result = await db.transaction().execute(async (tx) => {
        const t = await commands.lock(tx, actor.tenantId, id);
        const eventId = await commands.reopen(tx, actor.tenantId, await commands.userActor(tx, actor), t);
        return { detail: await queries.detailIn(tx, actor.tenantId, id), eventId };
      });
      await commands.afterAnswer(actor.tenantId, id, { trigger: { event: 'ticket.reopened', eventId: result.eventId } });
      return result.detail;
    },

    async merge(actor: Principal, sourceId: string, targetId: string) {
      if (sourceId === targetId) throw refuse('merge_self', 'A ticket cannot be merged into itself.');
      return db.transaction().execute(async (tx) => {
        const locked = await commands.lockMany(tx, actor.tenantId, [sourceId, targetId]);
        const source = locked.find((t) => t.id === sourceId);
        const target = locked.find((t) => t.id === targetId);
        if (!source) throw notFound('ticket');
        if (!target) throw notFound('target ticket');
        if (source.status === 'merged') throw ticketMerged(sourceId);
        if (target.status === 'merged') throw ticketMerged(targetId);

        // The winner's timeline is complete: every source event, with its time and actor, marked via_merge.
        const sourceEvents = await store.listEvents(tx, actor.tenantId, sourceId);
        const copies: Omit<NewTicketEvent, 'tenant_id'>[] = sourceEvents.map((e) => ({
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
        // Merging keeps the files: they follow their events' copies to the winner (issue 34).
        await deps.attachments?.followMerge(tx, actor.tenantId, { sourceTicketId: sourceId, targetTicketId: targetId }, sourceEvents.map((e, i) => ({ from: e.id, to: copies[i]!.id! })));
        await store.updateTicket(tx, actor.tenantId, sourceId, { status: 'merged', merged_into_id: targetId, status_entered_at: new Date() });
        // The winner's conversation now holds the loser's messages: its latest customer message and reply are the later of the two.
        await store.updateTicket(tx, actor.tenantId, targetId, {
          last_customer_message_at: latest(source.last_customer_message_at, target.last_customer_message_at),
          last_agent_reply_at: latest(source.last_agent_reply_at, target.last_agent_reply_at),
        });
        const by = await commands.userActor(tx, actor);
        await appendToTimeline(deps, tx, actor.tenantId, [
          eventFor(by, sourceId, 'merged', '', { merged_into: targetId, from_status: source.status }),
          eventFor(by, targetId, 'merged', '', { merged_from: sourceId, events_copied: copies.length }),
        ]);
        return queries.detailIn(tx, actor.tenantId, sourceId);
      });
    },
  };
}

export type TicketService = ReturnType<typeof createTicketService>;
