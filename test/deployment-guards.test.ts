/**
 * Issue 32, findings 6 and 7: what a deployment's settings and an admin's values may open.
 * - TRUST_PROXY=true believed the left-most X-Forwarded-For: behind a proxy that appends (nginx's default,
 *   cloud load balancers) a caller escaped its failed-authentication budget and could lock out any address it
 *   named. It now takes a hop count or the proxies' addresses, as Express's `trust proxy` does.
 * - Production started with development-only settings without a word.
 * - `allowed_origins` stored `null`, `*` and `javascript:` and honoured `null`.
 */
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../src/config';
import { bearer, createWorkspace } from './helpers/factories';
import { connect } from './helpers/ingest';
import { useTestApp } from './helpers/use-test-app';

const wrongKey = () => `sk_zr_${randomBytes(24).toString('base64url')}`;
const PROD = { NODE_ENV: 'production', API_KEY_PEPPER: 'p'.repeat(40), ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`, OPS_USER: 'ops', OPS_PASSWORD: 'a-long-ops-password' };

describe('TRUST_PROXY', () => {
  test.each([
    ['false', false],
    ['true', true],
    ['1', 1],
    ['2', 2],
    ['10.0.0.0/8, 192.168.1.7', ['10.0.0.0/8', '192.168.1.7']],
    ['loopback,fd00::/8', ['loopback', 'fd00::/8']],
  ])('takes Express\'s trust proxy forms: %s', (raw, parsed) => {
    expect(loadConfig({ TRUST_PROXY: raw }).TRUST_PROXY).toEqual(parsed);
  });

  test.each(['yes', '10.0.0.0/33', '300.1.1.1', 'example.com', '10.0.0.0/8,', '-1', '1e3'])('refuses %s at start, naming the setting', (raw) => {
    if (raw === '10.0.0.0/8,') {
      // A trailing comma is only an empty entry: the list is the one address.
      expect(loadConfig({ TRUST_PROXY: raw }).TRUST_PROXY).toEqual(['10.0.0.0/8']);
      return;
    }
    expect(() => loadConfig({ TRUST_PROXY: raw })).toThrow(/TRUST_PROXY must be false, true, a hop count/);
  });

  describe.each([
    ['a hop count', '1'],
    ['the proxy\'s address', '127.0.0.1/8'],
  ])('behind one proxy that appends the client address, trusted by %s', (_what, setting) => {
    const { ctx } = useTestApp({ env: { TRUST_PROXY: setting, AUTH_FAILURE_RATE_POINTS: '3' } });
    const via = (client: string, claimed?: string) => ctx.http.get('/v1/tickets').set('X-Forwarded-For', claimed ? `${claimed}, ${client}` : client);

    test('a caller cannot escape its failed-authentication budget by writing its own X-Forwarded-For', async () => {
      const client = `10.1.${randomBytes(1)[0]}.${randomBytes(1)[0]}`;
      for (let i = 0; i < 3; i += 1) expect((await via(client, `6.6.6.${i}`).set(bearer(wrongKey()))).status).toBe(401);
      expect((await via(client, '6.6.6.99').set(bearer(wrongKey()))).status).toBe(429);
    });

    test('nor lock out an address it names', async () => {
      const victim = `10.2.${randomBytes(1)[0]}.${randomBytes(1)[0]}`;
      const attacker = `10.3.${randomBytes(1)[0]}.${randomBytes(1)[0]}`;
      for (let i = 0; i < 5; i += 1) await via(attacker, victim).set(bearer(wrongKey()));
      expect((await via(victim).set(bearer(wrongKey()))).status).toBe(401);
    });
  });
});

describe('production refuses development-only settings', () => {
  test('starts with the production settings alone', () => {
    expect(() => loadConfig(PROD)).not.toThrow();
  });

  test.each([
    [{ OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true' }, /OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK is a development-only setting, refused in production/],
    [{ TRUST_PROXY: 'true' }, /TRUST_PROXY is a development-only setting, refused in production.*hop count/],
    [{ SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK: 'true' }, /SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK is a development-only setting, refused in production/],
    [{ TRUST_PROXY: 'true', OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: '1' }, /OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK=true .*; TRUST_PROXY=true/],
  ])('%j is refused, named', (extra, message) => {
    expect(() => loadConfig({ ...PROD, ...extra })).toThrow(message);
    // The same settings are a developer's to use.
    expect(() => loadConfig({ ...PROD, NODE_ENV: 'development', ...extra })).not.toThrow();
  });

  test('a proxy hop count or address list is fine in production', () => {
    expect(loadConfig({ ...PROD, TRUST_PROXY: '1' }).TRUST_PROXY).toBe(1);
    expect(loadConfig({ ...PROD, TRUST_PROXY: '10.0.0.0/8' }).TRUST_PROXY).toEqual(['10.0.0.0/8']);
  });
});

describe('web chat allowed_origins are origins', () => {
  const { ctx } = useTestApp();

  test.each([['null'], ['*'], ['javascript:alert(1)'], ['https://shop.example/path'], ['https://user:pw@shop.example'], ['ftp://shop.example'], ['shop.example'], ['https://shop.example?x=1']])(
    '%s is refused with 400 naming the entry, and nothing is stored',
    async (bad) => {
      const ws = await createWorkspace(ctx);
      const res = await ctx.http.put('/v1/channels/web_chat').set(bearer(ws.ownerKey)).send({ enabled: true, config: { allowed_origins: ['https://ok.example', bad] } });
      expect(res.status).toBe(400);
      expect(res.body.errors).toEqual([expect.objectContaining({ path: 'body.config.allowed_origins.1' })]);
      expect((await ctx.http.get('/v1/channels').set(bearer(ws.ownerKey))).body.channels.find((c: { channel: string }) => c.channel === 'web_chat').connected).toBe(false);
    },
  );

  test('origins are stored as browsers send them (lower-case host, no default port, no trailing slash) and match exactly', async () => {
    const ws = await createWorkspace(ctx);
    const conn = await connect(ctx, ws, 'web_chat', { config: { allowed_origins: ['https://Shop.Example:443/', 'http://localhost:5173'] } });
    expect((conn.config as { allowed_origins: string[] }).allowed_origins).toEqual(['https://shop.example', 'http://localhost:5173']);
    const token = conn.details.inbound_token!;
    const preflight = (origin: string) => ctx.http.options(`/v1/ingest/web_chat?token=${token}`).set('Origin', origin).set('Access-Control-Request-Method', 'POST');
    expect((await preflight('https://shop.example')).headers['access-control-allow-origin']).toBe('https://shop.example');
    expect((await preflight('http://localhost:5173')).headers['access-control-allow-origin']).toBe('http://localhost:5173');
    expect((await preflight('null')).headers['access-control-allow-origin']).toBeUndefined();
    expect((await preflight('https://shop.example.evil.test')).headers['access-control-allow-origin']).toBeUndefined();
  });

  test('a null origin stored before origins were checked is never honoured', async () => {
    const ws = await createWorkspace(ctx);
    const conn = await connect(ctx, ws, 'web_chat', { config: { allowed_origins: ['https://shop.example'] } });
    await ctx.db.updateTable('channel_connections').set({ config: JSON.stringify({ allowed_origins: ['null', '*'] }) }).where('tenant_id', '=', ws.tenantId).where('channel', '=', 'web_chat').execute();
    const res = await ctx.http.options(`/v1/ingest/web_chat?token=${conn.details.inbound_token}`).set('Origin', 'null').set('Access-Control-Request-Method', 'POST');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});
