/**
 * The outbound event types (issue 19), the contract integrations subscribe to. Each is emitted in the
 * transaction of the change that causes it (src/db/migrations/0023_outbound_events.ts).
 */
export const EVENT_TYPES = [
  'ticket.created',
  'ticket.updated',
  'ticket.status_changed',
  'ticket.assigned',
  'ticket.merged',
  'ticket.reopened',
  'ticket.sla_breached',
  /** A time rule fired on the ticket (issue 37): `event.meta` names the rule and what it counted from. */
  'ticket.rule_fired',
  'message.created',
  'message.delivered',
  'message.delivery_failed',
  'customer.created',
  /** A customer's profile or handles changed (issue 38): `data` is the customer as it now stands. */
  'customer.updated',
  /** A customer was merged into another (issue 38): `data.id` is gone, `data.merged_into_id` holds its handles and tickets. */
  'customer.merged',
  /** A person was erased (issue 38): `data` names only the customer's id and when; none of the erased data. */
  'customer.erased',
  /** One message's text was removed (issue 38): `data` names the ticket and the event, not the text. */
  'message.redacted',
  'csat.created',
  'transcript.event_recorded',
  'mailbox.health_changed',
  /** A workspace's files reached FILES_WORKSPACE_QUOTA_BYTES and a file was refused (once until usage falls back; issue 34). */
  'files.quota_reached',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** One event as a domain emits it: what happened, the ticket it is about (for ordering), and its data. */
export interface NewOutboundEvent {
  type: EventType;
  ticketId?: string;
  data: Record<string, unknown>;
}

/** What emits events: the events service, handed to the domains whose changes cause them. */
export interface EventSink {
  emit(tx: import('../../db').Executor, tenantId: string, events: NewOutboundEvent[]): Promise<void>;
}
