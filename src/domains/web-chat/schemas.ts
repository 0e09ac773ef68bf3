import { z } from 'zod';
import { intParam } from '../../lib/params';
import { MAX_ATTACHMENTS } from '../files/schemas';
import { MAX_CURSOR_CHARS } from './tokens';

const INBOUND_TOKEN = 'itk_Qm9yZWFsLWV4YW1wbGUtdG9rZW4tMDE5Mw';
const VISITOR_ID = 'wv_5Jm2cXq8TfKd0bR1aWzYvg';
const VISITOR_TOKEN =
  'wvt1.k1.eyJ0IjoiNmY4ZTJhNDEtOTNjNS00YjdkLWEwZTItNWMxZDliM2Y3YTYyIiwidiI6Ind2XzVKbTJjWHE4VGZLZDBiUjFhV3pZdmciLCJlIjoxNzQyNTQ5NDAwLCJmIjoiUUFwM0t6dVdoRmJOa3pQN3RkNjZ3ZyJ9.Zx3b0h9yH0aKq0x8kI4c2f1v7Wm6nQ5rT8uE3pL2sYo';
const CURSOR = 'v1.k1.3q2-7wAAAAAAAAAA.Yk8s0d2c4f6h8j0l2n4p6r.Jx9fZ2w8Q1r4T7y0u3i6o9p2a5s8d1f4g7h0';
const UPLOAD_TOKEN = 'upl_Rk2v8Lw3Xq7Tn5Bm9Hc4Jd6Fg1Ys0Pa2Ze4Ui6Oq8Wt';
const ATTACHMENT_ID = '0195a3c2-8a41-7c2e-9b3d-4f6a8c0e2b4d';

/** The inbound token of the web chat connection (the same public token the widget opens its session with). */
const inboundToken = z.string().min(1).max(200).meta({ examples: [INBOUND_TOKEN] });

export const sessionQuery = z.strictObject({ token: inboundToken });

export const sessionBody = z.strictObject({
  visitor_id: z
    .string()
    .max(200)
    .optional()
    .meta({ description: 'The visitor the widget remembers. Resumed only with that visitor\'s still-valid token in Authorization: Bearer; otherwise a new visitor is started.', examples: [VISITOR_ID] }),
});

export const session = z.object({
  visitor_id: z.string().meta({ examples: [VISITOR_ID] }),
  visitor_token: z.string().meta({ description: 'Send as Authorization: Bearer on the visitor routes (and as ?visitor_token= on the stream only). Shown in this answer only.', examples: [VISITOR_TOKEN] }),
  expires_at: z.string().meta({ examples: ['2025-03-21T09:30:00.000Z'] }),
  resumed: z.boolean().meta({ description: 'True when the visitor of the token sent was continued; false for a new visitor.' }),
});

/**
 * `?token=` on the visitor routes names the connection for CORS (a browser's preflight carries no Authorization);
 * when sent, it must be the same connection's current inbound token as the visitor token's.
 */
const corsToken = inboundToken.optional().meta({ description: 'The connection\'s inbound token: lets a browser\'s preflight (which carries no Authorization) be answered for the connection\'s allowed_origins.', examples: [INBOUND_TOKEN] });

export const postQuery = z.strictObject({ token: corsToken });

export const postBody = z
  .strictObject({
    message_id: z
      .string()
      .trim()
      .min(1)
      .max(100)
      .meta({ description: 'Chosen by the widget, unique per visitor: sending the same id again (a retry) is a redelivery, written once.', examples: ['m_8d1e4b0c2f'] }),
    text: z
      .string()
      .max(65536)
      .optional()
      .meta({ description: 'At most 65 536 characters; surrounding whitespace is trimmed. Required (not blank) unless the message carries attachments.', examples: ['Hi! Do you ship to Canada?'] }),
    attachments: z
      .array(z.string().min(1).max(200))
      .max(MAX_ATTACHMENTS)
      .optional()
      .meta({
        description: `Up to ${MAX_ATTACHMENTS} upload tokens from POST /v1/web-chat/uploads, of this visitor's, each used within its hour and once. A token that is unknown, another visitor's, expired or already used is 422 upload_token_invalid naming its position, and nothing is written.`,
        examples: [[UPLOAD_TOKEN]],
      }),
  })
  .refine((b) => (b.text ?? '').trim() !== '' || (b.attachments?.length ?? 0) > 0, { path: ['text'], message: 'text must not be blank (it may be left out when the message carries attachments)' });
export type PostBody = z.output<typeof postBody>;

