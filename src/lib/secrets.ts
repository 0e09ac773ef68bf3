import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import baseX from 'base-x';

const base62 = baseX('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz');

export const API_KEY_MARK = 'sk_zr_';
const PREFIX_BODY_LENGTH = 10;

export interface MintedSecret {
  secret: string;
  prefix: string;
}

/** `sk_zr_` + base62 of 32 random bytes; the prefix is the only part ever stored in the clear. */
export function mintApiKeySecret(): MintedSecret {
  const body = base62.encode(randomBytes(32));
  const secret = API_KEY_MARK + body;
  return { secret, prefix: apiKeyPrefixOf(secret) };
}

export function apiKeyPrefixOf(secret: string): string {
  return secret.slice(0, API_KEY_MARK.length + PREFIX_BODY_LENGTH);
}

export function hashApiKeySecret(pepper: string, secret: string): Buffer {
  return createHmac('sha256', pepper).update(secret).digest();
}

export function sameHash(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
