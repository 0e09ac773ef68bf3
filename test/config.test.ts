import { CONFIG_KEYS, CONFIG_SECTIONS, ConfigError, loadConfig, section } from '../src/config';

describe('configuration from the environment', () => {
  test('applies documented defaults', () => {
    const c = loadConfig({});
    expect(c.PORT).toBe(8080);
    expect(c.BODY_LIMIT_BYTES).toBe(1024 * 1024);
    expect(c.DATABASE_URL).toMatch(/^postgres:\/\//);
  });

  test.each([
    [{ PORT: 'abc' }, /^Invalid configuration: PORT .*\(got "abc"\)$/],
    [{ PORT: '70000' }, /PORT/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL must be a postgres:\/\/ URL/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ REALM_PUBLIC_KEY: 'pem' }, /REALM_ISSUER is required/],
    [{ NODE_ENV: 'production' }, /API_KEY_PEPPER must be set to a secret value in production/],
    [{ NODE_ENV: 'production', API_KEY_PEPPER: 'p'.repeat(40) }, /^Invalid configuration: ENCRYPTION_KEYS must not contain the development key in production$/],
    [
      { NODE_ENV: 'production', API_KEY_PEPPER: 'p'.repeat(40), ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`, REALM_PUBLIC_KEY: 'pem', REALM_ISSUER: 'https://realm.example/' },
      /^Invalid configuration: REALM_AUDIENCE is required in production when REALM_JWKS_URL or REALM_PUBLIC_KEY is set$/,
    ],
    [
      { NODE_ENV: 'production', API_KEY_PEPPER: 'p'.repeat(40), ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`, REALM_JWKS_URL: 'https://realm.example/jwks', REALM_ISSUER: 'https://realm.example/' },
      /REALM_AUDIENCE is required in production/,
    ],
    [{ ENCRYPTION_KEYS: 'k1:c2hvcnQ=' }, /^Invalid configuration: ENCRYPTION_KEYS must be a comma-separated list of id:base64 pairs, each key 32 bytes, ids unique$/],
    [{ ENCRYPTION_KEYS: `a:${Buffer.alloc(32, 1).toString('base64')},a:${Buffer.alloc(32, 2).toString('base64')}` }, /ENCRYPTION_KEYS .*ids unique$/],
  ])('refuses %p with one line naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  test('starts in production with a realm when its audience is set, and without a realm at all', () => {
    const prod = { NODE_ENV: 'production', API_KEY_PEPPER: 'p'.repeat(40), ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`, OPS_USER: 'ops', OPS_PASSWORD: 'a-long-ops-password' };
    expect(loadConfig({ ...prod, REALM_PUBLIC_KEY: 'pem', REALM_ISSUER: 'https://realm.example/', REALM_AUDIENCE: 'helpdesk-api' }).REALM_AUDIENCE).toBe('helpdesk-api');
    expect(loadConfig(prod).REALM_AUDIENCE).toBeUndefined();
  });

  test('production refuses to start without the queue dashboard\'s login (development gets one from npm run up)', () => {
    const prod = { NODE_ENV: 'production', API_KEY_PEPPER: 'p'.repeat(40), ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}` };
    expect(() => loadConfig(prod)).toThrow(/OPS_USER is required in production/);
    expect(() => loadConfig({ ...prod, OPS_USER: 'ops' })).toThrow(/OPS_PASSWORD is required in production/);
    expect(loadConfig({ ...prod, OPS_USER: 'ops', OPS_PASSWORD: 'a-long-ops-password' }).OPS_USER).toBe('ops');
    expect(loadConfig({}).OPS_USER).toBeUndefined();
  });

  test('never echoes a secret-looking value in the error', () => {
    try {
      loadConfig({ API_KEY_PEPPER: 'short-secret' });
      throw new Error('expected a refusal');
    } catch (err) {
      expect((err as Error).message).toMatch(/API_KEY_PEPPER/);
      expect((err as Error).message).not.toContain('short-secret');
    }
  });
});

describe('configuration sections', () => {
  test('every variable belongs to exactly one section', () => {
    const placed = Object.values(CONFIG_SECTIONS).flat() as string[];
    expect(placed.length).toBe(new Set(placed).size);
    expect([...placed].sort()).toEqual([...CONFIG_KEYS].sort());
  });

  test('a factory handed a section sees only that section\'s variables', () => {
    const config = loadConfig({ OPS_USER: 'ops', OPS_PASSWORD: 'a-long-password' });
    const mailbox = section(config, 'mailbox', 'http');
    expect(Object.keys(mailbox).sort()).toEqual([...CONFIG_SECTIONS.mailbox, ...CONFIG_SECTIONS.http].sort());
    expect(mailbox).not.toHaveProperty('OPS_PASSWORD');
    expect(mailbox).not.toHaveProperty('ENCRYPTION_KEYS');
  });
});
