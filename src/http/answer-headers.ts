import type { NextFunction, Request, Response } from 'express';

/**
 * Headers every answer carries, whatever answers it (an operation, a refusal, 404/405, the docs, the probes):
 * `X-Content-Type-Options: nosniff`, so a browser never runs an answer as another type than the one it is sent
 * as (a JSON body holding `<script>`, a downloaded file). Mounted first, before anything can answer.
 */
export function baseAnswerHeaders() {
  return (_req: Request, res: Response, next: NextFunction) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  };
}

/**
 * The answer header of an operation that answers a secret (`secretInAnswer`; documented by OpenAPI on its success
 * answer): set by the router first thing for that route, so a refusal and an idempotent replay carry it too.
 */
export const NO_STORE = 'no-store';
