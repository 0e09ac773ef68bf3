import { z } from 'zod';
import { boolParam, intParam } from '../../lib/params';
import { afterParam, pageSchema } from '../../lib/paging';

/** A user's notifications read in one order, newest first (its cursor names it). */
export const NOTIFICATION_SORT = '-created_at';

export const notification = z.object({
  id: z.uuid().meta({ examples: ['6f1c9b2e-4d3a-4e8f-9a7b-2c5d8e1f0a34'] }),
  kind: z.string().meta({ examples: ['assigned'] }),
  ticket_id: z.uuid().nullable(),
  body: z.string().meta({ examples: ['Invoice #10482 was charged twice'] }),
  meta: z.record(z.string(), z.unknown()).meta({ examples: [{ team_id: '810007d0-bec5-486c-b5d1-28fcd8a079ba' }] }),
  read_at: z.string().nullable().meta({ examples: [null] }),
  created_at: z.string().meta({ examples: ['2025-03-14T09:30:53.412Z'] }),
}).meta({ id: 'Notification' });

export const listNotificationsQuery = z.strictObject({
  unread_only: boolParam.default(false),
  limit: intParam(1, 500).default(50).meta({ examples: [20] }),
  after: afterParam({ [NOTIFICATION_SORT]: 'timestamp' }).optional(),
});

export const notificationList = pageSchema('notifications', notification);

export const markReadBody = z
  .strictObject({
    ids: z.array(z.uuid()).min(1).max(1000).optional(),
    all: z.literal(true).optional(),
  })
  .refine((b) => (b.ids === undefined) !== (b.all === undefined), { message: 'send either ids or all: true, not both and not neither' });

export const markReadResult = z.object({ updated: z.number().int() });
