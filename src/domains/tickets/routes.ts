import { defineOperation } from '../../define-operation';
import type { ApiServices } from '../../services/api';
import type { Principal } from '../identity/principal';
import { createTicketBody, EXAMPLE_TICKET, listTicketsQuery, mergeBody, messageBody,
  replyBody, patchTicketBody, ticketDetail, ticketIdParams, ticketList, ticketWrite } from './schemas';

const write = { floor: 'editor', tag: 'tickets', action: 'write' } as const;
const read = { floor: 'viewer', tag: 'tickets', action: 'read' } as const;
const detail = (description: string, status = 200) => ({ status, description, schema: ticketDetail });
/** A write on one ticket answers the ticket without its timeline, and the events the write appended. */
const written = (description: string, status = 200) => ({ status, description, schema: ticketWrite });

/**
 * Idempotent replays of large answers (issue 32): a ticket's answer can hold its whole timeline (merge, reopen)
 * or a 200 KB description on every small change, so one kept per Idempotency-Key could be megabytes for a day.
 * Over IDEMPOTENCY_MAX_STORED_BYTES the ticket's id is kept instead, and the replay reads the ticket again.
 */
const replayDetail = {
  pointer: (answer: { id: string }) => ({ ticket_id: answer.id }),
  read: async ({ principal, pointer }: { principal: Principal; pointer: { ticket_id: string } }, s: ApiServices) => {
    const t = await s.tickets.rendered(principal, pointer.ticket_id);
    return { body: t.ticket, rendered: { events: t.events } };
  },
};
const replayWrite = {
  pointer: (answer: { id: string; new_events: { id: string }[] }) => ({ ticket_id: answer.id, event_ids: answer.new_events.map((e) => e.id) }),
  read: async ({ principal, pointer }: { principal: Principal; pointer: { ticket_id: string; event_ids: string[] } }, s: ApiServices) => ({
    body: await s.tickets.writeAnswerAgain(principal, pointer.ticket_id, pointer.event_ids),
  }),
};

