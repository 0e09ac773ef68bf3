import type { Executor } from '../../db';
import type { NewTicketEvent, TicketEventRow } from '../../db/types';
import type { EventSink, EventType, NewOutboundEvent } from '../events/types';
import { presentEvent, ticketsWithoutTimeline } from './queries';
import * as store from './store';
import type { TicketDetailRow } from './store';
import type { AttachmentSummary } from '../files/types';

/**
 * The one way a ticket's timeline grows (issue 35): a plain module under `commands.ts` and `sla.ts`, which import
 * it directly. It used to be a closure the tickets service built (with a `present` closure over its queries) and
 * injected downwards, so every write from ingest, macros, teams or the mailbox climbed back up into the service.
 * Now the dependencies run one way, service → commands / sla → timeline → queries / store, and what the timeline
 * needs besides the transaction (where outbound events go) is passed in by the caller.
 */

type NewEvent = Omit<NewTicketEvent, 'tenant_id'>;

/** Where a timeline's outbound events go (issue 19); without a sink none are emitted. */
export interface TimelineSink {
  events?: EventSink | undefined;
  /** Told about the rows appended, in the appending transaction (the reports journal their facts: issue 37). */
  reports?: TimelineWatcher | undefined;
}

/**
 * Watches the timeline grow: `appended` runs after the rows are inserted, in their transaction, with the ticket's row
 * already written and locked by the command that wrote them.
 */
export interface TimelineWatcher {
  appended(tx: Executor, tenantId: string, rows: readonly TicketEventRow[]): Promise<void>;
}

/** How a message event reads in `message.created` (the three kinds). */
const messageKind = (kind: string): 'inbound' | 'reply' | 'note' | undefined =>
  kind === 'reply' ? 'reply' : kind === 'internal_note' ? 'note' : kind.startsWith('inbound_') ? 'inbound' : undefined;

/**
 * Which outbound events one timeline event is. One specific type per change: a status change is
 * `ticket.status_changed` (not also `ticket.updated`), a field change `ticket.updated`, plus
 * `ticket.assigned` when the assignee is among the fields. Bookkeeping (deliveries, macro runs) emits nothing.
 */
function outboundTypes(e: TicketEventRow, opened: boolean): EventType[] {
  const message = messageKind(e.kind) ? (['message.created'] as const) : [];
  if (opened) return ['ticket.created', ...message];
  switch (e.kind) {
    case 'status_changed':
      return ['ticket.status_changed'];
    case 'fields_changed':
      return (e.meta as { changes?: Record<string, unknown> }).changes?.assignee_id !== undefined ? ['ticket.updated', 'ticket.assigned'] : ['ticket.updated'];
    case 'assigned':
      return ['ticket.assigned'];
    case 'merged':
      return ['ticket.merged'];
    case 'reopen':
      return ['ticket.reopened'];
    case 'sla_breached':
      return ['ticket.sla_breached'];
    // A time rule fired (issue 37): its own event, beside the events of the changes its actions made.
    case 'rule_fired':
      return ['ticket.rule_fired'];
    case 'delivery': {
      // A reply's delivery says so when it reaches the customer or fails for good; its other moves do not.
      const state = (e.meta as { state?: unknown }).state;
      return state === 'delivered' ? ['message.delivered'] : state === 'failed' ? ['message.delivery_failed'] : [];
    }
    default:
      return [...message];
  }
}

/** What one transaction's timeline wrote: the event rows, the detail rows the UPDATEs before them returned, the files bound. */
export interface WrittenInTransaction {
  rows: TicketEventRow[];
  fresh: Map<string, TicketDetailRow>;
  files: Map<string, AttachmentSummary[]>;
}

/**
 * Kept per transaction, keyed by it (a WeakMap: the record goes with the transaction object). A write's answer
 * (PATCH, reply, note) is exactly what its transaction appended, so the answer reads neither the ticket nor its
 * timeline. This is the one piece of state the timeline holds, and it belongs to the transaction, not to any
 * service instance: whoever wrote in `tx` (a command, the SLA check, a merge) is recorded the same way.
 */
const written = new WeakMap<Executor, WrittenInTransaction>();

/** What `tx`'s timeline writes have appended so far (undefined: nothing yet). */
export const writtenIn = (tx: Executor): WrittenInTransaction | undefined => written.get(tx);

export interface TimelineOptions {
  /** The events open new tickets: each emits `ticket.created` (and `message.created` for a message). */
  opened?: boolean;
  /** Detail rows the caller's UPDATE already returned; the outbound events present those tickets without a read. */
  fresh?: TicketDetailRow[];
  /** The files bound to some of these events in this transaction (issue 34), shown on them. */
  attachments?: Map<string, AttachmentSummary[]>;
}

/**
 * Appends events to tickets' timelines and, in the same transaction, the outbound events they are (issue 19).
 * Each outbound event carries the ticket as its read shows it after the change, without the timeline (the
 * version, the ETag, left out), and the timeline event that caused it. Callers write the ticket's row first,
 * then the timeline. Returns the rows written.
 */
export async function appendToTimeline(sink: TimelineSink, tx: Executor, tenantId: string, events: NewEvent[], opts: TimelineOptions = {}): Promise<TicketEventRow[]> {
  const rows = await emitting(sink, tx, tenantId, events, opts);
  if (sink.reports && rows.length > 0) await sink.reports.appended(tx, tenantId, rows);
  let w = written.get(tx);
  if (!w) written.set(tx, (w = { rows: [], fresh: new Map(), files: new Map() }));
  w.rows.push(...rows);
  for (const t of opts.fresh ?? []) w.fresh.set(t.id, t);
  for (const [eventId, files] of opts.attachments ?? []) w.files.set(eventId, files);
  return rows;
}

async function emitting(sink: TimelineSink, tx: Executor, tenantId: string, events: NewEvent[], opts: TimelineOptions): Promise<TicketEventRow[]> {
  const rows = await store.insertEvents(tx, tenantId, events);
  if (!sink.events || rows.length === 0) return rows;
  const out = rows.map((row) => ({ row, types: outboundTypes(row, opts.opened === true) })).filter((e) => e.types.length > 0);
  if (out.length === 0) return rows;
  // The tickets read together (an ingest batch touches dozens); those in `fresh` are not read again.
  const read = await ticketsWithoutTimeline(tx, tenantId, [...new Set(out.map((e) => e.row.ticket_id))], opts.fresh ?? []);
  // The version is the ETag, not a field of the ticket.
  const tickets = new Map([...read].map(([id, { version: _etag, ...ticket }]) => [id, ticket]));
  const emitted: NewOutboundEvent[] = [];
  for (const { row, types } of out) {
    const ticket = tickets.get(row.ticket_id)!;
    const kind = messageKind(row.kind);
    for (const type of types) {
      emitted.push({ type, ticketId: row.ticket_id, data: { ticket, event: presentEvent(row, opts.attachments?.get(row.id)), ...(type === 'message.created' && kind ? { message_kind: kind } : {}) } });
    }
  }
  await sink.events.emit(tx, tenantId, emitted);
  return rows;
}
