import type { NextFunction, Request, RequestHandler, Response } from 'express';

/** How long a browser may cache a preflight answer. */
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/**
 * CORS for web chat intake (`POST /v1/ingest/web_chat?token=…`), the one route a browser widget calls: the
 * connection's `allowed_origins` may post from a browser, every other origin gets no CORS headers (so the
 * browser refuses to let its page read or send). The connection is found by the `?token=` (a preflight has
 * no body, so the `tenant_id` form is for server-side relays only).
 */
export function webChatCors(allowed: (token: string, origin: string) => Promise<boolean>): RequestHandler {
  return async (req: Request, res: Response, next: NextFunction) => {
    const origin = req.get('origin');
    const token = req.query.token;
    if (origin === undefined || typeof token !== 'string' || token === '') {
      if (req.method === 'OPTIONS') return void res.status(204).end();
      return next();
    }
    let ok = false;
    try {
      ok = await allowed(token, origin);
    } catch {
      ok = false;
    }
    res.setHeader('Vary', 'Origin');
    if (ok) res.setHeader('Access-Control-Allow-Origin', origin);
    if (req.method === 'OPTIONS') {
      if (ok) {
        res.setHeader('Access-Control-Allow-Methods', 'POST');
        res.setHeader('Access-Control-Allow-Headers', 'Content-Type, Idempotency-Key');
        res.setHeader('Access-Control-Max-Age', String(PREFLIGHT_MAX_AGE_SECONDS));
      }
      return void res.status(204).end();
    }
    next();
  };
}
