import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { Client } from 'pg';
import { createDb } from '../src/db';
import { createLogger } from '../src/lib/logger';
import { LogCapture } from './helpers/context';
import { serverUrl } from './helpers/db-names';
import { bearer } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

/**
 * PostgreSQL errors quote the values they refused: in the message (`invalid input syntax for type uuid:
 * "…"`), in `detail` ("Key (email)=(…)") and, when the server's log_parameter_max_length_on_error allows,
 * in the `where` context ("unnamed portal parameter $1 = '…'"). None of it may reach a log line.
 */

const { ctx, ws } = useTestApp({ workspaces: 1 });
beforeAll(async () => {
  // A server configured to quote whole parameters in error context, as the reported deployment was.
  const admin = new Client({ connectionString: serverUrl('postgres') });
  await admin.connect();
  await admin.query(`ALTER DATABASE "${ctx.databaseName}" SET log_parameter_max_length_on_error = -1`);
  await admin.end();
});

const secret = () => `tg_auth_${randomBytes(12).toString('hex')}`;

/** A real PostgreSQL refusal of a statement parameter, on a fresh connection (so the database setting applies). */
async function refusalQuoting(value: string): Promise<Error> {
  const handle = createDb(ctx.config);
  try {
    await sql`select ${value}::uuid`.execute(handle.db);
  } catch (err) {
    return err as Error;
  } finally {
    await handle.close();
  }
  throw new Error('the query did not fail');
}

test('a PostgreSQL error quoting a statement parameter is logged with its code and routine but without the value', async () => {
  const token = secret();
  const err = await refusalQuoting(token);
  // The error itself carries the value twice: the message and the bind context.
  expect(err.message).toContain(token);
  expect((err as { where?: string }).where).toContain(token);

  const logs = new LogCapture();
  createLogger(ctx.config, logs).error({ err }, 'unhandled error');
  expect(logs.text).not.toContain(token);
  const [line] = logs.parsed();
  expect(line!.err).toMatchObject({ type: 'DatabaseError', code: '22P02', severity: 'ERROR', routine: 'string_to_uuid', message: 'invalid input syntax for type uuid: "[redacted]"' });
  expect(line!.err).not.toHaveProperty('where');
});

test('a unique violation is logged without the duplicated value from its detail', async () => {
  const email = `${secret()}@acme.test`;
  const err = await ctx.db
    .connection()
    .execute(async (c) => {
      await sql`create temporary table t_edge (email text unique)`.execute(c);
      await sql`insert into t_edge values (${email})`.execute(c);
      await sql`insert into t_edge values (${email})`.execute(c);
    })
    .then(
      () => null,
      (e: Error) => e,
    );
  expect(String((err as { detail?: string }).detail)).toContain(email);
  const logs = new LogCapture();
  const logger = createLogger(ctx.config, logs);
  logger.warn({ err }, 'insert failed');
  logger.warn({ err: new Error('batch failed', { cause: err }) }, 'batch failed');
  expect(logs.text).not.toContain(email);
  expect(logs.text).toContain('t_edge_email_key');
});

test("an unhandled PostgreSQL error on a request logs neither the value in the request's error line nor in its access line", async () => {
  const token = secret();
  const original = ctx.services.customers.read;
  // A service failing the way a statement with a refused parameter does: a real PostgreSQL error, through
  // the router, the error handler and pino-http's own error serializer.
  ctx.services.customers.read = async () => {
    await sql`select ${token}::uuid`.execute(ctx.db);
    throw new Error('unreachable');
  };
  try {
    ctx.logs.clear();
    const res = await ctx.http.get('/v1/customers/00000000-0000-4000-8000-000000000000').set(bearer(ws.ownerKey));
    expect(res.status).toBe(500);
    expect(res.text).not.toContain(token);
    expect(ctx.logs.text).toContain('22P02');
    expect(ctx.logs.text).not.toContain(token);
  } finally {
    ctx.services.customers.read = original;
  }
});
