import type { VersionCondition } from '../../lib/errors';
import type { HandlerResult } from '../operation';
import type { createRechecks } from '../rechecks';
import type { Exchange } from './context';
import { authorize } from './guard';
import type { Idempotency } from './idempotency';
import type { Input } from './input';

/** `If-Match: "3", W/"4"` → ['3'] (a weak tag never matches a write); `*` → '*'. */
export function parseIfMatch(header: string): VersionCondition {
  if (header.trim() === '*') return '*';
  return header
    .split(',')
    .map((t) => t.trim())
    .filter((t) => /^"[^"]*"$/.test(t))
    .map((t) => t.slice(1, -1));
}

/**
 * Stage 5, the handler: the operation's own work, given exactly what it declared (headers it reads, If-Match,
 * Last-Event-ID, a live re-check of the credential for what outlives the request). A failure frees the
 * idempotency key; a caller's write sends its own later reads to the primary until a replica has it.
 */
export async function runHandler(x: Exchange, input: Input, idem: Idempotency, rechecks: ReturnType<typeof createRechecks>): Promise<HandlerResult> {
  const { op, services, req, principal } = x;
  let result: HandlerResult;
  try {
    result = await op.handler(
      {
        principal,
        params: input.params,
        query: input.query,
        body: input.body,
        requestId: String(req.id),
        ...(input.raw ? { raw: input.raw } : {}),
        ...(input.stream ? { stream: input.stream } : {}),
        ...(op.versioned && req.get('if-match') !== undefined ? { ifMatch: parseIfMatch(req.get('if-match')!) } : {}),
        ...(op.eventStream && req.get('last-event-id') !== undefined ? { lastEventId: req.get('last-event-id')! } : {}),
        ...(op.readsHeaders ? { headers: Object.fromEntries(op.readsHeaders.map((h) => [h.toLowerCase(), req.get(h)])) } : {}),
        ...(op.eventStream && op.access !== 'public'
          ? {
              reauthorize: async (notBefore: number) => {
                const now = await rechecks(req.headers.authorization, notBefore);
                authorize(op, now);
                return now;
              },
            }
          : {}),
      },
      services,
    );
  } catch (err) {
    await idem.release();
    throw err;
  }
  if (op.method !== 'get' && op.access !== 'public') await services.reads.wrote(principal);
  return result;
}
