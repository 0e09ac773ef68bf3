import { defineOperation } from '../../define-operation';
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
    // ids and all exclude each other, which a sample of the schema cannot know.
    example: { request: { ids: ['6f1c9b2e-4d3a-4e8f-9a7b-2c5d8e1f0a34', '0b7d3e9a-1f2c-4a6b-8d5e-7c9f2a4b6d18'] }, response: { updated: 2 } },
    handler: async ({ principal, body }, s) => ({ body: await s.notifications.markRead(principal, body) }),
  }),
];
