import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnv } from 'node:util';

/**
 * `.env` in development (issue 35): `cp .env.example .env`, edit, `npm run up`. The server, the workers and the
 * migration script call this before they read their configuration.
 *
 * - Read only when the file exists, and only in development: NODE_ENV unset or `development` in the process's
 *   own environment. Under `test` or `production` a stray `.env` in the working directory never changes what
 *   runs; a deployment that wants a file asks Node for it explicitly (`node --env-file=…`, `tsx --env-file=…`).
 * - The environment wins: a variable already set is never overwritten by the file (as Node's `--env-file`).
 * - Node's own parser (`util.parseEnv`, the one behind `process.loadEnvFile`): no dependency.
 *
 * Answers the path read, or null when nothing was.
 */
export function loadDotEnv(options: { dir?: string; env?: NodeJS.ProcessEnv } = {}): string | null {
  const env = options.env ?? process.env;
  const mode = env.NODE_ENV;
  if (mode !== undefined && mode !== '' && mode !== 'development') return null;
  const path = join(options.dir ?? process.cwd(), '.env');
  if (!existsSync(path)) return null;
  for (const [key, value] of Object.entries(parseEnv(readFileSync(path, 'utf8')))) {
    if (env[key] === undefined) env[key] = value;
  }
  return path;
}
