import { defineOperation } from '../../http/operation';
import { listNotificationsQuery, markReadBody, markReadResult, notificationList } from './schemas';

export const notificationOperations = [
  defineOperation({
    id: 'list_notifications',
    method: 'get',
    path: '/v1/notifications',
    summary: 'The calling user\'s notifications, newest first',
    access: { floor: 'viewer', tag: 'notifications', action: 'read' },
    query: listNotificationsQuery,
    response: { status: 200, description: 'Notifications', schema: notificationList },
    handler: async ({ principal, query }, s) => ({ body: await s.notifications.list(principal, query) }),
  }),
  defineOperation({
    id: 'mark_read',
    method: 'post',
    path: '/v1/notifications/mark-read',
    summary: 'Mark the caller\'s notifications read: ids, or all: true',
    description: 'updated counts rows actually changed: already-read ones count 0 and other users\' ids are ignored.',
    access: { floor: 'viewer', tag: 'notifications', action: 'read' },
    body: markReadBody,
    response: { status: 200, description: 'How many rows changed', schema: markReadResult },
    handler: async ({ principal, body }, s) => ({ body: await s.notifications.markRead(principal, body) }),
  }),
];
