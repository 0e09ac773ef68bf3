import type { Operation } from '../operation';
import type { Exchange } from './context';
import type { Input } from './input';
import { readAnswer } from './json-answer';

/** Authenticated writes a retry can repeat: each may carry an Idempotency-Key (see the idempotency domain). */
// A streamed body (an upload) cannot be fingerprinted without reading it whole, so it takes none.
export const takesIdempotencyKey = (op: Pick<Operation, 'access' | 'method' | 'streamBody'>) => op.access !== 'public' && !op.streamBody && (op.method === 'post' || op.method === 'patch');

/** The request's Idempotency-Key, once started: the answer is kept under it (`keep`) or the key is freed (`release`). */
export interface Idempotency {
  key: string | undefined;
  /** A key seen before: its first answer was sent again, and nothing runs. */
  replayed: boolean;
  keep(status: number, answer: { body: string | null } | { pointer: Record<string, unknown> }): Promise<void>;
  release(): Promise<void>;
}

/**
 * Stage 4, idempotency: a key seen before answers what its first request answered (or, for a large first answer
 * kept as a pointer, the resource it showed as it now stands), without running again; a new key is taken.
 */
export async function beginIdempotency(x: Exchange, input: Input): Promise<Idempotency> {
  const { op, services, req, res, principal } = x;
  const key = takesIdempotencyKey(op) ? req.get('idempotency-key') : undefined;
  // The answer is kept for replay. If that fails the answer still goes out (the work is done); the key then stays
  // in use until it expires, so a retry is refused (409) rather than run twice.
  const keep: Idempotency['keep'] = async (status, answer) => {
    if (key === undefined) return;
    await services.idempotency.finish(principal, key, status, answer).catch((err: unknown) => req.log.warn({ err_code: 'idempotency_not_kept', cause: (err as Error)?.message }, 'idempotent answer not kept'));
  };
  // A refusal or a failure wrote nothing to keep: the key is free for the retry.
  const release = async () => {
    if (key !== undefined) await services.idempotency.release(principal, key).catch(() => {});
  };
  const state = { key, replayed: false, keep, release };
  if (key === undefined) return state;
  services.idempotency.check(key);
  const start = await services.idempotency.start(principal, key, services.idempotency.fingerprint(req.method, req.path, input.sent));
  if (start.run) return state;
  res.setHeader('Idempotent-Replayed', 'true');
  if (start.pointer) {
    if (!op.replay) throw new Error(`${op.id}: a kept pointer, but the operation cannot read one`);
    res.status(start.status).type('application/json').send(readAnswer(op.response.schema, await op.replay.read({ principal, pointer: start.pointer }, services)));
  } else if (start.body === null) res.status(start.status).end();
  else res.status(start.status).type('application/json').send(start.body);
  return { ...state, replayed: true };
}
