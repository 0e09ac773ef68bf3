import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { PassThrough, Readable, Transform, type TransformCallback } from 'node:stream';

/**
 * The one streaming GET inbound files are fetched with (issue 34): the body is handed on as a stream, never
 * buffered; the whole request, body included, must end before a deadline; and at most `maxBytes + 1` bytes are
 * ever read (one more than the limit, so the store sees the file is too large and says so, with the limit).
 *
 * Its errors are `FetchFailed`, whose message is the reason the attachment's row shows: it never holds the URL
 * (Telegram's carries the bot token) or a credential.
 */
export class FetchFailed extends Error {
  constructor(
    message: string,
    /** The provider's HTTP status, when it answered one (a 401 lets a mailbox fetch refresh its token once). */
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface GetOptions {
  headers?: Record<string, string>;
  /** Epoch ms by which the answer, body included, must be complete. */
  deadline: number;
  /** Bytes of body read at most, plus one. */
  maxBytes: number;
  /**
   * Whether a redirect to `to` may be followed (0 redirects when absent). Credentials go with the first request
   * only, never on to where a redirect points (a provider's presigned CDN URL needs none).
   */
  followRedirect?: (to: URL) => boolean;
  /** The budget the deadline came from, named in a timeout's reason (default: the time since this call). */
  timeoutMs?: number;
}

export interface GetAnswer {
  status: number;
  contentType: string | undefined;
  contentLength: number | undefined;
  body: Readable;
}

const MAX_REDIRECTS = 3;
/** What an error answer's body may add to the reason: its first bytes, as text. */
const ERROR_TEXT_BYTES = 300;

const remaining = (deadline: number) => Math.max(1, deadline - Date.now());
const timeoutReason = (deadline: number, started: number, budget?: number) => `no complete answer within ${budget ?? Math.max(0, deadline - started)} ms`;

/** Passes at most `max + 1` bytes, then ends: the consumer sees "more than max" without the rest being read. */
export function byteLimit(max: number, onCut: () => void): Transform {
  let seen = 0;
  let cut = false;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      if (cut) return done();
      const room = max + 1 - seen;
      if (chunk.length >= room) {
        cut = true;
        seen += room;
        this.push(chunk.subarray(0, room));
        this.push(null);
        onCut();
        return done();
      }
      seen += chunk.length;
      done(null, chunk);
    },
  });
}

function request(url: URL, headers: Record<string, string>, deadline: number, reason: () => string): Promise<{ req: http.ClientRequest; res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : url.protocol === 'http:' ? http : undefined;
    if (!client) return reject(new FetchFailed(`the file's address is not http(s) (${url.protocol})`));
    const req = client.request(url, { method: 'GET', headers: { 'user-agent': 'helpdesk-files/1', ...headers } });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new FetchFailed(reason()));
    }, remaining(deadline));
    req.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new FetchFailed(`the provider could not be reached (${err.code ?? 'connection error'})`));
    });
    req.on('response', (res) => {
      clearTimeout(timer);
      resolve({ req, res });
    });
    req.end();
  });
}

/** The first bytes of an error answer, as one line of text (a provider's JSON error says what went wrong). */
async function errorText(res: IncomingMessage, deadline: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  const timer = setTimeout(() => res.destroy(), remaining(deadline));
  try {
    for await (const c of res as AsyncIterable<Buffer>) {
      chunks.push(c);
      size += c.length;
      if (size >= ERROR_TEXT_BYTES) break;
    }
  } catch {
    // What was read is enough.
  } finally {
    clearTimeout(timer);
    res.destroy();
  }
  return Buffer.concat(chunks).toString('utf8').slice(0, ERROR_TEXT_BYTES).replace(/\s+/g, ' ').trim();
}

/**
 * GETs `url`, following redirects the caller allows; answers once the headers of a 2xx arrive, with the body
 * as a bounded stream that fails (FetchFailed) when the deadline passes before it ends. A non-2xx answer is
 * FetchFailed naming the status and the start of the provider's error text.
 */
