import { DatabaseError } from 'pg';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from '../config';
import { logContext } from './log-context';

/**
 * Paths pino blanks before a line is written. Secrets must never reach a log line, whatever logs them:
 * credentials in headers, secrets in bodies, tokens and keys anywhere near the top of an object.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  'authorization',
  'secret',
  'password',
  'token',
  '*.secret',
  '*.password',
  '*.token',
  '*.access_token',
  '*.refresh_token',
  '*.api_key',
  '*.signing_secret',
  '*.*.secret',
];

/**
 * Whether log lines are written for a person (pino-pretty: coloured, one readable line each) rather than as JSON:
 * when stdout is a terminal (`npm run up` in a shell), outside production. Piped or redirected output (a container,
 * a log shipper, a file, the tests) stays JSON, one object a line. `override` forces either way; nothing sets it
 * yet (a LOG_PRETTY setting would, once the configuration table has one).
 */
export function prettyLogs(stdout: { isTTY?: boolean }, nodeEnv: Config['NODE_ENV'] | undefined, override?: boolean): boolean {
  if (override !== undefined) return override;
  return stdout.isTTY === true && nodeEnv !== 'production';
}

/** pino-pretty in a worker thread (pino's transport), so formatting never runs on the event loop. */
const prettyTransport = () =>
  pino.transport({ target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service', singleLine: false } }) as DestinationStream;

export function createLogger(config: Pick<Config, 'LOG_LEVEL' | 'NODE_ENV'>, destination?: DestinationStream): Logger {
  const options = {
    level: config.LOG_LEVEL,
    base: { service: 'helpdesk' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    serializers: { err: serializeError },
    timestamp: pino.stdTimeFunctions.isoTime,
    // The request or job this line was written for, and its workspace (src/lib/log-context.ts).
    mixin: (_line: object, _level: number, instance: Logger) => {
      const context = logContext();
      if (!context) return {};
      // A child already bound to a key (pino-http's per-request props) keeps it once.
      const bound = instance.bindings();
      return Object.fromEntries(Object.entries(context).filter(([k, v]) => v !== undefined && !(k in bound)));
    },
  };
  if (destination) return pino(options, destination);
  return prettyLogs(process.stdout, config.NODE_ENV) ? pino(options, prettyTransport()) : pino(options);
}

/** What a PostgreSQL error may keep in a log line: where it came from, never the values involved. */
const PG_KEPT_FIELDS = ['code', 'severity', 'routine', 'constraint', 'table', 'column', 'schema', 'dataType', 'file', 'line'] as const;

/**
 * A PostgreSQL data exception (class 22) quotes the value it refused in its message, e.g.
 * `invalid input syntax for type uuid: "sk_live_…"` or `invalid byte sequence for encoding "UTF8": 0x00`;
 * other classes quote identifiers from our own SQL (relation, constraint names), which stay.
 */
function pgMessageWithoutInput(code: string, message: string): string {
  if (!code.startsWith('22')) return message;
  return message.replace(/".*"/s, '"[redacted]"').replace(/(:\s*)0x[0-9a-f]{2}(\s+0x[0-9a-f]{2})*/gi, '$1[redacted]');
}

/**
 * A copy of the error chain with nothing in it that can quote statement parameters: PostgreSQL's `where`
 * context ("unnamed portal parameter $1 = '…'"), `detail` ("Key (email)=(…)"), `hint`, `internalQuery`
 * and the client's `parameters` are dropped, and messages that quote input are cut.
 */
function withoutStatementValues(err: Error, depth = 0): Error {
  if (depth > 8) return err;
  if (err instanceof DatabaseError) {
    const code = String(err.code ?? '');
    const message = pgMessageWithoutInput(code, err.message);
    const copy = Object.create(Object.getPrototypeOf(err) as object) as Error & Record<string, unknown>;
    copy.name = err.name;
    copy.message = message;
    copy.stack = err.stack?.split(err.message).join(message);
    for (const key of PG_KEPT_FIELDS) if (err[key] !== undefined) copy[key] = err[key];
    return copy;
  }
  const cause = (err as { cause?: unknown }).cause;
  const errors = (err as { errors?: unknown }).errors;
  if (!(cause instanceof Error) && !Array.isArray(errors)) return err;
  const copy = Object.assign(Object.create(Object.getPrototypeOf(err) as object) as Error, err, { name: err.name, message: err.message, stack: err.stack });
  if (cause instanceof Error) (copy as { cause?: unknown }).cause = withoutStatementValues(cause, depth + 1);
  if (Array.isArray(errors)) (copy as { errors?: unknown }).errors = errors.map((e) => (e instanceof Error ? withoutStatementValues(e, depth + 1) : e));
  return copy;
}

/**
 * The `err` serializer for every logger (and pino-http, which serialises before calling it and leaves the
 * original on `raw`): pino's standard one, over a copy without statement values.
 */
export function serializeError(input: unknown): unknown {
  const raw = input && typeof input === 'object' && !(input instanceof Error) && (input as { raw?: unknown }).raw instanceof Error ? (input as { raw: Error }).raw : input;
  if (!(raw instanceof Error)) return input;
  return pino.stdSerializers.err(withoutStatementValues(raw));
}
