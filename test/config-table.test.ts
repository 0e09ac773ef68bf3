/**
 * Config declared once (issue 35): one table (`SETTINGS`) holds each variable's env name, section, schema with
 * its default, and meaning; the schema, the sections, the job settings' defaults and the docs come from it.
 * Webhook settings carry their direction (INBOUND_WEBHOOK_*, OUTBOUND_WEBHOOK_*), and the old names are still
 * read with a one-line deprecation warning.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CONFIG_KEYS, CONFIG_SECTIONS, DEPRECATED_ALIASES, SECTION_NAMES, SETTINGS, configDefaults, loadConfig, section } from '../src/config';
import { DEFAULT_SETTINGS, JOB_SETTING_KEYS, jobOptions, schedules } from '../src/queue/jobs';

const ROOT = path.resolve(__dirname, '..');

/** The renames of issue 35: provider webhooks in, endpoint deliveries out. */
const RENAMED = {
  WEBHOOK_BATCH_MAX: 'INBOUND_WEBHOOK_BATCH_MAX',
  WEBHOOK_BATCH_WINDOW_MS: 'INBOUND_WEBHOOK_BATCH_WINDOW_MS',
  WEBHOOK_RATE_POINTS: 'INBOUND_WEBHOOK_RATE_POINTS',
  WEBHOOK_RATE_WINDOW_SECONDS: 'INBOUND_WEBHOOK_RATE_WINDOW_SECONDS',
  WEBHOOKS_REQUIRE_SIGNATURE: 'INBOUND_WEBHOOK_REQUIRE_SIGNATURE',
  WEBHOOK_ALLOW_HTTP_LOOPBACK: 'OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'OUTBOUND_WEBHOOK_ALLOW_PRIVATE_NETWORKS',
  WEBHOOK_SECRET_OVERLAP_SECONDS: 'OUTBOUND_WEBHOOK_SECRET_OVERLAP_SECONDS',
  WEBHOOK_DELIVERY_TIMEOUT_MS: 'OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS',
  WEBHOOK_RETRY_HOURS: 'OUTBOUND_WEBHOOK_RETRY_HOURS',
  WEBHOOK_RETRY_BASE_MS: 'OUTBOUND_WEBHOOK_RETRY_BASE_MS',
  WEBHOOK_DISABLE_AFTER_FAILURES: 'OUTBOUND_WEBHOOK_DISABLE_AFTER_FAILURES',
  WEBHOOK_ENDPOINT_CONCURRENCY: 'OUTBOUND_WEBHOOK_ENDPOINT_CONCURRENCY',
  WEBHOOK_WORKSPACE_CONCURRENCY: 'OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY',
  WEBHOOK_ENDPOINTS_PER_WORKSPACE: 'OUTBOUND_WEBHOOK_ENDPOINTS_PER_WORKSPACE',
  WEBHOOK_CIRCUIT_FAILURES: 'OUTBOUND_WEBHOOK_CIRCUIT_FAILURES',
  WEBHOOK_CIRCUIT_OPEN_SECONDS: 'OUTBOUND_WEBHOOK_CIRCUIT_OPEN_SECONDS',
  WEBHOOK_DELIVERY_CONCURRENCY: 'OUTBOUND_WEBHOOK_DELIVERY_CONCURRENCY',
  WEBHOOK_SWEEP_MS: 'OUTBOUND_WEBHOOK_SWEEP_MS',
} as const;

/** Two settings for one yield merged into one (issue 35, the intake-priority room): both old names read it. */
const MERGED = {
  OUTBOUND_WEBHOOK_INTAKE_YIELD_MS: 'BACKGROUND_INTAKE_YIELD_MS',
  WEBHOOK_INTAKE_YIELD_MS: 'BACKGROUND_INTAKE_YIELD_MS',
} as const;

