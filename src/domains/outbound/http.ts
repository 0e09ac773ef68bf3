import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';

/**
 * The one HTTP request a send is, told apart by what it means for a retry. A send may be retried only when
 * the provider cannot have it: the connection never opened (refused, no such host, connect timeout). Once the
 * request may have left — the socket connected — a missing answer (timeout, reset) leaves it open whether the
 * provider took the message, and retrying could make the customer read the reply twice.
 *
 * The provider base URLs are operator settings, never caller input, so no address guard applies here.
 */
export interface ProviderAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** The connection never opened: the provider has nothing, a retry cannot send twice. */
export class NotReached extends Error {}
/** The request may have reached the provider and no answer came: whether it sent is unknown. */
export class NoAnswer extends Error {}

// A provider's answer to a send is small; anything past this is cut (the JSON parse then fails as garbled).
const MAX_ANSWER_BYTES = 1024 * 1024;

export function providerRequest(
  url: string,
  init: { method: 'POST' | 'GET'; headers: Record<string, string>; body?: string | { contentType: string; length: number; open(): import('node:stream').Readable }; timeoutMs: number },
): Promise<ProviderAnswer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const client = target.protocol === 'https:' ? https : http;
    let connected = false;
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    // A streamed body (a multipart upload of a stored file) goes with its known length, read as it is sent.
    const streamed = init.body !== undefined && typeof init.body !== 'string' ? init.body : undefined;
    const body = typeof init.body === 'string' ? Buffer.from(init.body) : undefined;
    const req = client.request(target, {
      method: init.method,
      headers: {
        ...init.headers,
        ...(body ? { 'content-length': String(body.length) } : {}),
        ...(streamed ? { 'content-type': streamed.contentType, 'content-length': String(streamed.length) } : {}),
      },
    });
    const timer = setTimeout(() => {
      req.destroy();
      settle(() => reject(connected ? new NoAnswer(`no answer within ${init.timeoutMs} ms`) : new NotReached(`could not connect within ${init.timeoutMs} ms`)));
    }, init.timeoutMs);
    req.on('socket', (socket) => {
      // A kept-alive socket is already connected: the request may leave at once.
      if (!socket.connecting) connected = true;
      else socket.once('connect', () => (connected = true));
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      // Never the URL in the message: Telegram's holds the bot token.
      const what = err.code ?? 'connection error';
      settle(() => reject(connected ? new NoAnswer(`connection lost before an answer (${what})`) : new NotReached(`could not connect (${what})`)));
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size <= MAX_ANSWER_BYTES) chunks.push(c);
      });
      res.on('error', () => settle(() => reject(new NoAnswer('connection lost while reading the answer'))));
      res.on('end', () => settle(() => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') })));
    });
    if (streamed) {
      const source = streamed.open();
      // The file could not be read (the store failed): the request is cut short; the provider has only part of it.
      source.on('error', (err) => {
        req.destroy(err);
      });
      source.pipe(req);
    } else req.end(body);
  });
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  const trimmed = v.trim();
  if (/^\d{1,9}$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** A JSON answer as an object; {} when it is not one (an HTML error page from a proxy, garbage). */
export function jsonOf(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
