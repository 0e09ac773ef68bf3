import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signed, self-contained link tokens (file links, customer export links): base64url of a JSON object of claims with
 * `e` its expiry (unix seconds), a dot, and the HMAC-SHA256 of that text under `key` with the token's purpose in front,
 * so a token of one purpose never opens another's door. Nothing is stored: the signature is the credential.
 */
export function signedTokens(key: Buffer, purpose: string) {
  const mac = (payload: string) => createHmac('sha256', key).update(`${purpose}\n${payload}`).digest();
  return {
    /** A token carrying these claims (with `e`, the expiry in unix seconds). */
    sign(claims: Record<string, unknown> & { e: number }): string {
      const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
      return `${payload}.${mac(payload).toString('base64url')}`;
    },
    /** The claims of a token signed here and not expired, or undefined (altered, foreign, expired, malformed). */
    open(token: string): Record<string, unknown> | undefined {
      const dot = token.indexOf('.');
      if (dot <= 0) return undefined;
      const payload = token.slice(0, dot);
      const given = Buffer.from(token.slice(dot + 1), 'base64url');
      const want = mac(payload);
      if (given.length !== want.length || !timingSafeEqual(given, want)) return undefined;
      let claims: unknown;
      try {
        claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      } catch {
        return undefined;
      }
      if (claims === null || typeof claims !== 'object' || Array.isArray(claims)) return undefined;
      const e = (claims as { e?: unknown }).e;
      if (typeof e !== 'number' || e * 1000 <= Date.now()) return undefined;
      return claims as Record<string, unknown>;
    },
  };
}
