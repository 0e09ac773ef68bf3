/**
 * An opt-in recorder of the answers a test app gives (issue 35, the drift test): with OPENAPI_DRIFT_RECORD set to a
 * file, every answer's method, path, status, media type and JSON body is appended to it as one JSON line, whichever
 * test made the request. test/openapi-drift.test.ts validates such a file against the OpenAPI document:
 *
 *   OPENAPI_DRIFT_RECORD=/tmp/answers.jsonl npx jest                      # record the suite's traffic
 *   OPENAPI_DRIFT_CHECK=/tmp/answers.jsonl npx jest test/openapi-drift.test.ts   # and check it
 *
 * It wraps the app's request listener (not a middleware inside it), so it sees every answer as sent, the
 * guard's refusals and the body parser's included. Without the variable, the app is returned untouched.
 */
import { appendFileSync } from 'node:fs';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';

export const RECORD_ENV = 'OPENAPI_DRIFT_RECORD';

export interface RecordedAnswer {
  method: string;
  /** The request path, without its query. */
  path: string;
  /** The request target as sent (query included), for the report. */
  url: string;
  status: number;
  /** The answer's media type, without parameters ("" when it sent none). */
  type: string;
  /** The parsed body of a JSON answer; absent for other media types and empty bodies. */
  body?: unknown;
  /** True when a JSON body could not be kept (over the size bound) or parsed. */
  unreadable?: boolean;
}

/** Bodies larger than this are recorded as unreadable rather than kept (no answer of the suite comes close). */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

const isJson = (type: string) => type === 'application/json' || type.endsWith('+json');

/** `app` itself, or, when OPENAPI_DRIFT_RECORD names a file, `app` with every answer appended to that file. */
export function recordingListener(app: RequestListener, file = process.env[RECORD_ENV]): RequestListener {
  if (!file) return app;
  return (req: IncomingMessage, res: ServerResponse) => {
    // As sent: routers rewrite req.url while they dispatch.
    const url = req.url ?? '';
    const chunks: Buffer[] = [];
    let size = 0;
    const keep = (chunk: unknown, encoding?: unknown) => {
      if (chunk === undefined || chunk === null || typeof chunk === 'function' || size > MAX_BODY_BYTES) return;
      const buf = Buffer.isBuffer(chunk) ? chunk : typeof chunk === 'string' ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8') : Buffer.from(chunk as Uint8Array);
      size += buf.length;
      if (size <= MAX_BODY_BYTES) chunks.push(buf);
    };
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
    res.write = ((...args: unknown[]) => {
      if (isJson(mediaType(res))) keep(args[0], args[1]);
      return write(...args);
    }) as typeof res.write;
    res.end = ((...args: unknown[]) => {
      if (isJson(mediaType(res))) keep(args[0], args[1]);
      return end(...args);
    }) as typeof res.end;
    res.once('finish', () => {
      const type = mediaType(res);
      const record: RecordedAnswer = { method: String(req.method).toLowerCase(), path: url.split('?')[0]!, url, status: res.statusCode, type };
      if (isJson(type) && req.method !== 'HEAD' && size > 0) {
        try {
          if (size > MAX_BODY_BYTES) throw new Error('too large');
          record.body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          record.unreadable = true;
        }
      }
      try {
        appendFileSync(file, `${JSON.stringify(record)}\n`);
      } catch {
        // A recorder must never fail the request it watches.
      }
    });
    app(req, res);
  };
}

function mediaType(res: ServerResponse): string {
  const header = res.getHeader('content-type');
  return String(Array.isArray(header) ? header[0] : (header ?? '')).split(';')[0]!.trim().toLowerCase();
}
