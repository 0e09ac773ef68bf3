import { ConfigError, loadConfig } from '../src/config';

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
  ])('refuses %p with one line naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
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
