import { defineOperation } from '../../define-operation';
import { createScheduleBody, patchScheduleBody, schedule, scheduleList, scheduleParams } from './schemas';

const CONTRACT = [
  'Business hours: an IANA time zone, weekly hours (local wall-clock intervals, split shifts allowed) and holidays (typed in, or imported from an iCal feed by the workers).',
  'An SLA policy naming it (`schedule_id`) counts business minutes: Friday 16:30 + 60 on 09:00–17:00 is Monday 09:30. Daylight saving follows the wall clock.',
  'Changing the hours, zone or holidays recomputes the open tickets\' due times in the background.',
].join(' ');

export const scheduleOperations = [
  defineOperation({
    id: 'list_schedules',
    method: 'get',
    path: '/v1/schedules',
    summary: 'Business-hour schedules of the workspace',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'read' },
    response: { status: 200, description: 'Schedules, oldest first', schema: scheduleList },
    handler: async ({ principal }, s) => ({ body: await s.schedules.list(principal) }),
  }),
  defineOperation({
    id: 'create_schedule',
    method: 'post',
    path: '/v1/schedules',
    summary: 'Create a schedule: time zone, weekly hours, holidays and an optional iCal holiday feed',
    description: CONTRACT,
    access: { floor: 'admin', tag: 'helpdesk-ops', action: 'write' },
    body: createScheduleBody,
    response: { status: 201, description: 'The schedule', schema: schedule },
    errors: ['ical_url_refused'],
    versioned: true,
    handler: async ({ principal, body }, s) => {
      const row = await s.schedules.create(principal, body);
      return { status: 201, body: row, version: row.version };
    },
  }),
  defineOperation({
    id: 'get_schedule',
    method: 'get',
    path: '/v1/schedules/{schedule_id}',
    summary: 'One schedule, with its imported holidays and its feed\'s last read',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'read' },
    params: scheduleParams,
    response: { status: 200, description: 'The schedule', schema: schedule },
    versioned: true,
    handler: async ({ principal, params }, s) => {
      const row = await s.schedules.get(principal, params.schedule_id);
      return { body: row, version: row.version };
    },
  }),
  defineOperation({
    id: 'patch_schedule',
    method: 'patch',
    path: '/v1/schedules/{schedule_id}',
    summary: 'Change a schedule; open tickets under policies counting on it get new due times',
    description:
      'Fields sent replace theirs (`weekly_hours`, `holidays` whole). 422 sla_target_unreachable when a policy on the schedule could no longer meet its longest target within ten years. A new `ical_url` is read at once; `null` removes the feed and its holidays.',
    access: { floor: 'admin', tag: 'helpdesk-ops', action: 'write' },
    params: scheduleParams,
    body: patchScheduleBody,
    response: { status: 200, description: 'The schedule as it now stands', schema: schedule },
    errors: ['ical_url_refused', 'sla_target_unreachable', 'precondition_failed'],
    versioned: true,
    handler: async ({ principal, params, body, ifMatch }, s) => {
      const row = await s.schedules.patch(principal, params.schedule_id, body, ifMatch);
      return { body: row, version: row.version };
    },
  }),
  defineOperation({
    id: 'delete_schedule',
    method: 'delete',
    path: '/v1/schedules/{schedule_id}',
    summary: 'Delete a schedule no SLA policy counts on',
    access: { floor: 'admin', tag: 'helpdesk-ops', action: 'write' },
    params: scheduleParams,
    response: { status: 204, description: 'Deleted' },
    errors: ['schedule_in_use'],
    handler: async ({ principal, params }, s) => {
      await s.schedules.remove(principal, params.schedule_id);
      return { status: 204 };
    },
  }),
];
