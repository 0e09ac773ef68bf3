import { defineOperation } from '../../define-operation';
import { sse } from '../../http/sse';
import { encodeCursor } from '../../lib/paging';
import { EXAMPLE_TICKET } from '../tickets/schemas';
import { EVENT_CURSOR_SORT, event, eventLog, eventLogQuery, eventParams, eventStreamQuery } from './schemas';

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
      'Every event the workspace\'s changes emitted, oldest first in the order they committed: an event never appears before one that committed earlier, so following `next_cursor` misses nothing. A page holds at most `limit` events and at most 4 MiB of them (always at least one); `has_more` says when more are there now. Events are kept EVENT_RETENTION_DAYS. `transcript.event_recorded` carries `integration_id` (the secret of the provider\'s webhook URL) only for callers who may manage integrations (admin, with admin-resources:read).',
    access: { floor: 'viewer', tag: 'events', action: 'read' },
    query: eventLogQuery,
    response: { status: 200, description: 'A page of events', schema: eventLog },
    example: { response: { events: [EXAMPLE_EVENT], next_cursor: encodeCursor({ sort: EVENT_CURSOR_SORT, key: '0', id: EXAMPLE_EVENT.id }), has_more: false } },
    handler: async ({ principal, query }, s) => ({ body: await s.events.list(principal, query) }),
  }),
  defineOperation({
    id: 'stream_events',
    method: 'get',
    path: '/v1/events/stream',
    summary: 'The event log, live (Server-Sent Events)',
    description:
      'The log tailed as it commits, as Server-Sent Events: each event as `id: <event id>`, `event: <type>`, `data: <the event JSON>`. An event larger than EVENT_STREAM_MAX_EVENT_BYTES (64 KiB) comes as a reference instead of its `data`: `{id, type, occurred_at, tenant_id, data_ref: {url, bytes}}`; GET `data_ref.url` (GET /v1/events/{event_id}) reads it whole. A client that reconnects with `Last-Event-ID` (EventSource does so by itself) resumes right after that event, with no gap and no repeat, whichever API process it reaches. Without it, the stream starts after `after` (a cursor of GET /v1/events) or from the oldest event kept. Idle streams send a comment every EVENT_STREAM_HEARTBEAT_SECONDS. The stream ends (and the client resumes with Last-Event-ID) when: the client reads nothing for EVENT_STREAM_STALL_SECONDS while events wait for it; its credential is revoked, expires, or its member is removed (checked before every delivery and every EVENT_STREAM_RECHECK_SECONDS); or its API process shuts down. Open streams are capped per API key or user (EVENT_STREAMS_PER_CALLER), per workspace (EVENT_STREAMS_PER_WORKSPACE) and per API process (EVENT_STREAMS_PER_PROCESS): past a cap, 429 too_many_streams with Retry-After.',
    access: { floor: 'viewer', tag: 'events', action: 'read' },
    query: eventStreamQuery,
    eventStream: true,
    response: { status: 200, description: 'An endless text/event-stream of events' },
    errors: ['too_many_streams'],
    handler: async ({ principal, query, lastEventId, reauthorize }, s) => ({ stream: sse(await s.events.openStream(principal, query, lastEventId, reauthorize!)) }),
  }),
  defineOperation({
    id: 'get_event',
    method: 'get',
    path: '/v1/events/{event_id}',
    summary: 'One event of the log, whole',
    description: 'The event as GET /v1/events lists it: where a stream\'s reference to an event too large for a frame points. 404 once the event has left the log (EVENT_RETENTION_DAYS).',
    access: { floor: 'viewer', tag: 'events', action: 'read' },
    params: eventParams,
    response: { status: 200, description: 'The event', schema: event },
    example: { response: EXAMPLE_EVENT },
    handler: async ({ principal, params }, s) => ({ body: await s.events.get(principal, params.event_id) }),
  }),
];
