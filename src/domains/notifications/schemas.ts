import { z } from 'zod';
import { intParam } from '../../http/params';

export const notification = z.object({
  id: z.uuid(),
  kind: z.string(),
  ticket_id: z.uuid().nullable(),
  body: z.string(),
  meta: z.record(z.string(), z.unknown()),
  read_at: z.string().nullable(),
  created_at: z.string(),
});

export const listNotificationsQuery = z.strictObject({
  unread_only: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
  limit: intParam(1, 500).default(50),
  offset: intParam(0, 2147483647).default(0),
});

export const notificationList = z.object({ notifications: z.array(notification) });

export const markReadBody = z
  .strictObject({
    ids: z.array(z.uuid()).min(1).max(1000).optional(),
    all: z.literal(true).optional(),
  })
  .refine((b) => (b.ids === undefined) !== (b.all === undefined), { message: 'send either ids or all: true, not both and not neither' });

export const markReadResult = z.object({ updated: z.number().int() });
