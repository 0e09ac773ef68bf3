import { randomBytes } from 'node:crypto';
import { endpointSecretContext } from '../src/domains/webhook-endpoints/service';
import { integrationSecretContext } from '../src/domains/webhooks/secrets';
import { mailboxTokenContext } from '../src/domains/mailbox/tokens';
import { providerKeyContext } from '../src/domains/workspaces/service';
import { channelFieldContext } from '../src/domains/channels/service';
import { createVisitorTokens, visitorCursorContext } from '../src/domains/web-chat/tokens';
import { keptAnswerContext } from '../src/domains/idempotency/service';
import { createFieldSealer, createSealer } from '../src/lib/crypto';

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

describe('one sealer per kind of field, bound to its row by ids', () => {
  const k1 = key('k1');
  const k2 = key('k2');

  test('seals under the context its ids name, opens only with the same ids, and type-checks them', () => {
    const field = createFieldSealer([k1], (tenantId: string, field: 'access' | 'refresh') => `mailbox:${tenantId}:${field}`);
    const sealed = field.seal('t1', 'access', 'token');
    expect(field.open('t1', 'access', sealed)).toBe('token');
    expect(createSealer([k1]).open(sealed, 'mailbox:t1:access')).toBe('token');
    expect(() => field.open('t2', 'access', sealed)).toThrow();
    expect(() => field.open('t1', 'refresh', sealed)).toThrow();
    // Compiled, never run: the type check refuses ids the context does not take.
    const refused = () => [
      // @ts-expect-error a field the context does not name
      field.open('t1', 'secret', sealed),
      // @ts-expect-error an id missing
      field.seal('t1', 'token'),
    ];
    expect(refused).toBeInstanceOf(Function);
    expect(field.isSealed(sealed)).toBe(true);
    expect(field.isSealed('plain')).toBe(false);
    expect(createFieldSealer([k1, k2], (t: string) => `x:${t}`).isStale(sealed)).toBe(true);
  });

  /**
   * Existing databases hold values sealed under these contexts: each field's text is pinned here, sealed
   * with the field's own sealer and opened with the bare sealer under the literal it has always had.
   */
  const T = '0190a5b8-0000-7000-8000-000000000001';
  const ID = '0190a5b8-0000-7000-8000-000000000002';
  const pinned: [string, () => string, string][] = [
    ['inbound webhook integration signing secret', () => createFieldSealer([k1], integrationSecretContext).seal(T, ID, 'v'), `integration:${T}:${ID}:signing_secret`],
    ['outbound webhook endpoint secret', () => createFieldSealer([k1], endpointSecretContext).seal(T, ID, 'v'), `webhook-endpoint:${T}:${ID}:secret`],
    ['mailbox access token', () => createFieldSealer([k1], mailboxTokenContext).seal(T, 'access', 'v'), `mailbox:${T}:access`],
    ['mailbox refresh token', () => createFieldSealer([k1], mailboxTokenContext).seal(T, 'refresh', 'v'), `mailbox:${T}:refresh`],
    ['workspace provider key', () => createFieldSealer([k1], providerKeyContext).seal(T, 'anthropic', 'v'), `provider_key:${T}:anthropic`],
    ['channel secrets', () => createFieldSealer([k1], channelFieldContext).seal(T, 'sms', 'secrets', 'v'), `channel:${T}:sms:secrets`],
    ['channel inbound token', () => createFieldSealer([k1], channelFieldContext).seal(T, 'sms', 'inbound_token', 'v'), `channel:${T}:sms:inbound_token`],
    ['web chat cursor', () => createFieldSealer([k1], visitorCursorContext).seal(T, 'wcv_abc', 'v'), `web-chat-cursor:${T}:wcv_abc`],
    ['idempotent answer', () => createFieldSealer([k1], keptAnswerContext).seal(T, `key:${ID}`, 'order-1', 'v'), `idempotency:${T}:key:${ID}:order-1`],
  ];
  test.each(pinned)('keeps the context of the %s byte for byte', (_field, seal, literal) => {
    expect(createSealer([k1]).open(seal(), literal)).toBe('v');
  });

  test("keeps the web chat cursor's context through the visitor tokens' own sealing", () => {
    const sealed = createVisitorTokens([k1]).sealCursor(T, 'wcv_abc', { m: '7' });
    expect(JSON.parse(createSealer([k1]).open(sealed, `web-chat-cursor:${T}:wcv_abc`))).toEqual({ m: '7' });
  });
});
