import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { Operation } from './operation';

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

/** The answer header of an operation that answers a secret (documented by OpenAPI on its success answer). */
export const NO_STORE = 'no-store';

/**
 * `Cache-Control: no-store` on every answer of the operations that declare `secretInAnswer` (API key creation,
 * webhook endpoint secrets, inbound and visitor tokens, upload tokens, integration webhook URLs): neither the
 * browser nor a proxy keeps the secret. Set before the operation runs, so an idempotent replay of the answer and
 * a refusal carry it too. Mounted before the operations' router, with the same path matching.
 */
export function secretAnswers(ops: readonly Pick<Operation, 'method' | 'path' | 'secretInAnswer'>[], expressPath: (path: string) => string): Router {
  const router = express.Router({ caseSensitive: true, strict: false });
  for (const op of ops) {
    if (!op.secretInAnswer) continue;
    router[op.method](expressPath(op.path), (_req: Request, res: Response, next: NextFunction) => {
      res.setHeader('Cache-Control', NO_STORE);
      next();
    });
  }
  return router;
}
