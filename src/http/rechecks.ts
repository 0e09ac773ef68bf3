import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Principal } from '../domains/identity/principal';

/**
 * Live re-checks of a credential, shared by everything in this process that holds the same one open (the event
 * streams of one API key, say): a caller asks for a check that started after a moment (`notBefore`,
 * performance.now() time) and gets one in flight or finished that did, or starts one. Two hundred streams of one
 * key that read the same events at once cost one database read to re-check, not two hundred.
 */
export function createRechecks(authenticate: (authorization: string | undefined) => Promise<Principal>) {
  const checks = new LRUCache<string, { startedAt: number; result: Promise<Principal> }>({ max: 10_000, ttl: 60_000 });
  return (authorization: string | undefined, notBefore: number): Promise<Principal> => {
    const key = createHash('sha256').update(authorization ?? '').digest('base64url');
    const held = checks.get(key);
    if (held && held.startedAt > notBefore) return held.result;
    const startedAt = performance.now();
    const result = authenticate(authorization);
    // A rejection is the answer for everyone who shares it; it must not go unhandled while nobody awaits it.
    result.catch(() => {});
    checks.set(key, { startedAt, result });
    return result;
  };
}
