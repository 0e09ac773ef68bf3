import { defineOperation } from '../../define-operation';
import { downloadAnswer } from '../../http/download';
import type { HandlerResult } from '../../http/result';
import { sse, wantsEventStream } from '../../http/sse';
import { parseRange } from '../files/range';
import { UPLOAD_FORM } from '../files/schemas';
import {
  attachmentParams,
  downloadQuery,
  EXAMPLE_ATTACHMENT,
  EXAMPLES,
  listQuery,
  messagePage,
  postBody,
  posted,
  postQuery,
  session,
  sessionBody,
  sessionQuery,
  uploadQuery,
  visitorUpload,
} from './schemas';

const MESSAGE = { id: '0195a3c2-7f1e-7b3a-9c4d-2e8f1a6b5c70', author: 'visitor', text: 'Hi! Do you ship to Canada?', created_at: '2025-03-14T09:30:01.204Z', message_id: 'm_8d1e4b0c2f' };
const REPLY = { id: '0195a3c3-1a2b-7c3d-8e4f-5a6b7c8d9e0f', author: 'agent', agent_name: 'Grace Hopper', text: 'Yes, we ship to Canada: 3 to 5 working days.', created_at: '2025-03-14T09:31:12.204Z' };
const STREAM_EXAMPLE = `retry: 2000\n\nid: ${EXAMPLES.CURSOR}\nevent: message\ndata: ${JSON.stringify(REPLY)}\n\n: heartbeat\n\n`;

/**
 * Web chat both ways (issue 33): the routes a browser widget calls. Public (no API credential): a session is
 * opened with the connection's inbound token, and the visitor routes take the visitor token it returns.
 */
