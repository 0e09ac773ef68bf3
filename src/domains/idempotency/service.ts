import { createHash } from 'node:crypto';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { createFieldSealer } from '../../lib/crypto';
import { refuse } from '../../lib/errors';
import { callerOf, type Principal } from '../identity/principal';
import * as store from './store';

/** The draft's key is an sf-string: printable ASCII, here 1 to 255 characters. */
const KEY = /^[\x20-\x7e]{1,255}$/;

/**
 * What a repeat gets: the first answer's status and either its body as sent (`body`; null for an answer
 * without one) or, for an answer larger than IDEMPOTENCY_MAX_STORED_BYTES, the operation's `pointer` to read it
 * again from.
 */
export type IdempotencyStart = { run: true } | { run: false; status: number; body: string | null; pointer?: Record<string, unknown> };

/** A kept answer, sealed: its bytes, or the operation's pointer to the resource it showed. */
type Kept = { b: string } | { p: Record<string, unknown> };

/**
 * Kept answers are sealed (AES-GCM under ENCRYPTION_KEYS), bound to their workspace, caller (callerOf) and key:
 * an answer can hold a secret shown once (an API key's, a webhook endpoint's), or a customer's message, and the
 * table holds it for a day. Only this service's replay opens it.
 */
export const keptAnswerContext = (tenantId: string, caller: string, key: string) => `idempotency:${tenantId}:${caller}:${key}`;

/** JSON with object keys sorted, so the same request body gives the same fingerprint however it was written. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Safe retries (IETF httpapi Idempotency-Key draft, as Stripe and Zendesk do): the first request with a key
 * runs and its answer is kept for IDEMPOTENCY_TTL_SECONDS; a repeat with the same fingerprint (method, path,
 * body) gets that answer again without running; the same key on another request is refused (422), and a
 * repeat while the first still runs is refused (409). Keys are per workspace and caller (API key, or user
 * for an access token), so one caller cannot replay another's answer.
 */
export function createIdempotencyService(deps: { db: Db; config: ConfigSection<'http' | 'secrets'> }) {
  const { db, config } = deps;
  const scopeOf = callerOf;
  const answers = createFieldSealer(config.ENCRYPTION_KEYS, keptAnswerContext);
  function open(p: Principal, key: string, stored: string | null): Pick<Extract<IdempotencyStart, { run: false }>, 'body' | 'pointer'> {
    if (stored === null) return { body: null };
    // Answers kept before issue 32 were stored as sent; they expire within IDEMPOTENCY_TTL_SECONDS.
    if (!answers.isSealed(stored)) return { body: stored };
    const kept = JSON.parse(answers.open(p.tenantId, scopeOf(p), key, stored)) as Kept;
    return 'p' in kept ? { body: null, pointer: kept.p } : { body: kept.b };
  }

  return {
    /** Refuses a malformed key (400) before anything runs. */
    check(key: string): void {
      if (!KEY.test(key)) {
        throw refuse('idempotency_key_invalid', 'Idempotency-Key must be 1 to 255 printable ASCII characters.', [{ path: 'header.Idempotency-Key', message: 'must be 1 to 255 printable ASCII characters' }]);
      }
    },

    fingerprint: (method: string, path: string, body: unknown) =>
      createHash('sha256').update(`${method.toUpperCase()} ${path}\n`).update(canonical(body ?? null)).digest('base64url'),

    /** Claims the key, or says what a repeat gets: the stored answer, or a refusal. */
    async start(p: Principal, key: string, fingerprint: string): Promise<IdempotencyStart> {
      const scope = scopeOf(p);
      if (await store.claimKey(db, p.tenantId, scope, key, fingerprint, config.IDEMPOTENCY_TTL_SECONDS)) return { run: true };
      const row = await store.getKey(db, p.tenantId, scope, key);
      // Expired between the two statements: claim it again (the next try wins or sees a live row).
      if (!row) return (await store.claimKey(db, p.tenantId, scope, key, fingerprint, config.IDEMPOTENCY_TTL_SECONDS)) ? { run: true } : this.start(p, key, fingerprint);
      if (row.fingerprint !== fingerprint) {
        throw refuse('idempotency_key_reused', 'This Idempotency-Key was used for a different request; use a new key for a new request.');
      }
      if (row.state === 'running') throw refuse('idempotency_key_in_use', 'A request with this Idempotency-Key is still being processed; retry after it answers.');
      return { run: false, status: row.response_status!, ...open(p, key, row.response_body) };
    },

    /** The most bytes of an answer kept whole; a larger one is kept as the operation's pointer, if it has one. */
    maxStoredBytes: config.IDEMPOTENCY_MAX_STORED_BYTES,

    /** Keeps the answer for replay, sealed: its bytes, or (for a large answer) a pointer to read it again from. */
    finish: (p: Principal, key: string, status: number, answer: { body: string | null } | { pointer: Record<string, unknown> }) => {
      const kept: Kept | null = 'pointer' in answer ? { p: answer.pointer } : answer.body === null ? null : { b: answer.body };
      return store.completeKey(db, p.tenantId, scopeOf(p), key, status, kept === null ? null : answers.seal(p.tenantId, scopeOf(p), key, JSON.stringify(kept)));
    },

    /**
     * The request ended in a refusal or a failure: nothing it would have done was kept, so the key is freed
     * and a retry with it runs again.
     */
    release: (p: Principal, key: string) => store.releaseKey(db, p.tenantId, scopeOf(p), key),
  };
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;
