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
