/**
 * The schema stays distributable by workspace (issue 20): read from PostgreSQL's catalog after every
 * migration. A tenant table (one with `tenant_id`) must have a key, every primary key and unique
 * constraint or index must contain `tenant_id` (Citus enforces uniqueness only with the distribution
 * column), and every foreign key to another tenant table must carry it (so it stays within one shard). Every
 * other table must be a reference table on the list below (copied to every node), or local bookkeeping.
 * The plan is in docs/decisions/data-and-scale.md, "A schema Citus can distribute".
 */
import { sql } from 'kysely';
import { startTestApp, type TestContext } from './helpers/context';

/**
 * Copied to every node: referenced by tenant tables, or looked up before the workspace is known (`routes` maps
 * what a request carries to its workspace; its `tenant_id` is data, not a distribution column).
 */
const REFERENCE = ['tenants', 'users', 'routes'];
/** The migrator's own tables, on the coordinator only. */
const LOCAL = ['kysely_migration', 'kysely_migration_lock'];

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

interface Table {
  name: string;
  tenant: boolean;
}
interface Key {
  table: string;
  name: string;
  kind: 'p' | 'u' | 'f' | 'i';
  columns: string[];
  references: string | null;
}

async function catalog(): Promise<{ tables: Table[]; keys: Key[] }> {
  const tables = await sql<Table>`
    SELECT c.relname AS name, c.relname <> ALL(${REFERENCE}::text[]) AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped) AS tenant
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')`.execute(ctx.db);
  // Constraints (primary, unique, foreign) and unique indexes that no constraint owns, with their columns.
  const keys = await sql<Key>`
    SELECT t.relname AS table, con.conname AS name, con.contype AS kind,
           ARRAY(SELECT a.attname FROM unnest(con.conkey) k JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k)::text[] AS columns,
           r.relname AS references
    FROM pg_constraint con
    JOIN pg_class t ON t.oid = con.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
    LEFT JOIN pg_class r ON r.oid = con.confrelid
    WHERE n.nspname = 'public' AND con.contype IN ('p', 'u', 'f')
    UNION ALL
    SELECT t.relname, ic.relname, 'i', ARRAY(SELECT a.attname FROM unnest(i.indkey) k JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k)::text[], NULL
    FROM pg_index i
    JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE n.nspname = 'public' AND i.indisunique AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`.execute(ctx.db);
  return { tables: tables.rows, keys: keys.rows };
}

test('every table is tenant-keyed, a listed reference table, or local bookkeeping', async () => {
  const { tables } = await catalog();
  const stray = tables.filter((t) => !t.tenant && !REFERENCE.includes(t.name) && !LOCAL.includes(t.name)).map((t) => t.name);
  expect(stray).toEqual([]);
  // The lists name real tables (a renamed one would silently stop being checked).
  for (const name of [...REFERENCE, ...LOCAL]) expect(tables.map((t) => t.name)).toContain(name);
});

test('every tenant table has a key, and every primary key and unique constraint or index holds tenant_id', async () => {
  const { tables, keys } = await catalog();
  const tenant = new Set(tables.filter((t) => t.tenant).map((t) => t.name));
  // A primary key, or a unique constraint where a key column may be null (the rollup buckets' dimensions).
  const keyless = [...tenant].filter((t) => !keys.some((k) => k.table === t && (k.kind === 'p' || k.kind === 'u')));
  expect(keyless).toEqual([]);
  const lacking = keys
    .filter((k) => tenant.has(k.table) && (k.kind === 'p' || k.kind === 'u' || k.kind === 'i') && !k.columns.includes('tenant_id'))
    .map((k) => k.name)
    .sort();
  expect(lacking).toEqual([]);
});

test('every foreign key from a tenant table to another tenant table carries tenant_id', async () => {
  const { tables, keys } = await catalog();
  const tenant = new Set(tables.filter((t) => t.tenant).map((t) => t.name));
  const crossing = keys.filter((k) => k.kind === 'f' && tenant.has(k.table) && k.references !== null && tenant.has(k.references) && !k.columns.includes('tenant_id'));
  expect(crossing.map((k) => `${k.table}.${k.name} → ${k.references}`)).toEqual([]);
  // Foreign keys out of tenant tables go to tenant tables or to reference tables, nowhere else.
  const elsewhere = keys.filter((k) => k.kind === 'f' && tenant.has(k.table) && k.references !== null && !tenant.has(k.references) && !REFERENCE.includes(k.references));
  expect(elsewhere.map((k) => `${k.table}.${k.name} → ${k.references}`)).toEqual([]);
});

test('no table keeps two indexes on the same columns: every write would pay for both', async () => {
  // Same table, columns, opclasses, predicate and expressions: one index answers everything the other does.
  const twins = await sql<{ indexes: string[] }>`
    SELECT array_agg(ic.relname::text ORDER BY ic.relname) AS indexes
    FROM pg_index i
    JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_namespace n ON n.oid = ic.relnamespace
    WHERE n.nspname = 'public'
    GROUP BY i.indrelid, ic.relam, i.indkey::text, i.indclass::text, i.indoption::text, coalesce(pg_get_expr(i.indpred, i.indrelid), ''), coalesce(pg_get_expr(i.indexprs, i.indrelid), '')
    HAVING count(*) > 1`.execute(ctx.db);
  expect(twins.rows.map((r) => r.indexes.join(' = '))).toEqual([]);
});
