/**
 * Hot queries as server-side prepared statements (src/db/named-statements.ts): parsed once per connection in
 * session pooling, never behind a transaction-mode pooler, and still answering after a migration changes a
 * table under them. Each case runs on a pool of one connection, so what that connection holds is visible
 * through pg_prepared_statements.
 */
import { sql, type Kysely } from 'kysely';
import { createDb, type DbHandle } from '../src/db';
import { prepared, preparedShapes } from '../src/db/prepared';
import { problemOf } from '../src/http/errors';
import { asDependencyError } from '../src/lib/errors';
import { startTestApp, type TestContext } from './helpers/context';

let ctx: TestContext;
const handles: DbHandle[] = [];
beforeAll(async () => {
  ctx = await startTestApp();
  await sql`CREATE TABLE IF NOT EXISTS named_probe (id int PRIMARY KEY, label text NOT NULL)`.execute(ctx.db);
  await sql`TRUNCATE named_probe`.execute(ctx.db);
  await sql`INSERT INTO named_probe VALUES (1, 'one'), (2, 'two')`.execute(ctx.db);
});
afterAll(async () => {
  for (const h of handles) await h.close();
  await sql`DROP TABLE IF EXISTS named_probe`.execute(ctx.db);
  await ctx.close();
});

/** A pool of one connection, in the given pooling mode. */
function onePool(mode: 'session' | 'transaction') {
  const h = createDb({ ...ctx.config, PG_POOL_MAX: 1, DATABASE_POOL_MODE: mode });
  handles.push(h);
  return h.db as unknown as Kysely<Record<string, Record<string, unknown>>>;
}

// The probe table is not in the service's schema: its builder is typed loosely.
type Loose = Kysely<Record<string, Record<string, unknown>>>;
const byId = (tag: string) =>
  prepared(1, (db, id: string) => (db as unknown as Loose).selectFrom('named_probe').selectAll().where('id', '=', id).where(sql<boolean>`${tag} = ${tag}`));

const preparedHere = async (db: Loose) =>
  (await sql<{ name: string; statement: string }>`SELECT name, statement FROM pg_prepared_statements`.execute(db)).rows;

test('in session pooling a hot query is prepared once on its connection and reused', async () => {
  const db = onePool('session');
  const q = byId('session');
  expect(await q(db as never, '1')).toEqual([{ id: 1, label: 'one' }]);
  expect(await q(db as never, '2')).toEqual([{ id: 2, label: 'two' }]);
  const mine = (await preparedHere(db)).filter((s) => s.statement.includes('named_probe'));
  expect(mine).toHaveLength(1);
  expect(mine[0]!.name).toMatch(/^hd_[0-9a-f]{24}$/);
});

test('behind a transaction-mode pooler nothing is prepared by name', async () => {
  const db = onePool('transaction');
  const q = byId('transaction');
  expect(await q(db as never, '1')).toEqual([{ id: 1, label: 'one' }]);
  expect(await q(db as never, '2')).toEqual([{ id: 2, label: 'two' }]);
  expect((await preparedHere(db)).filter((s) => s.statement.includes('named_probe'))).toEqual([]);
});

test('a column added under a prepared statement: the next read outside a transaction answers with it', async () => {
  const db = onePool('session');
  const q = byId('migrated');
  expect(await q(db as never, '1')).toEqual([{ id: 1, label: 'one' }]);
  await sql`ALTER TABLE named_probe ADD COLUMN extra text NOT NULL DEFAULT 'x'`.execute(ctx.db);
  try {
    expect(await q(db as never, '1')).toEqual([{ id: 1, label: 'one', extra: 'x' }]);
    expect(await q(db as never, '2')).toEqual([{ id: 2, label: 'two', extra: 'x' }]);
  } finally {
    await sql`ALTER TABLE named_probe DROP COLUMN extra`.execute(ctx.db);
  }
});

test('inside a transaction the stale statement fails as a retryable 503, and the next transaction answers', async () => {
  const db = onePool('session');
  const q = byId('migrated-in-tx');
  expect(await q(db as never, '1')).toEqual([{ id: 1, label: 'one' }]);
  await sql`ALTER TABLE named_probe ADD COLUMN extra2 int NOT NULL DEFAULT 7`.execute(ctx.db);
  try {
    const failed = await db
      .transaction()
      .execute((tx) => q(tx as never, '1'))
      .catch((err: unknown) => err);
    const problem = problemOf(asDependencyError(failed));
    expect(problem).toMatchObject({ status: 503, code: 'dependency_unavailable' });
    expect(await db.transaction().execute((tx) => q(tx as never, '2'))).toEqual([{ id: 2, label: 'two', extra2: 7 }]);
  } finally {
    await sql`ALTER TABLE named_probe DROP COLUMN extra2`.execute(ctx.db);
  }
});

test('one template per set of fields: each shape binds its own values, undefined fields are left out', async () => {
  let builds = 0;
  const update = preparedShapes<[string], { label?: string | null }, { id: number; label: string | null }>(1, (db, fields, id) => {
    builds += 1;
    return (db as unknown as Loose).updateTable('named_probe').set(fields).where('id', '=', id).returning(['id', 'label']) as never;
  });
  await sql`ALTER TABLE named_probe ALTER COLUMN label DROP NOT NULL`.execute(ctx.db);
  try {
    expect(await update(ctx.db, { label: 'uno' }, '1')).toEqual([{ id: 1, label: 'uno' }]);
    expect(await update(ctx.db, { label: 'dos' }, '2')).toEqual([{ id: 2, label: 'dos' }]);
    expect(await update(ctx.db, { label: null }, '1')).toEqual([{ id: 1, label: null }]);
    expect(builds).toBe(1);
    // No field set: a shape of its own (an UPDATE that sets nothing is refused by the builder, as before).
    await expect(update(ctx.db, { label: undefined }, '2')).rejects.toThrow();
    expect((await sql<{ label: string }>`SELECT label FROM named_probe WHERE id = 2`.execute(ctx.db)).rows[0]!.label).toBe('dos');
    // A field holding SQL instead of a value is refused, not sent as a value.
    await expect(update(ctx.db, { label: sql<string>`upper(label)` as unknown as string }, '2')).rejects.toThrow(/SQL expression/);
  } finally {
    await sql`UPDATE named_probe SET label = CASE id WHEN 1 THEN 'one' ELSE 'two' END`.execute(ctx.db);
    await sql`ALTER TABLE named_probe ALTER COLUMN label SET NOT NULL`.execute(ctx.db);
  }
});
