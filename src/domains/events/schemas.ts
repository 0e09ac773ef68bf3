import { z } from 'zod';
import { intParam } from '../../lib/params';
import { afterParam, listParam, pageSchema } from '../../lib/paging';
import { EVENT_TYPES } from './types';

/** The log reads in one order, commit order. Cursors given out before issue 32 name it and carry a log position. */
export const EVENT_LOG_SORT = 'position';
/**
 * Cursors given out now: the same order, resumed after an event named by its id. The position is a sequence
 * shared by every workspace, so a cursor that carried it let a workspace count everyone's events.
 */
export const EVENT_CURSOR_SORT = 'event';

const eventType = z.enum(EVENT_TYPES);

export const event = z
  .object({
    id: z.uuid().meta({ examples: ['0b7f3c1e-5d2a-4c8e-9f61-3a4b5c6d7e8f'] }),
    type: eventType.meta({ examples: ['ticket.status_changed'] }),
    occurred_at: z.string().meta({ examples: ['2025-03-14T09:41:53.412Z'] }),
    tenant_id: z.uuid(),
    data: z.record(z.string(), z.unknown()).meta({
      description: 'The resource as its read operation shows it. Ticket events and message.created: `{ticket, event}`, the ticket without its timeline and the timeline event that caused this one.',
    }),
  })
  .meta({ id: 'Event' });

export const eventLogQuery = z.strictObject({
  limit: intParam(1, 500).default(100),
  after: afterParam({ [EVENT_CURSOR_SORT]: 'sequence', [EVENT_LOG_SORT]: 'sequence' }).optional(),
  types: listParam(eventType, EVENT_TYPES.length).optional().meta({ examples: ['ticket.created,message.created'] }),
});
export type EventLogQuery = z.output<typeof eventLogQuery>;

/** The stream takes the log's filters and starting point; `Last-Event-ID` (a reconnect) wins over `after`. */
export const eventStreamQuery = eventLogQuery.omit({ limit: true });
export type EventStreamQuery = z.output<typeof eventStreamQuery>;

/** The list envelope plus `has_more`: a log is tailed, so its `next_cursor` is a resume point even at the end. */
export const eventLog = pageSchema('events', event).extend({
  next_cursor: z.string().nullable().meta({ description: 'Where to resume: pass it as `after`, now for the next page or later for what commits meanwhile. Null only for an empty log read from its start.' }),
  has_more: z.boolean().meta({ description: 'Whether more events are there now (keep paging) or this page reached the end of what has committed.' }),
});

export const eventParams = z.object({ event_id: z.uuid() });