export async function streamingGet(url: string, o: GetOptions): Promise<GetAnswer> {
  const started = Date.now();
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    throw new FetchFailed('the file\'s address is not a URL');
  }
  const late = () => timeoutReason(o.deadline, started, o.timeoutMs);
  for (let hop = 0; ; hop++) {
    if (Date.now() >= o.deadline) throw new FetchFailed(late());
    // Credentials go only to the URL the caller named; where a redirect points (a provider's CDN) gets none.
    const headers = hop === 0 ? (o.headers ?? {}) : {};
    const { res } = await request(target, headers, o.deadline, late);
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (status >= 300 && status < 400 && location) {
      res.resume();
      let next: URL;
      try {
        next = new URL(location, target);
      } catch {
        throw new FetchFailed(`the provider redirected to an address that is not a URL (HTTP ${status})`);
      }
      if (hop >= MAX_REDIRECTS || !o.followRedirect?.(next)) throw new FetchFailed(`the provider redirected (HTTP ${status}) to a host files are not fetched from`);
      target = next;
      continue;
    }
    if (status < 200 || status >= 300) {
      const text = await errorText(res, o.deadline);
      throw new FetchFailed(`the provider answered HTTP ${status}${text ? `: ${text}` : ''}`, status);
    }
    const declared = Number(res.headers['content-length']);
    const out = new PassThrough();
    const timer = setTimeout(() => {
      const err = new FetchFailed(late());
      res.destroy(err);
      out.destroy(err);
    }, remaining(o.deadline));
    const finish = () => clearTimeout(timer);
    let cut = false;
    const limit = byteLimit(o.maxBytes, () => {
      // Past the limit: the rest is not read (the store reports the file too large, with the limit).
      cut = true;
      finish();
      res.destroy();
    });
    res.on('error', (err) => {
      finish();
      if (!cut) out.destroy(err instanceof FetchFailed ? err : new FetchFailed('the connection was lost while the file was read'));
    });
    // The consumer gave up (the store failed, the job stopped): the download stops with it.
    out.on('close', () => {
      finish();
      if (!res.complete) res.destroy();
    });
    limit.on('end', finish);
    res.pipe(limit).pipe(out);
    return {
      status,
      contentType: typeof res.headers['content-type'] === 'string' ? res.headers['content-type'] : undefined,
      contentLength: Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined,
      body: out,
    };
  }
}

/**
 * A small JSON answer (a provider's file metadata), read whole within the deadline; never more than `maxBytes`
 * (64 KiB unless the caller says: a Gmail message whose small parts came inline is bounded by the file limit).
 */
export async function getJson(url: string, o: Omit<GetOptions, 'maxBytes'> & { maxBytes?: number }): Promise<Record<string, unknown>> {
  const max = o.maxBytes ?? 64 * 1024;
  const answer = await streamingGet(url, { ...o, maxBytes: max });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of answer.body as AsyncIterable<Buffer>) {
    chunks.push(c);
    size += c.length;
  }
  if (size > max) throw new FetchFailed(`the provider's answer about the file is larger than ${max} bytes; it was not read`);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    const v: unknown = JSON.parse(text);
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new FetchFailed('the provider\'s answer about the file is not a JSON object');
}

/**
 * base64 text → bytes, streaming: whitespace (line breaks) is skipped, a chunk's trailing partial quantum is
 * carried to the next, and a character outside the alphabet fails the stream (an attachment is never stored
 * from garbage). Memory stays at one chunk.
 */
export function base64Decoder(alphabet: 'base64' | 'base64url' = 'base64'): Transform {
  let rest = '';
  // Negated classes: one pass, nothing to backtrack. base64url (RFC 4648 §5) is Gmail's, padding optional.
  const outside = alphabet === 'base64' ? /[^A-Za-z0-9+/=]/ : /[^A-Za-z0-9_=-]/;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      const text = rest + chunk.toString('latin1').replace(/[\t\n\r ]+/g, '');
      if (outside.test(text)) return done(new FetchFailed(`the attachment's content is not valid ${alphabet}`));
      const whole = text.length - (text.length % 4);
      rest = text.slice(whole);
      done(null, whole > 0 ? Buffer.from(text.slice(0, whole), alphabet) : undefined);
    },
    flush(done: TransformCallback) {
      done(null, rest.length > 0 ? Buffer.from(rest, alphabet) : undefined);
    },
  });
}

/** A long string as a stream of latin1 chunks, so writing it never copies it whole (base64 text is ASCII). */
export function stringStream(text: string, chunkChars = 256 * 1024): Readable {
  let at = 0;
  return new Readable({
    read() {
      if (at >= text.length) return void this.push(null);
      const end = Math.min(text.length, at + chunkChars);
      this.push(Buffer.from(text.slice(at, end), 'latin1'));
      at = end;
    },
  });
}
