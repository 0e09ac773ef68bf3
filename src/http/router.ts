import type { NextFunction, Request, Response, Router } from 'express';
import type { SpooledString } from '../lib/spooled-json';
import { NO_STORE } from './answer-headers';
import type { Operation } from './operation';
import { createRechecks } from './rechecks';
import { releaseSpooled, type SpoolStore } from './spooled-body';
import { sendAnswer } from './stages/answer';
import type { RouterServices } from './stages/context';
import { guard } from './stages/guard';
import { runHandler } from './stages/handler';
import { beginIdempotency } from './stages/idempotency';
import { bodyReaders, readInput } from './stages/input';
import { chargeLimits } from './stages/limits';

export type { RouterServices } from './stages/context';
export { takesIdempotencyKey } from './stages/idempotency';
export { parseIfMatch } from './stages/handler';

export const expressPath = (path: string) => path.replace(/\{([^{}]+)\}/g, ':$1');

/**
 * Every operation of the table as one Express route, whose request goes through the stages in src/http/stages/,
 * one file each: guard → limits → input → idempotency → handler → answer. A cross-cutting feature is a stage (or a
 * part of one), not a branch here. A refusal from any stage is charged to the client's address when the operation
 * is public intake; a refused upload still arriving closes its connection rather than reading the rest.
 */
export function mountOperations<S extends RouterServices>(router: Router, ops: Operation<S>[], services: S, opts: { bodyLimit: number; spool?: SpoolStore }): void {
  const readers = bodyReaders(opts);
  // What outlives its request (an event stream) checks its credential again; streams of one credential share it.
  const rechecks = createRechecks((authorization) => services.identity.authenticate(authorization));
  for (const op of ops) {
    router[op.method](expressPath(op.path), async (req: Request, res: Response, next: NextFunction) => {
      res.locals.operationId = op.id;
      // Neither a browser nor a proxy keeps an answer holding a secret, nor a refusal or replay of it.
      if (op.secretInAnswer) res.setHeader('Cache-Control', NO_STORE);
      try {
        const x = { op: op as Operation<RouterServices>, services, req, res, principal: await guard({ op: op as Operation<RouterServices>, services, req, res }) };
        await chargeLimits(x);
        const input = await readInput(x, readers);
        const idem = await beginIdempotency(x, input);
        if (idem.replayed) return;
        await sendAnswer(x, await runHandler(x, input, idem, rechecks), idem);
      } catch (err) {
        if (op.streamBody && !req.complete && !res.headersSent) res.setHeader('Connection', 'close');
        next(op.chargeRefusals ? await services.limits.refusals.charge(req.ip, err) : err);
      } finally {
        await releaseSpooled(res.locals.spooled as SpooledString[] | undefined, opts.spool, req.log);
      }
    });
  }
}
