import { z } from 'zod';
import { defineOperation } from '../../define-operation';

const STATES = ['queued', 'sending', 'sent', 'delivered', 'read', 'failed', 'blocked', 'unknown'] as const;
const at = z.string().nullable().meta({ examples: ['2025-03-14T09:31:02.114Z'] });

const delivery = z
  .object({
    reply_event_id: z.uuid(),
    ticket_id: z.uuid(),
    channel: z.string().meta({ examples: ['sms'] }),
    state: z.enum(STATES),
    sender: z.string().nullable().meta({ examples: ['twilio'] }),
    provider_message_id: z.string().nullable().meta({ examples: ['SM3f1c0a9b8e7d6c5b4a3f2e1d0c9b8a7f'] }),
    attempts: z.number().int(),
    segments: z.number().int().nullable().meta({ description: 'SMS: the segments Twilio split the body into.' }),
    parts: z
      .array(z.object({ index: z.number().int(), provider_message_id: z.string() }))
      .meta({ description: 'A reply sent as several provider messages (one per file on WhatsApp and Telegram): the parts the provider accepted, in order. A retry sends only the others.' }),
    error_code: z.string().nullable().meta({ description: "The provider's own code of a failure (Twilio 21211, WhatsApp 131047, Postmark 406…)." }),
    last_error: z.string().nullable(),
    sent_at: at,
    delivered_at: at,
    read_at: at,
    next_attempt_at: at,
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Delivery' });

const EXAMPLE = {
  reply_event_id: '9e2f4a18-3b6c-4d07-a5e9-1c8b7d2f0a64',
  ticket_id: 'b3e1f0a2-7c4d-4e9b-8a16-5d2c9f7e3b40',
  channel: 'sms',
  state: 'delivered' as const,
  sender: 'twilio',
  provider_message_id: 'SM3f1c0a9b8e7d6c5b4a3f2e1d0c9b8a7f',
  attempts: 1,
  segments: 2,
  parts: [],
  error_code: null,
  last_error: null,
  sent_at: '2025-03-14T09:31:02.114Z',
  delivered_at: '2025-03-14T09:31:05.870Z',
  read_at: null,
  next_attempt_at: null,
  created_at: '2025-03-14T09:31:01.950Z',
  updated_at: '2025-03-14T09:31:05.870Z',
};

const ticketParams = z.object({ ticket_id: z.uuid() });
const read = { floor: 'viewer', tag: 'tickets', action: 'read' } as const;
const write = { floor: 'editor', tag: 'tickets', action: 'write' } as const;

export const outboundOperations = [
  defineOperation({
    id: 'list_ticket_deliveries',
    method: 'get',
    path: '/v1/tickets/{ticket_id}/deliveries',
    summary: "How the ticket's replies reached (or did not reach) the customer, newest first",
    access: read,
    params: ticketParams,
    response: { status: 200, description: 'Deliveries', schema: z.object({ deliveries: z.array(delivery) }) },
    example: { response: { deliveries: [EXAMPLE] } },
    handler: async ({ principal, params }, s) => ({ body: await s.outbound.list(principal, params.ticket_id) }),
  }),
  defineOperation({
    id: 'retry_delivery',
    method: 'post',
    path: '/v1/tickets/{ticket_id}/deliveries/{reply_event_id}/retry',
    summary: 'Send a failed, blocked or unknown reply again',
    description:
      "A reply whose send is `unknown` (the provider may have it) is never retried by the service itself: an agent who has checked that the customer did not get it sends it again here. Failed and blocked ones too. 409 delivery_not_retryable for any other state; a WhatsApp free-form reply is refused past the 24-hour window (409 whatsapp_window_closed).",
    access: write,
    params: z.object({ ticket_id: z.uuid(), reply_event_id: z.uuid() }),
    response: { status: 202, description: 'Queued again', schema: delivery },
    errors: ['delivery_not_retryable', 'whatsapp_window_closed'],
    example: { response: { ...EXAMPLE, state: 'queued', attempts: 1, sent_at: null, delivered_at: null, provider_message_id: null, segments: null, parts: [] } },
    handler: async ({ principal, params }, s) => ({ status: 202, body: await s.outbound.retry(principal, params.ticket_id, params.reply_event_id) }),
  }),
];
