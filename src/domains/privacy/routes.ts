import { defineOperation } from '../../define-operation';
import { customerIdParams } from '../customers/schemas';
import { eraseCustomerBody, erasureParams, erasureView, redactBody, redactedEvent, redactParams } from './schemas';

export const privacyOperations = [
  defineOperation({
    id: 'erase_customer',
    method: 'post',
    path: '/v1/customers/{customer_id}/erase',
    summary: 'Erase a person: their name, addresses, handles, messages and files, everywhere (right to erasure)',
    description:
      'Admins only; audited with who and why. Answers 202 with the erasure, which the workers carry out: the customer keeps only its id, their messages read `[erased]`, their name, email, phone and handles are replaced by `[erased]` in their tickets\' subjects and other events, the intake ledger, webhook transcripts, idempotent replays and outbound event payloads; their files, search entries and queued jobs go. Tickets stay, with counts and timings, so reports do not change. `customer.erased` announces it without the data. A second request while one is pending answers that one.',
    access: { floor: 'admin', tag: 'customers', action: 'write' },
    params: customerIdParams,
    body: eraseCustomerBody,
    response: { status: 202, description: 'The erasure, queued', schema: erasureView },
    errors: ['customer_merged'],
    handler: async ({ principal, params, body }, s) => ({ status: 202, body: await s.privacy.requestErasure(principal, params.customer_id, body.reason) }),
  }),
  defineOperation({
    id: 'get_customer_erasure',
    method: 'get',
    path: '/v1/customers/{customer_id}/erasures/{erasure_id}',
    summary: 'Whether an erasure is done',
    access: { floor: 'admin', tag: 'customers', action: 'read' },
    params: erasureParams,
    response: { status: 200, description: 'The erasure', schema: erasureView },
    handler: async ({ principal, params }, s) => ({ body: await s.privacy.getErasure(principal, params.customer_id, params.erasure_id) }),
  }),
  defineOperation({
    id: 'redact_ticket_event',
    method: 'post',
    path: '/v1/tickets/{ticket_id}/events/{event_id}/redact',
    summary: "Remove one message's text (and its files) for good",
    description:
      'The body becomes `[erased]`, what the message\'s metadata held goes, its files are deleted, and its text leaves the ticket\'s outbound events, notifications, idempotent replays and search. Audited. Redacting a redacted message changes nothing.',
    access: { floor: 'editor', tag: 'tickets', action: 'write' },
    params: redactParams,
    body: redactBody,
    response: { status: 200, description: 'The event as it now stands', schema: redactedEvent },
    errors: ['event_not_redactable'],
    handler: async ({ principal, params, body }, s) => ({ body: await s.privacy.redact(principal, params.ticket_id, params.event_id, body.reason) }),
  }),
];
