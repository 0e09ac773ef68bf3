/**
 * Queries compiled once (src/db/prepared.ts): each call runs the kept SQL with its own arguments, and a
 * builder that does not pass an argument straight through as a parameter is refused instead of misrun.
 */
import { sql } from 'kysely';
import { prepared } from '../src/db/prepared';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp();

test('each call answers for its own arguments, with constants of the builder kept', async () => {
  let builds = 0;
  const pair = prepared(2, (db, a: string, b: string) => {
    builds += 1;
    return db.selectNoFrom([sql<string>`${a}::text`.as('a'), sql<string>`${b}::text`.as('b'), sql<string>`${'constant'}::text`.as('c')]);
  });
  expect(await pair(ctx.db, 'x', 'y')).toEqual([{ a: 'x', b: 'y', c: 'constant' }]);
  expect(await pair(ctx.db, 'second', 'call')).toEqual([{ a: 'second', b: 'call', c: 'constant' }]);
  // An argument that looks like SQL is still only a value.
  expect(await pair(ctx.db, "'; DROP TABLE tickets; --", '')).toEqual([{ a: "'; DROP TABLE tickets; --", b: '', c: 'constant' }]);
  expect(builds).toBe(1);
});

test('runs inside the transaction it is given', async () => {
  const now = prepared(1, (db, tag: string) => db.selectNoFrom([sql<string>`${tag}::text`.as('tag'), sql<string>`txid_current_if_assigned()::text`.as('xid')]));
  const inside = await ctx.db.transaction().execute(async (tx) => {
    await sql`SELECT txid_current()`.execute(tx);
    return (await now(tx, 'in'))[0]!;
  });
  expect(inside.xid).not.toBeNull();
  expect((await now(ctx.db, 'out'))[0]!.xid).toBeNull();
});

test('refuses a builder that does not bind an argument as it is', async () => {
  const transformed = prepared(1, (db, a: string) => db.selectNoFrom([sql<string>`${a.toUpperCase()}::text`.as('a')]));
  await expect(transformed(ctx.db, 'x')).rejects.toThrow(/argument 0 is not a bound parameter/);
});
