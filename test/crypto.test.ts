import { randomBytes } from 'node:crypto';
import { createSealer } from '../src/lib/crypto';

const key = (id: string) => ({ id, key: randomBytes(32) });

describe('sealing secrets with versioned AES-256-GCM keys', () => {
  const k1 = key('k1');
  const k2 = key('k2');

  test('round-trips a value and never carries the plaintext in the sealed form', () => {
    const s = createSealer([k1]);
    const sealed = s.seal('ya29.secret-access-token', 'mailbox:t1:access');
    expect(sealed).not.toContain('secret-access-token');
    expect(Buffer.from(sealed.split('.')[4]!, 'base64url').toString('utf8')).not.toContain('secret');
    expect(s.open(sealed, 'mailbox:t1:access')).toBe('ya29.secret-access-token');
  });

  test('seals the same value differently each time (random IV)', () => {
    const s = createSealer([k1]);
    expect(s.seal('same', 'c')).not.toBe(s.seal('same', 'c'));
  });

  test('refuses a value opened under another context (copied to another workspace or field)', () => {
    const s = createSealer([k1]);
    const sealed = s.seal('token', 'mailbox:t1:access');
    expect(() => s.open(sealed, 'mailbox:t2:access')).toThrow();
    expect(() => s.open(sealed, 'mailbox:t1:refresh')).toThrow();
  });

  test('refuses a tampered ciphertext or tag', () => {
    const s = createSealer([k1]);
    const parts = s.seal('token', 'c').split('.');
    const body = Buffer.from(parts[4]!, 'base64url');
    body[0] = body[0]! ^ 1;
    expect(() => s.open([...parts.slice(0, 4), body.toString('base64url')].join('.'), 'c')).toThrow();
    const tag = Buffer.from(parts[3]!, 'base64url');
    tag[0] = tag[0]! ^ 1;
    expect(() => s.open([parts[0], parts[1], parts[2], tag.toString('base64url'), parts[4]].join('.'), 'c')).toThrow();
  });

  test('rotation: the newest key seals, older keys still open what they sealed', () => {
    const before = createSealer([k1]);
    const old = before.seal('old', 'c');
    const after = createSealer([k1, k2]);
    expect(after.open(old, 'c')).toBe('old');
    expect(after.isStale(old)).toBe(true);
    const fresh = after.seal('new', 'c');
    expect(fresh.split('.')[1]).toBe('k2');
    expect(after.isStale(fresh)).toBe(false);
  });

  test('a value sealed with a key no longer configured cannot be opened, and the error does not echo it', () => {
    const sealed = createSealer([k1]).seal('token-value', 'c');
    try {
      createSealer([k2]).open(sealed, 'c');
      throw new Error('expected a refusal');
    } catch (err) {
      expect((err as Error).message).toMatch(/key is not configured/);
      expect((err as Error).message).not.toContain('token-value');
    }
  });
});