export const ticketOperations = [
  defineOperation({
    id: 'create_ticket',
    method: 'post',
    path: '/v1/tickets',
    summary: 'Create a ticket for an existing customer (customer_id) or by email (customer_email)',
    access: write,
    body: createTicketBody,
    response: detail('The new ticket', 201),
    errors: ['customer_unknown', 'assignee_unknown', 'team_unknown'],
    // customer_id and customer_email exclude each other, which a sample of the schema cannot know.
    example: {
      request: {
        subject: EXAMPLE_TICKET.subject,
        description: EXAMPLE_TICKET.description,
        priority: 'high',
        customer_email: EXAMPLE_TICKET.customer_email,
        team_id: EXAMPLE_TICKET.team_id,
        tags: ['billing'],
        metadata: { order_id: 'SO-10482' },
      },
    },
    replay: replayDetail,
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.tickets.create(principal, body) }),
  }),
  defineOperation({
    id: 'list_tickets',
    method: 'get',
    path: '/v1/tickets',
    summary: 'List tickets, newest first, with filters (an unknown filter is refused), or search them with q',
    description: 'Filters combine with AND. `q` searches (its syntax is on the parameter) within the other filters, and its cursor pages by relevance without repeats or gaps.',
    access: read,
    query: listTicketsQuery,
    response: { status: 200, description: 'A page of tickets', schema: ticketList },
    errors: ['query_invalid', 'query_too_long', 'query_too_complex', 'query_too_expensive'],
    handler: async ({ principal, query }, s) => ({ body: await s.tickets.list(principal, query) }),
  }),
  defineOperation({
    id: 'get_ticket',
    method: 'get',
    path: '/v1/tickets/{ticket_id}',
    summary: 'Ticket detail with its timeline',
    access: read,
    params: ticketIdParams,
    response: detail('The ticket'),
    versioned: true,
    handler: async ({ principal, params }, s) => {
      const t = await s.tickets.rendered(principal, params.ticket_id);
      return { body: t.ticket, rendered: { events: t.events }, version: t.version };
    },
  }),
  defineOperation({
    id: 'patch_ticket',
    method: 'patch',
    path: '/v1/tickets/{ticket_id}',
    summary: 'Change status (within legal_next_states), priority, assignee, team, tags or metadata',
    description: 'metadata is a JSON merge patch: keys sent are set, keys sent as null are removed. A merged ticket cannot be patched.',
    access: write,
    params: ticketIdParams,
    body: patchTicketBody,
    response: written('The ticket as it now stands (without its timeline) and the events this change appended'),
    errors: ['illegal_transition', 'ticket_merged', 'assignee_unknown', 'team_unknown', 'precondition_failed'],
    versioned: true,
    replay: replayWrite,
    handler: async ({ principal, params, body, ifMatch }, s) => {
      const t = await s.tickets.patch(principal, params.ticket_id, body, ifMatch);
      return { body: t, version: t.version };
    },
  }),
  defineOperation({
    id: 'reply_ticket',
    method: 'post',
    path: '/v1/tickets/{ticket_id}/replies',
    summary: 'Agent reply; the first one counts as the first response',
    access: write,
    params: ticketIdParams,
    description:
      'On a channel ticket (email, sms, whatsapp, telegram, web_chat) the reply is also queued for sending on that channel, in the same transaction; its delivery (queued → sent → delivered/read, or failed/unknown) is on the timeline as `delivery` events and in GET /v1/tickets/{ticket_id}/deliveries. A WhatsApp free-form reply more than 24 hours after the customer last wrote is refused (409 whatsapp_window_closed): send `template` instead. A body longer than the channel carries (SMS 1600, WhatsApp and Telegram 4096 characters) is refused (400 reply_too_long). `attachments` names up to 20 of the caller\'s upload tokens (POST /v1/uploads), bound to the reply in its transaction and listed on its event; a token that is unknown, another user\'s or workspace\'s, expired, already used or not stored is refused (422 upload_token_invalid, naming it) and nothing is written. The files go to the customer with the reply (email attachments, MMS media, WhatsApp and Telegram documents); files a channel cannot carry (Postmark 10 MB per message, mailbox 25 MiB, MMS 5 MB and 10 files, WhatsApp images 5 MB and documents 100 MB, Telegram 50 MB) are refused (422 attachment_not_sendable, naming the file and the limit) and nothing is written.',
    body: replyBody,
    response: written('The ticket (without its timeline) and the reply event', 201),
    errors: ['ticket_merged', 'whatsapp_window_closed', 'reply_too_long', 'template_not_allowed', 'upload_token_invalid', 'attachment_not_sendable'],
    replay: replayWrite,
    handler: async ({ principal, params, body }, s) => ({ status: 201, body: await s.tickets.reply(principal, params.ticket_id, body.body, body.template, body.attachments) }),
  }),
  defineOperation({
    id: 'note_ticket',
    method: 'post',
    path: '/v1/tickets/{ticket_id}/notes',
    summary: 'Internal note (never shown to the customer)',
    description: "`attachments` names up to 20 of the caller's upload tokens (POST /v1/uploads), bound to the note in its transaction and listed on its event; a note's files are internal, never shown to the customer. A token that is unknown, another user's or workspace's, expired, already used or not stored is refused (422 upload_token_invalid, naming it) and nothing is written.",
    access: write,
    params: ticketIdParams,
    body: messageBody,
    response: written('The ticket (without its timeline) and the note event', 201),
    errors: ['ticket_merged', 'upload_token_invalid'],
    replay: replayWrite,
    handler: async ({ principal, params, body }, s) => ({ status: 201, body: await s.tickets.note(principal, params.ticket_id, body.body, body.attachments) }),
  }),
  defineOperation({
    id: 'merge_ticket',
    method: 'post',
    path: '/v1/tickets/{ticket_id}/merge',
    summary: 'Merge this ticket (the source) into target_ticket_id; irreversible',
    description: 'Every source event is copied to the winner marked meta.via_merge; the source becomes merged with merged_into_id set.',
    access: write,
    params: ticketIdParams,
    body: mergeBody,
    response: detail('The source ticket, status merged'),
    errors: ['merge_self', 'ticket_merged'],
    example: {
      response: { ...EXAMPLE_TICKET, status: 'merged', merged_into_id: 'e0e47e8c-f786-4369-9020-05530622d935', legal_next_states: [] },
    },
    replay: replayDetail,
    handler: async ({ principal, params, body }, s) => ({ body: await s.tickets.merge(principal, params.ticket_id, body.target_ticket_id) }),
  }),
  defineOperation({
    id: 'reopen_ticket',
    method: 'post',
    path: '/v1/tickets/{ticket_id}/reopen',
    summary: 'Reopen a solved or closed ticket; restarts both SLA timers',
    access: write,
    params: ticketIdParams,
    response: detail('The ticket, status open'),
    errors: ['reopen_not_allowed'],
    replay: replayDetail,
    handler: async ({ principal, params }, s) => ({ body: await s.tickets.reopen(principal, params.ticket_id) }),
  }),
];