describe('every variable is declared once', () => {
  test('the table is the only declaration: one `NAME: setting(` row per variable in src/config.ts, no second list', () => {
    // A repeated key in the SETTINGS object literal is a compile error (TS1117), so a name cannot be declared twice
    // there; this checks nothing else in the file lists the names again (as CONFIG_SECTIONS once did).
    const source = readFileSync(path.join(ROOT, 'src', 'config.ts'), 'utf8');
    // The cross-checks (superRefine) name the variables their issues point at; nothing else quotes a name.
    const outsideCrossChecks = source.slice(0, source.indexOf('.superRefine(')) + source.slice(source.indexOf('export type Config ='));
    for (const k of CONFIG_KEYS) {
      expect({ k, rows: source.match(new RegExp(`^\\s+${k}: setting\\(`, 'gm'))?.length }).toEqual({ k, rows: 1 });
      expect({ k, quoted: outsideCrossChecks.includes(`'${k}'`) }).toEqual({ k, quoted: false });
    }
    expect(new Set(CONFIG_KEYS).size).toBe(CONFIG_KEYS.length);
  });

  test('the sections are derived from the table: each variable in exactly the section its row names, none empty', () => {
    for (const s of SECTION_NAMES) {
      expect(CONFIG_SECTIONS[s].length).toBeGreaterThan(0);
      for (const k of CONFIG_SECTIONS[s]) expect(SETTINGS[k].section).toBe(s);
    }
    const placed = SECTION_NAMES.flatMap((s) => [...CONFIG_SECTIONS[s]]);
    expect(placed).toEqual(CONFIG_KEYS);
    const outbound = section(loadConfig({}), 'outboundWebhooks');
    expect(Object.keys(outbound).every((k) => k.startsWith('OUTBOUND_WEBHOOK_'))).toBe(true);
  });

  test('every row carries a meaning, and the schema reads every row', () => {
    const parsed = loadConfig({});
    for (const k of CONFIG_KEYS) {
      expect(SETTINGS[k].doc.trim().length).toBeGreaterThan(5);
      expect(k in parsed || configDefaults()[k] === undefined).toBe(true);
    }
  });

  test('an alias is never a current name, and names one setting only', () => {
    const aliases = CONFIG_KEYS.flatMap((k) => [...((SETTINGS[k] as { aliases?: readonly string[] }).aliases ?? [])]);
    expect(new Set(aliases).size).toBe(aliases.length);
    for (const a of aliases) expect(CONFIG_KEYS as string[]).not.toContain(a);
  });
});

describe('jobs read the config table', () => {
  test('the job settings\' defaults are the config\'s defaults (MAILBOX_REFRESH_SECONDS was 900 there, 3600 here)', () => {
    const defaults = configDefaults();
    for (const k of JOB_SETTING_KEYS) expect({ k, v: DEFAULT_SETTINGS[k] }).toEqual({ k, v: defaults[k] });
    expect(DEFAULT_SETTINGS.MAILBOX_REFRESH_SECONDS).toBe(loadConfig({}).MAILBOX_REFRESH_SECONDS);
    // Options built without settings are those built with the defaults.
    expect(jobOptions('mailbox.sweep')).toEqual(jobOptions('mailbox.sweep', undefined, loadConfig({})));
    expect(schedules(DEFAULT_SETTINGS)).toEqual(schedules(loadConfig({})));
  });

  test('src/queue/jobs.ts writes no default of its own', () => {
    const source = readFileSync(path.join(ROOT, 'src', 'queue', 'jobs.ts'), 'utf8');
    for (const k of JOB_SETTING_KEYS) expect(source).not.toMatch(new RegExp(`${k}\\s*:\\s*\\d`));
  });
});

