import type { Executor } from '../../db';
import type { NewTicketEvent, TicketEventRow } from '../../db/types';
import type { EventSink, EventType, NewOutboundEvent } from '../events/types';
import { presentEvent } from './queries';
import * as store from './store';
import type { TicketDetailRow } from './store';
import type { AttachmentSummary } from '../files/types';

type NewEvent = Omit<NewTicketEvent, 'tenant_id'>;

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
    case 'delivery': {
      // A reply's delivery says so when it reaches the customer or fails for good; its other moves do not.
      const state = (e.meta as { state?: unknown }).state;
      return state === 'delivered' ? ['message.delivered'] : state === 'failed' ? ['message.delivery_failed'] : [];
    }
    default:
      return [...message];
  }
}

/**
 * The one way a ticket's timeline grows: the events are written and, in the same transaction, the outbound
 * events they are (issue 19). Each carries the ticket as its read shows it after the change, without the
 * timeline, and the timeline event that caused it. Callers write the ticket's row first, then the timeline.
 */
export function createTicketTimeline(deps: {
  events?: EventSink;
  /**
   * The tickets as their reads show them without the timeline, read together (an ingest batch touches dozens);
   * `fresh` holds detail rows the caller's UPDATE already returned, which need no read.
   */
  present: (exec: Executor, tenantId: string, ids: string[], fresh: TicketDetailRow[]) => Promise<Map<string, Record<string, unknown>>>;
}) {
  /** Returns the rows written. */
  /** `attachments`: the files bound to some of these events in this transaction (issue 34), shown on them. */
  return async function write(
    tx: Executor,
    tenantId: string,
    events: NewEvent[],
    opts: { opened?: boolean; fresh?: TicketDetailRow[]; attachments?: Map<string, AttachmentSummary[]> } = {},
  ): Promise<TicketEventRow[]> {
    const rows = await store.insertEvents(tx, tenantId, events);
    if (!deps.events || rows.length === 0) return rows;
    const emitting = rows.map((row) => ({ row, types: outboundTypes(row, opts.opened === true) })).filter((e) => e.types.length > 0);
    if (emitting.length === 0) return rows;
    const tickets = await deps.present(tx, tenantId, [...new Set(emitting.map((e) => e.row.ticket_id))], opts.fresh ?? []);
    const out: NewOutboundEvent[] = [];
    for (const { row, types } of emitting) {
      const ticket = tickets.get(row.ticket_id)!;
      const kind = messageKind(row.kind);
      for (const type of types) {
        out.push({ type, ticketId: row.ticket_id, data: { ticket, event: presentEvent(row, opts.attachments?.get(row.id)), ...(type === 'message.created' && kind ? { message_kind: kind } : {}) } });
      }
    }
    await deps.events.emit(tx, tenantId, out);
    return rows;
  };
}

export type TicketTimeline = ReturnType<typeof createTicketTimeline>;
