import type { Readable } from 'node:stream';
import type { AttachmentRow } from '../db/types';
import { attachmentDisposition } from '../domains/files/names';
import { servedContentType } from '../domains/files/sniff';
import type { HandlerResult } from './result';

/*
 * A download as HTTP (issue 34), the same for every route that serves a file (agents' GET
 * /v1/attachments/{id}/content and GET /v1/files/{file_token}, a web chat visitor's GET
 * /v1/web-chat/attachments/{id}/content). Headers and statuses are the HTTP side's (issue 35: a domain answers
 * what to serve, the routes and src/http say how), so this lives here rather than in the files domain, and both
 * domains' routes.ts use it.
 */

/** Save it, never render or sniff it, and run nothing of it if it is rendered anyway. */
export const DOWNLOAD_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': "sandbox; default-src 'none'",
  'Cache-Control': 'private, no-cache',
};

/** What the files service's `serve` answers: a presigned URL (S3), or the bytes (a range of them). */
export type Served =
  | { readonly redirect: string; readonly file: AttachmentRow; readonly etag: string }
  | { readonly body: Readable; readonly size: number; readonly range: { start: number; end: number } | undefined; readonly file: AttachmentRow; readonly etag: string };

/** The headers that say what a served file is: its sniffed type and its name, as an attachment. */
export const fileHeaders = (file: Pick<AttachmentRow, 'content_type' | 'name'>) => ({
  'Content-Type': servedContentType(file.content_type),
  'Content-Disposition': attachmentDisposition(file.name),
});

/** 302 to the presigned URL, 206 with Content-Range for a range, else 200 with the whole file. */
export function downloadAnswer(got: Served): HandlerResult {
  if ('redirect' in got) return { status: 302, headers: { Location: got.redirect, 'Cache-Control': 'no-store' } };
  const head = { ...DOWNLOAD_HEADERS, ...fileHeaders(got.file), 'Accept-Ranges': 'bytes', ETag: got.etag };
  if (got.range) {
    return {
      status: 206,
      headers: { ...head, 'Content-Range': `bytes ${got.range.start}-${got.range.end}/${got.size}`, 'Content-Length': String(got.range.end - got.range.start + 1) },
      bytes: got.body,
    };
  }
  return { status: 200, headers: { ...head, 'Content-Length': String(got.size) }, bytes: got.body };
}