describe('inbound and outbound webhook settings have their own names; the old ones are deprecated aliases', () => {
  test('every old WEBHOOK_* name is an alias of its new name', () => {
    expect(Object.fromEntries(DEPRECATED_ALIASES)).toEqual({ ...RENAMED, ...MERGED });
    for (const newName of Object.values({ ...RENAMED, ...MERGED })) expect(CONFIG_KEYS as string[]).toContain(newName);
  });

  test('an old name is still read, with one warning line per old name naming the new one', () => {
    const warn = jest.fn();
    const config = loadConfig({ WEBHOOK_SWEEP_MS: '1234', WEBHOOKS_REQUIRE_SIGNATURE: 'true', WEBHOOK_RATE_POINTS: '7' }, { warn });
    expect(config.OUTBOUND_WEBHOOK_SWEEP_MS).toBe(1234);
    expect(config.INBOUND_WEBHOOK_REQUIRE_SIGNATURE).toBe(true);
    expect(config.INBOUND_WEBHOOK_RATE_POINTS).toBe(7);
    expect(config).not.toHaveProperty('WEBHOOK_SWEEP_MS');
    const lines = warn.mock.calls.map(([line]) => line as string).sort();
    expect(lines).toEqual([
      'Deprecated configuration: WEBHOOKS_REQUIRE_SIGNATURE is now INBOUND_WEBHOOK_REQUIRE_SIGNATURE; the old name is still read for now, rename it',
      'Deprecated configuration: WEBHOOK_RATE_POINTS is now INBOUND_WEBHOOK_RATE_POINTS; the old name is still read for now, rename it',
      'Deprecated configuration: WEBHOOK_SWEEP_MS is now OUTBOUND_WEBHOOK_SWEEP_MS; the old name is still read for now, rename it',
    ]);
    for (const line of lines) expect(line).not.toContain('\n');
  });

  test('the new name wins when both are set, and the warning says the old one is ignored', () => {
    const warn = jest.fn();
    expect(loadConfig({ WEBHOOK_RETRY_HOURS: '1', OUTBOUND_WEBHOOK_RETRY_HOURS: '2' }, { warn }).OUTBOUND_WEBHOOK_RETRY_HOURS).toBe(2);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn).toHaveBeenCalledWith('Deprecated configuration: WEBHOOK_RETRY_HOURS is ignored because OUTBOUND_WEBHOOK_RETRY_HOURS is set; remove WEBHOOK_RETRY_HOURS');
  });

  test('a bad value under an old name is refused naming both names', () => {
    expect(() => loadConfig({ WEBHOOK_ENDPOINT_CONCURRENCY: '0' }, { warn: () => {} })).toThrow(
      /^Invalid configuration: OUTBOUND_WEBHOOK_ENDPOINT_CONCURRENCY \(set as the deprecated WEBHOOK_ENDPOINT_CONCURRENCY\) .*\(got "0"\)$/,
    );
  });

  test('the two yields are one setting: either old name sets it for all background work, with a warning', () => {
    const warn = jest.fn();
    expect(loadConfig({ OUTBOUND_WEBHOOK_INTAKE_YIELD_MS: '1500' }, { warn }).BACKGROUND_INTAKE_YIELD_MS).toBe(1500);
    expect(warn).toHaveBeenCalledWith('Deprecated configuration: OUTBOUND_WEBHOOK_INTAKE_YIELD_MS is now BACKGROUND_INTAKE_YIELD_MS; the old name is still read for now, rename it');
    expect(loadConfig({ WEBHOOK_INTAKE_YIELD_MS: '700' }, { warn: () => {} }).BACKGROUND_INTAKE_YIELD_MS).toBe(700);
    expect(loadConfig({ BACKGROUND_INTAKE_YIELD_MS: '900', OUTBOUND_WEBHOOK_INTAKE_YIELD_MS: '1500' }, { warn: () => {} }).BACKGROUND_INTAKE_YIELD_MS).toBe(900);
    expect(section(loadConfig({}), 'intakePriority')).toEqual({ INTAKE_WORKSPACE_QUEUED: 32, INTAKE_WORKSPACE_WAITING: 256, INTAKE_WORKSPACE_SHARED_QUEUED: 2, BACKGROUND_INTAKE_YIELD_MS: 2000 });
  });

  test('two old names of one merged setting: the first set is read, the other ignored with a warning naming both', () => {
    const warn = jest.fn();
    expect(loadConfig({ OUTBOUND_WEBHOOK_INTAKE_YIELD_MS: '1500', WEBHOOK_INTAKE_YIELD_MS: '700' }, { warn }).BACKGROUND_INTAKE_YIELD_MS).toBe(1500);
    expect(warn.mock.calls.map(([line]) => line as string)).toEqual([
      'Deprecated configuration: OUTBOUND_WEBHOOK_INTAKE_YIELD_MS is now BACKGROUND_INTAKE_YIELD_MS; the old name is still read for now, rename it',
      'Deprecated configuration: WEBHOOK_INTAKE_YIELD_MS is ignored because OUTBOUND_WEBHOOK_INTAKE_YIELD_MS is set (both are now BACKGROUND_INTAKE_YIELD_MS); set BACKGROUND_INTAKE_YIELD_MS and remove both',
    ]);
  });

  test('production still refuses the loopback switch under its old name', () => {
    const prod = { NODE_ENV: 'production', API_KEY_PEPPER: 'p'.repeat(40), ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`, OPS_USER: 'ops', OPS_PASSWORD: 'a-long-ops-password' };
    expect(() => loadConfig({ ...prod, WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true' }, { warn: () => {} })).toThrow(/OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK \(set as the deprecated WEBHOOK_ALLOW_HTTP_LOOPBACK\) is a development-only setting/);
  });

  test('at start-up the warning goes to stderr once per old name, however often the config is loaded', () => {
    const write = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      loadConfig({ WEBHOOK_CIRCUIT_FAILURES: '9' });
      loadConfig({ WEBHOOK_CIRCUIT_FAILURES: '9' });
      const lines = write.mock.calls.map(([chunk]) => String(chunk)).filter((l) => l.includes('WEBHOOK_CIRCUIT_FAILURES'));
      expect(lines).toEqual(['Deprecated configuration: WEBHOOK_CIRCUIT_FAILURES is now OUTBOUND_WEBHOOK_CIRCUIT_FAILURES; the old name is still read for now, rename it\n']);
    } finally {
      write.mockRestore();
    }
  });
});