export const posted = z.object({
  channel: z.literal('web_chat'),
  message_id: z.string().meta({ examples: ['m_8d1e4b0c2f'] }),
  was_created: z.boolean().optional().meta({ description: 'The message opened a new conversation (a new ticket) rather than continuing the open one.' }),
  was_duplicate: z.boolean().optional().meta({ description: 'This message id was received before: nothing was written again.' }),
  status: z.literal('accepted').optional().meta({ description: 'Present (with 202) when the message is queued and will be written exactly once, shortly.' }),
});


/** The visitor token in the query, for what cannot send headers (EventSource, a link): `description` says which. */
const visitorTokenQuery = (description: string) => z.string().min(1).max(1024).optional().meta({ description, examples: [VISITOR_TOKEN] });

export const listQuery = z.strictObject({
  after: z
    .string()
    .min(1)
    .max(MAX_CURSOR_CHARS)
    .optional()
    .meta({ description: 'A `next_cursor` (or a stream frame\'s id): resume right after it. Absent: from the start of the conversation.', examples: [CURSOR] }),
  limit: intParam(1, 200).default(50),
  token: corsToken,
  visitor_token: visitorTokenQuery('The stream only (Accept: text/event-stream), for EventSource, which cannot send headers. Use Authorization: Bearer everywhere else.'),
});
export type ListQuery = z.output<typeof listQuery>;

/** A file as the visitor sees it on a message of their conversation (never its hash or where it is kept). */
export const visitorAttachment = z
  .object({
    id: z.uuid().meta({ examples: [ATTACHMENT_ID] }),
    name: z.string().meta({ examples: ['order-1234-receipt.pdf'] }),
    content_type: z.string().meta({ description: 'Sniffed from the bytes, never taken from the sender.', examples: ['application/pdf'] }),
    size: z.number().int().min(0).meta({ examples: [48213] }),
    state: z.enum(['pending', 'stored', 'skipped', 'failed', 'infected']).meta({ description: 'Only a stored file can be downloaded (GET /v1/web-chat/attachments/{attachment_id}/content).', examples: ['stored'] }),
  })
  .meta({ id: 'WebChatAttachment' });
export type VisitorAttachment = z.output<typeof visitorAttachment>;

export const message = z
  .object({
    id: z.uuid().meta({ examples: ['0195a3c2-7f1e-7b3a-9c4d-2e8f1a6b5c70'] }),
    author: z.enum(['visitor', 'agent']),
    agent_name: z.string().optional().meta({ examples: ['Grace Hopper'] }),
    text: z.string().meta({ examples: ['Yes, we ship to Canada: 3 to 5 working days.'] }),
    created_at: z.string().meta({ examples: ['2025-03-14T09:31:12.204Z'] }),
    message_id: z.string().optional().meta({ description: 'The visitor\'s messages: the id the widget sent it with.', examples: ['m_8d1e4b0c2f'] }),
    attachments: z.array(visitorAttachment).optional().meta({ description: 'The files the message carries, in order; absent when it carries none.' }),
  })
  .meta({ id: 'WebChatMessage' });
export type WebChatMessage = z.output<typeof message>;

export const messagePage = z.object({
  messages: z.array(message),
  next_cursor: z.string().meta({ description: 'Where to resume: pass it as `after` (or open the stream with it); always set, also at the end.', examples: [CURSOR] }),
  has_more: z.boolean().meta({ description: 'Whether more messages are there now (keep paging) or this page reached the end.' }),
});

/** POST /v1/web-chat/uploads: the token (for `attachments` of the visitor's next message) and the file as stored. */
export const visitorUpload = z
  .object({
    upload_token: z.string().meta({ description: 'Name it in this visitor\'s message (`attachments: [token]`) within the hour. Shown in this answer only; no one else can use it.', examples: [UPLOAD_TOKEN] }),
    attachment: visitorAttachment,
    expires_at: z.string().meta({ description: 'An upload no message used by then is removed.', examples: ['2025-03-14T10:41:53.412Z'] }),
  })
  .meta({ id: 'WebChatUpload' });

export const uploadQuery = z.strictObject({ token: corsToken });

export const attachmentParams = z.object({ attachment_id: z.uuid().meta({ examples: [ATTACHMENT_ID] }) });

export const downloadQuery = z.strictObject({
  token: corsToken,
  visitor_token: visitorTokenQuery('For a link (`<a href>`, `<img src>`), which cannot send headers: the visitor token. Authorization: Bearer is preferred where the widget can send it.'),
});

export const EXAMPLE_ATTACHMENT = { id: ATTACHMENT_ID, name: 'order-1234-receipt.pdf', content_type: 'application/pdf', size: 48213, state: 'stored' as const };

export const EXAMPLES = { INBOUND_TOKEN, VISITOR_ID, VISITOR_TOKEN, CURSOR, UPLOAD_TOKEN };
