/**
 * `docker compose up` as shipped must start (issue 18, part 6): the compose file's environment for the API
 * and the workers, interpolated as compose does with an operator's values, passes the production config
 * check; and every secret production refuses to run without is required by compose itself (`${VAR:?…}`),
 * so a missing one stops compose with its name instead of a container that exits. No Docker engine runs
 * here: the file is read and interpolated by this test.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { loadConfig } from '../src/config';

const compose = YAML.parse(readFileSync(join(__dirname, '..', 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, { environment?: Record<string, string | number> }>;
};

/** What an operator sets before `docker compose up`. */
const OPERATOR = {
  API_KEY_PEPPER: 'p'.repeat(40),
  ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
  OPS_USER: 'ops',
  OPS_PASSWORD: 'a-long-ops-password',
};

/** Compose's interpolation of `${NAME}`, `${NAME:-default}` and `${NAME:?message}` (which stops compose when unset). */
function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(/\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}/g, (_m, name: string, op: string | undefined, arg: string | undefined) => {
    const set = env[name];
    if (set !== undefined && set !== '') return set;
    if (op === '-') return arg ?? '';
    if (op === '?') throw new Error(`compose stops: ${name}: ${arg}`);
    return '';
  });
}

const envOf = (service: string, env: Record<string, string | undefined>) =>
  Object.fromEntries(Object.entries(compose.services[service]!.environment ?? {}).map(([k, v]) => [k, interpolate(String(v), env)]));

test.each(['migrate', 'api', 'worker'])('%s: with the operator\'s secrets the environment passes the production config check', (service) => {
  const env = envOf(service, OPERATOR);
  expect(env.NODE_ENV).toBe('production');
  expect(() => loadConfig(env)).not.toThrow();
});

test.each(Object.keys(OPERATOR))('without %s compose itself stops, naming it', (name) => {
  const env: Record<string, string | undefined> = { ...OPERATOR, [name]: undefined };
  expect(() => envOf('api', env)).toThrow(new RegExp(`compose stops: ${name}`));
});

test('every secret the production check requires is one compose requires (no container that starts and exits)', () => {
  // Unset in the environment, the production check refuses these (development defaults): compose must ask.
  for (const name of ['API_KEY_PEPPER', 'ENCRYPTION_KEYS']) {
    const env = envOf('api', OPERATOR);
    delete env[name];
    expect(() => loadConfig(env)).toThrow(new RegExp(name));
    expect(String(compose.services.api!.environment![name])).toMatch(new RegExp(`^\\$\\{${name}:\\?`));
  }
});
