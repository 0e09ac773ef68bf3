import { defineOperation } from '../../define-operation';
import { encodeCursor } from '../../lib/paging';
import { EXAMPLE_TICKET } from '../tickets/schemas';
import { EVENT_LOG_SORT, eventLog, eventLogQuery, eventStreamQuery } from './schemas';

const { events: timeline, ...exampleTicket } = EXAMPLE_TICKET;
const EXAMPLE_EVENT = {
  id: '0b7f3c1e-5d2a-4c8e-9f61-3a4b5c6d7e8f',
  type: 'message.created',
  occurred_at: timeline[2]!.created_at,
  tenant_id: '6f8e2a41-93c5-4b7d-a0e2-5c1d9b3f7a62',
  data: { ticket: exampleTicket, event: timeline[2]!, message_kind: 'reply' },
};

export const eventOperations = [
  defineOperation({
    id: 'list_events',
    method: 'get',
    path: '/v1/events',
    summary: 'The workspace\'s event log in commit order',
    description:
      'Every event the workspace\'s changes emitted, oldest first in the order they committed: an event never appears before one that committed earlier, so following `next_cursor` misses nothing. Events are kept EVENT_RETENTION_DAYS.',
    access: { floor: 'viewer', tag: 'events', action: 'read' },
    query: eventLogQuery,
    response: { status: 200, description: 'A page of events', schema: eventLog },
    example: { response: { events: [EXAMPLE_EVENT], next_cursor: encodeCursor({ sort: EVENT_LOG_SORT, key: '48213', id: EXAMPLE_EVENT.id }), has_more: false } },
    handler: async ({ principal, query }, s) => ({ body: await s.events.list(principal, query) }),
  }),
  defineOperation({
    id: 'stream_events',
    method: 'get',
    path: '/v1/events/stream',
    summary: 'The event log, live (Server-Sent Events)',
    description:
      'The log tailed as it commits, as Server-Sent Events: each event as `id: <event id>`, `event: <type>`, `data: <the event JSON>`. A client that reconnects with `Last-Event-ID` (EventSource does so by itself) resumes right after that event, with no gap and no repeat, whichever API process it reaches. Without it, the stream starts after `after` (a cursor of GET /v1/events) or from the oldest event kept. Idle streams send a comment every EVENT_STREAM_HEARTBEAT_SECONDS; an API process shutting down ends its streams, and clients reconnect.',
    access: { floor: 'viewer', tag: 'events', action: 'read' },
    query: eventStreamQuery,
    eventStream: true,
    response: { status: 200, description: 'An endless text/event-stream of events' },
    handler: async ({ principal, query, lastEventId }, s) => ({ stream: await s.events.openStream(principal, query, lastEventId) }),
  }),
];
