import { z } from 'zod';
import { defineOperation } from '../../define-operation';
import { isAttachmentContent } from '../channels/adapters/email';
import { CHANNEL_IDS, CHANNELS } from '../channels/registry';
import { intParam } from '../../lib/params';
import { intakeAnswer } from '../../http/result';
import { DELIVERY_SORT, ingestBody, ingestQuery } from './edge';
import { afterParam, pageSchema } from '../../lib/paging';

const CHANNEL_EXAMPLE = { examples: ['web_chat'] };

/**
 * The channel: any string reaches the handler (an unregistered one is 404 not_found, a registered one without an
 * adapter 400 channel_adapter_unavailable), but the document lists the channels that take messages (`enum`), so
 * a generated client offers them and a validating proxy knows them.
 */
const ingestParams = z.object({
  channel: z.string().min(1).max(64).meta({ enum: CHANNEL_IDS.filter((id) => CHANNELS[id].adapter !== null), examples: ['web_chat'] } as never),
});

/** One message written (or found already written): the ticket it went to. */
const ingestMessage = {
  channel: z.string().meta(CHANNEL_EXAMPLE),
  ticket_id: z.uuid(),
  customer_id: z.uuid(),
  was_created: z.boolean().meta({ description: 'A new ticket (true) or a reply threaded onto an existing one (false).' }),
  was_duplicate: z.boolean().meta({ description: 'A redelivery: the same ticket, nothing written again.' }),
};

/** 200: the message(s) written; with several messages in one payload, the first's fields and every one in `messages`. */
const ingestWritten = z
  .object({ ...ingestMessage, messages: z.array(z.object(ingestMessage)).optional().meta({ description: 'Present when the payload carried several messages: one result each, in order.' }) })
  .meta({ id: 'IngestResult' });

/** 200: a payload the adapter read but that holds no customer message (a delivery receipt): nothing written. */
const ingestIgnored = z
  .object({ channel: z.string().meta(CHANNEL_EXAMPLE), ignored: z.literal(true), reason: z.string().meta({ examples: ['the payload holds no customer message (e.g. delivery receipts)'] }) })
  .meta({ id: 'IngestIgnored' });

/** 202: the worker did not answer within JOB_WAIT_MS; still written exactly once. */
const ingestQueued = z
  .object({
    status: z.literal('accepted'),
    channel: z.string().meta(CHANNEL_EXAMPLE),
    job_id: z.string().meta({ examples: ['c8d2a1f0b3e4-17'] }),
    provider_message_ids: z.array(z.string()).meta({ description: 'What GET /v1/ingest/deliveries lists them by.', examples: [['wc_msg_8f3a2b1c']] }),
  })
  .meta({ id: 'IngestQueued' });

/** Every answer is parsed with the union (queued first: the only one with `status`); OpenAPI documents 200 and 202 apart. */
const ingestResult = z.union([ingestQueued, ingestIgnored, ingestWritten]);

const deliveries = pageSchema(
  'deliveries',
  z.object({
    channel: z.string(),
    provider_message_id: z.string(),
    ticket_id: z.uuid().nullable(),
    customer_id: z.uuid().nullable(),
    was_created: z.boolean(),
    first_seen_at: z.string(),
    last_seen_at: z.string(),
    duplicate_count: z.number().int(),
  }),
);

export const ingestOperations = [
  defineOperation({
    id: 'ingest_channel_message',
    method: 'post',
    path: '/v1/ingest/{channel}',
    summary: 'Public intake of a provider message (no credential)',
    description:
      'Body: {tenant_id | agent_id, payload} or ?token=<inbound_token>. The adapter decides new ticket or threaded reply; a redelivery returns the same ticket with was_duplicate true and writes nothing twice. Each message costs one point of the workspace budget (429 carries Retry-After); duplicates and refusals cost nothing. More than INGEST_MAX_MESSAGES_PER_REQUEST messages in one request → 400 payload_too_complex. Refusals are charged per client address instead: past INGEST_REFUSAL_RATE_POINTS they answer 429.',
    access: 'public',
    params: ingestParams,
    query: ingestQuery,
    body: ingestBody,
    response: { status: 200, description: 'Ingest result: the message(s) written, or the payload ignored (no customer message in it)', schema: ingestResult },
    alsoAnswers: [
      {
        status: 202,
        description: 'Queued: the worker did not answer within JOB_WAIT_MS; the message is still written exactly once (see GET /v1/ingest/deliveries)',
        schema: ingestQueued,
        example: { status: 'accepted', channel: 'web_chat', job_id: 'c8d2a1f0b3e4-17', provider_message_ids: ['wc_msg_8f3a2b1c'] },
      },
    ],
    errors: ['channel_payload_invalid', 'channel_adapter_unavailable', 'payload_too_complex', 'throttled'],
    chargeRefusals: true,
    // A web chat message as our widget posts it (docs/web-chat-format.md); the payload is the channel's own.
    example: {
      params: { channel: 'web_chat' },
      query: { token: 'itk_Qm9yZWFsLWV4YW1wbGUtdG9rZW4tMDE5Mw' },
      request: {
        tenant_id: '34f5c98e-f430-457b-a812-92637d0c6fd0',
        payload: {
          visitor_id: 'v_3f9c2a7b1e',
          message_id: 'wc_8d1e4b0c2f',
          text: 'Hi! Do you ship to Canada?',
          sent_at: '2025-03-14T09:30:00Z',
          email: 'ada@example.com',
          name: 'Ada Lovelace',
        },
      },
      response: {
        channel: 'web_chat',
        ticket_id: 'b3e1f0a2-7c4d-4e9b-8a16-5d2c9f7e3b40',
        customer_id: 'c8a4d2e6-1b9f-4c3a-9e57-0f6b2d8a4c19',
        was_created: true,
        was_duplicate: false,
      },
    },
    // An email may carry its files (base64 inside the JSON, up to INGEST_EMAIL_MAX_BYTES): read as it arrives.
    spooledJson: { when: (p) => p.channel === 'email', spill: (path) => isAttachmentContent(path, ['payload']) },
    handler: async ({ params, query, body }, s) => intakeAnswer(await s.ingest.receive(params.channel, body, query)),
  }),
  defineOperation({
    id: 'list_ingest_deliveries',
    method: 'get',
    path: '/v1/ingest/deliveries',
    summary: 'Recent deliveries from the ingest ledger, with duplicate counts',
    access: { floor: 'admin', tag: 'channels', action: 'read' },
    query: z.strictObject({
      limit: intParam(1, 500).default(100),
      after: afterParam({ [DELIVERY_SORT]: 'sequence' }, z.literal('')).optional(),
      channel: z.string().min(1).max(64).optional(),
    }),
    response: { status: 200, description: 'Deliveries, newest first', schema: deliveries },
    example: {
      query: { channel: 'web_chat' },
      response: {
        deliveries: [
          {
            channel: 'web_chat',
            provider_message_id: 'wc_8d1e4b0c2f',
            ticket_id: 'b3e1f0a2-7c4d-4e9b-8a16-5d2c9f7e3b40',
            customer_id: 'c8a4d2e6-1b9f-4c3a-9e57-0f6b2d8a4c19',
            was_created: true,
            first_seen_at: '2025-03-14T09:30:01.204Z',
            last_seen_at: '2025-03-14T09:30:04.871Z',
            duplicate_count: 1,
          },
        ],
        next_cursor: null,
      },
    },
    handler: async ({ principal, query }, s) => ({ body: await s.ingest.deliveries(principal, query) }),
  }),
];
