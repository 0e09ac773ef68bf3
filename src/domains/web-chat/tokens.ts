import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { createFieldSealer, type EncryptionKey } from '../../lib/crypto';
import { isUuid } from '../../lib/ids';
import { SESSION_VISITOR_PREFIX } from '../channels/adapters/web-chat';

/**
 * Web chat visitor tokens and cursors (issue 33). Pure: no I/O.
 *
 * A visitor token is stateless and signed: `wvt1.<key id>.<payload>.<mac>`, the payload base64url JSON
 * `{t: tenant id, v: visitor id, e: expiry (unix seconds), f: fingerprint}` and the mac HMAC-SHA-256 over
 * everything before it, under a key derived (HKDF) from one of the deployment's ENCRYPTION_KEYS: the last key
 * signs, every listed key verifies, so keys rotate as ENCRYPTION_KEYS does (append one; drop the old one once
 * its tokens have expired). The fingerprint is a MAC of the web chat connection's inbound-token hash at
 * issue: the service compares it with the connection's current hash, so rotating the inbound token ends every
 * session of the connection, with nothing stored per session.
 */

const MARK = 'wvt1';
/** Longer than any token this service mints by far; anything longer is refused unread. */
const MAX_TOKEN_CHARS = 1024;

export interface VisitorClaims {
  kid: string;
  tenantId: string;
  visitorId: string;
  /** Unix milliseconds. */
  expiresAt: number;
  fingerprint: string;
}

const payload = z.strictObject({
  t: z.string().refine(isUuid),
  v: z.string().min(1).max(64).startsWith(SESSION_VISITOR_PREFIX),
  e: z.number().int().positive(),
  f: z.string().min(1).max(64),
});

/** A fresh visitor id: the reserved prefix and 128 random bits. */
export const newVisitorId = () => `${SESSION_VISITOR_PREFIX}${randomBytes(16).toString('base64url')}`;

/**
 * Where a visitor's reader resumes (GET /v1/web-chat/messages `after`, and the stream's Last-Event-ID):
 * `m`, the timeline sequence of the last message delivered ('0': none), and `p`, when set, the position in the
 * workspace's event log through which every message of the visitor has been delivered. Both are numbers the
 * whole service shares, so the cursor is sealed (AES-256-GCM, bound to the workspace and the visitor): opaque,
 * unforgeable, and useless to any other visitor.
 */
export interface Cursor {
  m: string;
  p?: string;
}

const bigintText = z.string().max(19).regex(/^\d+$/);
const cursorWire = z.strictObject({ m: bigintText, p: bigintText.optional() });
/** Sealed cursors are about 100 characters; a longer `after` is refused unread. */
export const MAX_CURSOR_CHARS = 512;

/** A cursor is sealed for one visitor of one workspace. */
export const visitorCursorContext = (tenantId: string, visitorId: string) => `web-chat-cursor:${tenantId}:${visitorId}`;

export function createVisitorTokens(keys: EncryptionKey[]) {
  if (keys.length === 0) throw new Error('at least one encryption key is required');
  const derived = new Map(keys.map((k) => [k.id, Buffer.from(hkdfSync('sha256', k.key, 'helpdesk', 'web chat visitor token v1', 32))]));
  const current = keys[keys.length - 1]!;
  const cursors = createFieldSealer(keys, visitorCursorContext);
  const mac = (key: Buffer, text: string) => createHmac('sha256', key).update(text).digest();

  /** The fingerprint of a connection's inbound-token hash under key `kid` (undefined: no such key). */
  const fingerprint = (kid: string, tokenHash: Buffer): string | undefined => {
    const key = derived.get(kid);
    return key ? mac(key, `fingerprint|${tokenHash.toString('hex')}`).subarray(0, 16).toString('base64url') : undefined;
  };

  return {
    fingerprint,

    /** A token for the visitor, bound to the connection's current inbound-token hash, valid until `expiresAt` (ms). */
    mint(tenantId: string, visitorId: string, expiresAt: number, tokenHash: Buffer): string {
      const body = Buffer.from(JSON.stringify({ t: tenantId, v: visitorId, e: Math.floor(expiresAt / 1000), f: fingerprint(current.id, tokenHash) })).toString('base64url');
      const head = `${MARK}.${current.id}.${body}`;
      return `${head}.${mac(derived.get(current.id)!, head).toString('base64url')}`;
    },

    /**
     * The claims of a token this service signed, with any listed key; null for anything else. Expiry and the
     * fingerprint are the caller's to check (they need the clock and the connection).
     */
    read(token: string): VisitorClaims | null {
      if (token.length > MAX_TOKEN_CHARS) return null;
      const parts = token.split('.');
      if (parts.length !== 4 || parts[0] !== MARK) return null;
      const [, kid, body, sig] = parts as [string, string, string, string];
      const key = derived.get(kid);
      if (!key) return null;
      const expected = mac(key, `${MARK}.${kid}.${body}`);
      const given = Buffer.from(sig, 'base64url');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
      let json: unknown;
      try {
        json = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
      } catch {
        return null;
      }
      const p = payload.safeParse(json);
      if (!p.success) return null;
      return { kid, tenantId: p.data.t.toLowerCase(), visitorId: p.data.v, expiresAt: p.data.e * 1000, fingerprint: p.data.f };
    },

    sealCursor: (tenantId: string, visitorId: string, c: Cursor): string => cursors.seal(tenantId, visitorId, JSON.stringify(c)),

    /** The cursor, when it was sealed for this visitor of this workspace; null for anything else. */
    openCursor(tenantId: string, visitorId: string, text: string): Cursor | null {
      if (text.length > MAX_CURSOR_CHARS || !cursors.isSealed(text)) return null;
      try {
        const c = cursorWire.safeParse(JSON.parse(cursors.open(tenantId, visitorId, text)));
        return c.success ? { m: c.data.m, ...(c.data.p !== undefined ? { p: c.data.p } : {}) } : null;
      } catch {
        return null;
      }
    },
  };
}

export type VisitorTokens = ReturnType<typeof createVisitorTokens>;
