import type { NextFunction, Request, RequestHandler, Response } from 'express';

/** How long a browser may cache a preflight answer. */
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/** What a preflight from an allowed origin is told it may send. */
interface Preflight {
  methods: string;
  headers: string;
  /** Response headers the page may read (beyond the CORS-safelisted ones). */
  expose?: string;
}

/**
 * The rule every browser-facing route follows: the origins the named connection allows get CORS headers, every
 * other origin gets none (so the browser refuses to let its page read or send). `keyOf` finds what names the
 * connection in the request; without one, or without an Origin, nothing is added.
 */
function connectionCors<K>(keyOf: (req: Request) => K | undefined, allowed: (key: K, origin: string) => Promise<boolean>, preflight: Preflight): RequestHandler {
  return async (req: Request, res: Response, next: NextFunction) => {
    const origin = req.get('origin');
    const key = keyOf(req);
    if (origin === undefined || key === undefined) {
      if (req.method === 'OPTIONS') return void res.status(204).end();
      return next();
    }
    let ok = false;
    try {
      ok = await allowed(key, origin);
    } catch {
      ok = false;
    }
    res.setHeader('Vary', 'Origin');
    if (ok) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      if (preflight.expose) res.setHeader('Access-Control-Expose-Headers', preflight.expose);
    }
    if (req.method === 'OPTIONS') {
      if (ok) {
        res.setHeader('Access-Control-Allow-Methods', preflight.methods);
        res.setHeader('Access-Control-Allow-Headers', preflight.headers);
        res.setHeader('Access-Control-Max-Age', String(PREFLIGHT_MAX_AGE_SECONDS));
      }
      return void res.status(204).end();
    }
    next();
  };
}

const queryString = (req: Request, name: string): string | undefined => {
  const v = req.query[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
};

/**
 * CORS for web chat intake (`POST /v1/ingest/web_chat?token=…`), the one route a browser widget calls: the
 * connection's `allowed_origins` may post from a browser, every other origin gets no CORS headers (so the
 * browser refuses to let its page read or send). The connection is found by the `?token=` (a preflight has
 * no body, so the `tenant_id` form is for server-side relays only).
 */
export function webChatCors(allowed: (token: string, origin: string) => Promise<boolean>): RequestHandler {
  return connectionCors((req) => queryString(req, 'token'), allowed, { methods: 'POST', headers: 'Content-Type, Idempotency-Key' });
}

/** What names the web chat connection on a visitor route: its inbound token, or a visitor token. */
export type WebChatCorsKey = { token: string } | { visitorToken: string };

/**
 * CORS for the web chat visitor routes (`/v1/web-chat/…`, issue 33), by intake's rule: the connection's
 * `allowed_origins` only. A preflight carries no Authorization, so the connection is named by what the URL
 * holds: `?token=` (the inbound token the widget opened its session with) or `?visitor_token=` (the stream an
 * EventSource opens); the request itself may name it by its `Authorization: Bearer` visitor token instead.
 */
export function webChatVisitorCors(allowed: (key: WebChatCorsKey, origin: string) => Promise<boolean>): RequestHandler {
  const keyOf = (req: Request): WebChatCorsKey | undefined => {
    const token = queryString(req, 'token');
    if (token !== undefined) return { token };
    const visitorToken = queryString(req, 'visitor_token') ?? /^Bearer\s+(\S+)$/i.exec(req.get('authorization') ?? '')?.[1];
    return visitorToken !== undefined ? { visitorToken } : undefined;
  };
  // Range and the download's own headers: a widget may fetch a visitor's file (or part of it) and name it.
  return connectionCors(keyOf, allowed, {
    methods: 'GET, POST',
    headers: 'Authorization, Content-Type, Last-Event-ID, Range',
    expose: 'Retry-After, X-Request-Id, Content-Disposition, Content-Range',
  });
}