export const webChatOperations = [
  defineOperation({
    id: 'create_web_chat_session',
    method: 'post',
    path: '/v1/web-chat/sessions',
    summary: 'Open (or resume) a web chat visitor session',
    description:
      'Query `token`: the web_chat connection\'s inbound token (the one the widget is embedded with). Answers a visitor id and a signed visitor token for the visitor routes, valid until `expires_at` (WEB_CHAT_SESSION_TTL_SECONDS). To continue a visitor the widget remembers, send that visitor\'s still-valid token as Authorization: Bearer (and, optionally, its `visitor_id`): the same visitor gets a fresh token. Anything else (no token, an expired one, one of another visitor or connection) starts a new visitor: a visitor id alone resumes nothing. Rotating the connection\'s inbound token ends every session. An unknown token, or a connection that is disabled or not web_chat: 404.',
    access: 'public',
    query: sessionQuery,
    body: sessionBody,
    readsHeaders: ['authorization'],
    chargeRefusals: true,
    secretInAnswer: true,
    response: { status: 201, description: 'The visitor session', schema: session },
    example: {
      query: { token: EXAMPLES.INBOUND_TOKEN },
      request: { visitor_id: EXAMPLES.VISITOR_ID },
      response: { visitor_id: EXAMPLES.VISITOR_ID, visitor_token: EXAMPLES.VISITOR_TOKEN, expires_at: '2025-03-21T09:30:00.000Z', resumed: true },
    },
    handler: async ({ query, body, headers }, s) => ({ status: 201, body: await s.webChat.openSession(query.token, body, headers?.authorization) }),
  }),
  defineOperation({
    id: 'post_web_chat_message',
    method: 'post',
    path: '/v1/web-chat/messages',
    summary: 'Post a web chat visitor\'s message',
    description:
      'Authorization: Bearer <visitor_token>. The message goes through channel intake as the token\'s visitor (never one named in the body): it continues the visitor\'s open conversation or opens a new one, counts against the workspace\'s intake budget (429 with Retry-After, nothing written), and `message_id` is its dedupe key per visitor (a retry answers was_duplicate true and writes nothing twice). `attachments` names up to 20 of this visitor\'s upload tokens (POST /v1/web-chat/uploads), each within its hour; the files are bound to the message as it is written (agents see them on its timeline event), exactly once: a retry of the same `message_id` binds nothing again and is not refused for naming tokens the first delivery spent. A token that is unknown, another visitor\'s, expired, already used or not stored is 422 upload_token_invalid naming its position (`attachments[i]`), and nothing is written. `text` may be left out when the message carries attachments. Ticket and customer ids are not part of the visitor\'s view. 202 when the worker did not answer within JOB_WAIT_MS: the message is still written exactly once.',
    access: 'public',
    query: postQuery,
    body: postBody,
    readsHeaders: ['authorization'],
    chargeRefusals: true,
    response: { status: 200, description: 'The message was written (or was a redelivery)', schema: posted },
    alsoAnswers: [{ status: 202, description: 'Queued: written exactly once, shortly', example: { status: 'accepted', channel: 'web_chat', message_id: 'm_8d1e4b0c2f' } }],
    errors: ['visitor_token_invalid', 'visitor_token_expired', 'visitor_session_ended', 'upload_token_invalid', 'throttled'],
    example: {
      request: { message_id: 'm_8d1e4b0c2f', text: 'Hi! Do you ship to Canada? My order receipt is attached.', attachments: [EXAMPLES.UPLOAD_TOKEN] },
      response: { channel: 'web_chat', message_id: 'm_8d1e4b0c2f', was_created: true, was_duplicate: false },
    },
    handler: async ({ query, body, headers }, s) => s.webChat.post(headers?.authorization, query.token, body),
  }),
  defineOperation({
    id: 'list_web_chat_messages',
    method: 'get',
    path: '/v1/web-chat/messages',
    summary: 'A web chat visitor\'s conversation (JSON, or live as Server-Sent Events)',
    description:
      'Authorization: Bearer <visitor_token>. The visitor\'s own conversation across their web chat tickets, oldest first: their messages (`author: visitor`) and the agents\' replies (`author: agent`, with `agent_name`); never internal notes or any other event. Pass `next_cursor` back as `after` for the next page; it is always set, also at the end (keep it to ask again later). With `Accept: text/event-stream` the same conversation is a live stream: every message as `id: <cursor>`, `event: message`, `data: <message JSON>`, from `after` (or the start); a reconnect with `Last-Event-ID` (EventSource does so by itself) resumes right after that frame, with no gap and no repeat. EventSource cannot send headers, so the stream alone also takes the token as `?visitor_token=`. The stream sends a heartbeat comment every EVENT_STREAM_HEARTBEAT_SECONDS, ends a client that reads nothing for EVENT_STREAM_STALL_SECONDS, and ends with an `event: session_ended` frame when the token expires or the connection\'s inbound token is rotated (checked before every delivery and every EVENT_STREAM_RECHECK_SECONDS). Open streams are capped per visitor (WEB_CHAT_STREAMS_PER_VISITOR), per workspace and per API process: past a cap, 429 too_many_streams. Reads are WEB_CHAT_READ_RATE_POINTS a minute per visitor (429 throttled).',
    access: 'public',
    query: listQuery,
    readsHeaders: ['authorization', 'accept'],
    eventStream: true,
    streamExample: STREAM_EXAMPLE,
    chargeRefusals: true,
    response: { status: 200, description: 'A page of the conversation (or, asked for, an endless text/event-stream of it)', schema: messagePage },
    errors: ['visitor_token_invalid', 'visitor_token_expired', 'visitor_session_ended', 'throttled', 'too_many_streams'],
    example: { response: { messages: [MESSAGE, REPLY], next_cursor: EXAMPLES.CURSOR, has_more: false } },
    handler: async ({ query, headers, lastEventId }, s) =>
      wantsEventStream(headers?.accept)
        ? { stream: sse(await s.webChat.openStream(headers?.authorization, query, lastEventId)) }
        : { body: await s.webChat.list(headers?.authorization, query) },
  }),
  defineOperation({
    id: 'upload_web_chat_file',
    method: 'post',
    path: '/v1/web-chat/uploads',
    summary: 'Upload a file for a web chat visitor\'s next message (multipart/form-data, the part named file)',
    description:
      'Authorization: Bearer <visitor_token>, checked as for POST /v1/web-chat/messages before any byte is read. The file is streamed into the file store exactly as an agent\'s upload (POST /v1/uploads): at most FILES_MAX_BYTES (`413 file_too_large`, answered as soon as the limit is passed, nothing stored), within the workspace\'s FILES_WORKSPACE_QUOTA_BYTES (`413 files_quota_exceeded`), its name sanitised, its type sniffed from its bytes, scanned when clamd is configured. A compressed body (Content-Encoding) is 415. Name the answer\'s `upload_token` in this visitor\'s message (`attachments: [token]`) within the hour: no other visitor and no agent can use it, and an upload no message used is removed. Each upload costs one point of the workspace\'s web chat intake budget, as a message does (429 throttled with Retry-After).',
    access: 'public',
    query: uploadQuery,
    readsHeaders: ['authorization'],
    chargeRefusals: true,
    streamBody: { mediaType: 'multipart/form-data', schema: UPLOAD_FORM, description: 'A form with the file in the part named `file` (other parts are ignored).' },
    secretInAnswer: true,
    response: { status: 201, description: 'The upload: its token (shown here only), the file as stored, and when the token expires', schema: visitorUpload },
    errors: ['visitor_token_invalid', 'visitor_token_expired', 'visitor_session_ended', 'file_too_large', 'files_quota_exceeded', 'throttled'],
    example: { response: { upload_token: EXAMPLES.UPLOAD_TOKEN, attachment: EXAMPLE_ATTACHMENT, expires_at: '2025-03-14T10:41:53.412Z' } },
    handler: async ({ query, headers, stream }, s) => ({ status: 201, body: await s.webChat.upload(headers?.authorization, query.token, stream!) }),
  }),
  defineOperation({
    id: 'get_web_chat_attachment_content',
    method: 'get',
    path: '/v1/web-chat/attachments/{attachment_id}/content',
    summary: 'A file of the web chat visitor\'s conversation, as a download (Range requests supported)',
    description:
      'Authorization: Bearer <visitor_token>, or `?visitor_token=` so that a plain link (`<a href>`, `<img src>`) works. The visitor reaches the files of the messages their conversation shows (GET /v1/web-chat/messages): their own and the agents\' replies on it; files of internal notes, of other visitors and of other workspaces are 404. Served as agents\' downloads are: its sniffed type (HTML, SVG, XML and scripts as application/octet-stream), `Content-Disposition: attachment` with its name, `X-Content-Type-Options: nosniff`, `Content-Security-Policy: sandbox`; one `Range: bytes=…` is answered 206 with `Content-Range` (past the end: 416 range_not_satisfiable). Only a stored file is served (409 attachment_unavailable otherwise). A download is one of the visitor\'s WEB_CHAT_READ_RATE_POINTS reads a minute.',
    access: 'public',
    params: attachmentParams,
    query: downloadQuery,
    readsHeaders: ['authorization', 'range', 'if-range'],
    chargeRefusals: true,
    response: { status: 200, description: 'The bytes', binary: true },
    alsoAnswers: [
      { status: 206, description: 'The range asked for (Content-Range says which bytes of how many)', example: null },
      { status: 302, description: 'S3 store with presigned downloads: the bytes are at Location, for FILES_S3_PRESIGN_SECONDS', example: null },
    ],
    errors: ['visitor_token_invalid', 'visitor_token_expired', 'visitor_session_ended', 'attachment_unavailable', 'range_not_satisfiable', 'throttled'],
    example: { query: { visitor_token: EXAMPLES.VISITOR_TOKEN } },
    handler: async ({ params, query, headers }, s): Promise<HandlerResult> =>
      downloadAnswer(
        await s.webChat.download(headers?.authorization, query, params.attachment_id, ({ size, etag }) => parseRange(headers?.range, size, headers?.['if-range'], etag)),
      ),
  }),
];
