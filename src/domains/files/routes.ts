import { z } from 'zod';
import { defineOperation } from '../../define-operation';
import { DOWNLOAD_HEADERS, downloadAnswer, fileHeaders } from '../../http/download';
import type { HandlerResult } from '../../http/result';
import { parseRange } from './range';
import { attachmentDetail, attachmentIdParams, EXAMPLE_ATTACHMENT, UPLOAD_FORM, uploaded } from './schemas';

/**
 * Uploads and downloads (issue 34), under the `tickets` scope tag: files are part of replies and notes.
 *
 * A refused upload (too large, over the quota, malformed) is answered while the client may still be sending:
 * the answer then says `Connection: close` and the rest of the body is not read (the router sets it), so a
 * 1 GiB body past a 25 MiB limit costs 25 MiB of reading, not 1 GiB.
 */

const write = { floor: 'editor', tag: 'tickets', action: 'write' } as const;
const read = { floor: 'viewer', tag: 'tickets', action: 'read' } as const;


export const fileOperations = [
  defineOperation({
    id: 'upload_file',
    method: 'post',
    path: '/v1/uploads',
    summary: 'Upload a file to attach to a reply or note (multipart/form-data, the part named file)',
    description:
      'The file is streamed into the file store as it arrives: at most FILES_MAX_BYTES (25 MiB by default; larger is `413 file_too_large`, answered as soon as the limit is passed), within the workspace\'s FILES_WORKSPACE_QUOTA_BYTES (`413 files_quota_exceeded`, and `files.quota_reached` in the event log). Its name is sanitised and its content type sniffed from its bytes. Name the answer\'s `upload_token` in a reply or note (`attachments: [token]`) within the hour; an upload no write used is removed. Takes no Idempotency-Key: an unused upload costs nothing after its hour.',
    access: write,
    streamBody: { mediaType: 'multipart/form-data', schema: UPLOAD_FORM, description: 'A form with the file in the part named `file` (other parts are ignored).' },
    secretInAnswer: true,
    response: { status: 201, description: 'The upload: its token (shown here only), the file as stored, and when the token expires', schema: uploaded },
    errors: ['file_too_large', 'files_quota_exceeded'],
    example: { response: { upload_token: 'upl_Xq3v9Lw2Rk7Tn5Bm8Hc4Jd6Fg1Ys0Pa2Ze4Ui6Oq8Wt', attachment: EXAMPLE_ATTACHMENT, expires_at: '2025-03-14T10:41:53.412Z' } },
    handler: async ({ principal, stream }, s) => ({ status: 201, body: await s.files.upload(principal, stream!) }),
  }),
  defineOperation({
    id: 'get_attachment',
    method: 'get',
    path: '/v1/attachments/{attachment_id}',
    summary: "A file's metadata: name, sniffed type, size, sha256, state (stored, skipped, failed, infected, pending) and where it is attached",
    description: "Reach follows the ticket: every member who can read the ticket reads its files; an upload not yet used only its uploader. Another workspace's id is 404.",
    access: read,
    params: attachmentIdParams,
    response: { status: 200, description: 'The file', schema: attachmentDetail },
    handler: async ({ principal, params }, s) => ({ body: await s.files.get(principal, params.attachment_id) }),
  }),
  defineOperation({
    id: 'get_attachment_content',
    method: 'get',
    path: '/v1/attachments/{attachment_id}/content',
    summary: "A file's bytes, as a download (Range requests supported)",
    description:
      "Sent with its sniffed type (HTML, SVG, XML and scripts as application/octet-stream), `Content-Disposition: attachment` with its name, `X-Content-Type-Options: nosniff` and `Content-Security-Policy: sandbox`. One `Range: bytes=…` is answered 206 with `Content-Range` (a range past the end is `416 range_not_satisfiable`; several ranges get the whole file). Only a stored file is served: pending, skipped, failed and quarantined (infected) files are `409 attachment_unavailable`. With the S3 store and FILES_S3_PRESIGN_SECONDS set, the answer is a 302 to a short-lived presigned URL instead.",
    access: read,
    params: attachmentIdParams,
    readsHeaders: ['range', 'if-range'],
    response: { status: 200, description: 'The bytes', binary: true },
    alsoAnswers: [
      { status: 206, description: 'The range asked for (Content-Range says which bytes of how many)', example: null },
      { status: 302, description: 'S3 store with presigned downloads: the bytes are at Location, for FILES_S3_PRESIGN_SECONDS', example: null },
    ],
    errors: ['attachment_unavailable', 'range_not_satisfiable'],
    handler: async ({ principal, params, headers }, s): Promise<HandlerResult> =>
      downloadAnswer(await s.files.download(principal, params.attachment_id, ({ size, etag }) => parseRange(headers?.range, size, headers?.['if-range'], etag))),
  }),
  defineOperation({
    id: 'get_linked_file',
    method: 'get',
    path: '/v1/files/{file_token}',
    summary: 'A file named by a signed, short-lived link (how Twilio fetches the media of an MMS reply)',
    description:
      "No credential: the token itself names the workspace and the file, signed with the service's key, and expires (30 minutes after the reply's send began). An altered, expired or unknown token, or a file no longer stored, is 404 file_link_invalid. Made for a reply's MediaUrl when PUBLIC_BASE_URL is set.",
    access: 'public',
    chargeRefusals: true,
    params: z.object({ file_token: z.string().min(1).max(600).meta({ examples: ['eyJ0IjoiYjNlMWYwYTIiLCJhIjoiYzE5In0.Qm9yZWFsLWV4YW1wbGUtc2lnbmF0dXJl'] }) }),
    response: { status: 200, description: 'The bytes', binary: true },
    errors: ['file_link_invalid'],
    handler: async ({ params }, s): Promise<HandlerResult> => {
      const got = await s.files.openLink(params.file_token);
      return {
        status: 200,
        headers: {
          ...DOWNLOAD_HEADERS,
          'Cache-Control': 'no-store',
          ...fileHeaders(got.file),
          'Content-Length': String(got.size),
        },
        bytes: got.body,
      };
    },
  }),
];
