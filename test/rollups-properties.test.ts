/**
 * Rollups: random sequences against a direct aggregation over raw rows, ETag / If-None-Match on both reads,
 * and the verify CLI.
 */
import { spawn } from 'node:child_process';
import { isDeepStrictEqual } from 'node:util';
import { sql } from 'kysely';
import { addMember, createWorkspace } from './helpers/factories';
import { createTicket } from './helpers/tickets';
import { ROOT, TSX, aggregate, api, bucketCount, compareAll, csat, entry, expectNoDifferences, explain, journalCount, mulberry32, summary, todo, type Mismatch, World, useRollupsApp } from './helpers/rollups';

const { ctx, running } = useRollupsApp();

// 2. Property-style: random sequences against a raw SQL aggregation
// ---------------------------------------------------------------------------------------------------------

describe('property: endpoint answers equal a direct aggregation over raw rows', () => {
  test('5 rounds × 60 random creates, edits, deletes, moves and backdates: equal before and after a fold; verify() finds nothing', async () => {
    const rng = mulberry32(0x5eed_2024);
    const w = await World.create();
    const mismatches: Mismatch[] = [];
    let journalSeen = 0;
    for (let round = 0; round < 5; round += 1) {
      if (round === 2) await w.removeExtra();
      // Backdates (which rebuild the buckets) come early, so the reads below see buckets plus journal.
      for (let i = 0; i < 60; i += 1) await w.randomOp(rng, i < 40);
      await w.rawRowsMatchModel();

      journalSeen += await journalCount(w.tenantId);
      const before = await compareAll(w, mulberry32(round), `round ${round} before fold`, mismatches);
      await expectNoDifferences(w.tenantId);

      await ctx.services.rollups.fold(w.tenantId);
      expect(await journalCount(w.tenantId)).toBe(0);
      await expectNoDifferences(w.tenantId);
      const after = await compareAll(w, mulberry32(round), `round ${round} after fold`, mismatches);
      // The same queries answer the same before and after the fold, order included.
      for (const [k, v] of before) if (!isDeepStrictEqual(after.get(k), v)) mismatches.push({ label: `round ${round}: fold changed the answer`, query: k, got: after.get(k), want: v });
    }
    // The sequence did exercise the journal, both windows and every kind of row.
    expect(journalSeen).toBeGreaterThan(0);
    expect(w.entries.size).toBeGreaterThan(10);
    expect(w.csat.size).toBeGreaterThan(10);
    const spread = await sql<{ recent: number; older: number; old: number }>`
      select count(*) filter (where created_at > now() - interval '2 days')::int as recent,
             count(*) filter (where created_at <= now() - interval '2 days' and created_at > now() - interval '30 days')::int as older,
             count(*) filter (where created_at <= now() - interval '30 days')::int as old
      from time_entries where tenant_id = ${w.tenantId}`.execute(ctx.db);
    expect(spread.rows[0]!.older + spread.rows[0]!.old).toBeGreaterThan(0);
    expect(mismatches.length === 0 ? [] : explain(mismatches)).toEqual([]);
    // 300 random writes through the API plus ten folds and comparisons: about 27 s alone on this 2-core
    // machine, more beside the rest of the suite. The property is the point here, not the pace.
  }, 120_000);
});

// ---------------------------------------------------------------------------------------------------------
// 5. ETag / If-None-Match
// ---------------------------------------------------------------------------------------------------------

describe('ETag and If-None-Match on both reads', () => {
  test('time summary: 304 while nothing changed (a fold changes nothing), 200 with a new ETag after a time or todo write', async () => {
    const ws = await createWorkspace(ctx);
    const t = await createTicket(ctx, ws);
    await entry(ws, t.id, { minutes: 10 });
    const r1 = await api.summaryRaw(ws, { since_days: 7 });
    expect(r1.status).toBe(200);
    const tag1 = r1.headers.etag as string;
    expect(tag1).toMatch(/^"[^"]+"$/);
    const again = await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag1);
    expect(again.status).toBe(304);
    expect(again.text ?? '').toBe('');
    expect(again.headers.etag).toBe(tag1);

    await ctx.services.rollups.fold(ws.tenantId);
    expect((await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag1)).status).toBe(304);
    // Another query is another answer.
    const other = await api.summaryRaw(ws, { since_days: 8 }).set('If-None-Match', tag1);
    expect(other.status).toBe(200);

    await entry(ws, t.id, { minutes: 5 });
    const r2 = await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag1);
    expect(r2.status).toBe(200);
    expect(r2.body.total.minutes).toBe(15);
    const tag2 = r2.headers.etag as string;
    expect(tag2).not.toBe(tag1);
    expect((await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag2)).status).toBe(304);

    await todo(ws, t.id, {});
    const r3 = await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag2);
    expect(r3.status).toBe(200);
    expect(r3.headers.etag).not.toBe(tag2);
    expect(r3.body.todos.total.total).toBe(1);
  });

  test('csat aggregate: 304 while nothing changed, 200 with a new ETag after a response', async () => {
    const ws = await createWorkspace(ctx);
    const t = await createTicket(ctx, ws);
    const r1 = await api.csatRaw(ws);
    expect(r1.status).toBe(200);
    const tag1 = r1.headers.etag as string;
    expect(tag1).toMatch(/^"[^"]+"$/);
    expect((await api.csatRaw(ws).set('If-None-Match', tag1)).status).toBe(304);
    await csat(ws, t.id, 4);
    const r2 = await api.csatRaw(ws).set('If-None-Match', tag1);
    expect(r2.status).toBe(200);
    expect(r2.body.overall.responses).toBe(1);
    const tag2 = r2.headers.etag as string;
    expect(tag2).not.toBe(tag1);
    await ctx.services.rollups.fold(ws.tenantId);
    expect((await api.csatRaw(ws).set('If-None-Match', tag2)).status).toBe(304);
  });
});

// ---------------------------------------------------------------------------------------------------------
// 6. The verify CLI
// ---------------------------------------------------------------------------------------------------------

function runTsx(args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('npm run rollups:verify', () => {
  const env = () => ({ NODE_ENV: 'test', DATABASE_URL: ctx.config.DATABASE_URL, API_KEY_PEPPER: ctx.config.API_KEY_PEPPER });
  const verifyCli = (tenantId: string, ...extra: string[]) => runTsx(['scripts/rollups-verify.ts', '--tenant', tenantId, ...extra], env());
  const differenceCount = (stdout: string, tenantId: string) => Number(new RegExp(`^rollups of ${tenantId}: (\\d+) difference\\(s\\)$`, 'm').exec(stdout)?.[1] ?? 0);
  let w: World;

  beforeAll(async () => {
    // A randomized sequence of creates, edits, deletes and backdates, folded halfway, journal left after.
    const rng = mulberry32(0xc1_1);
    w = await World.create();
    for (let i = 0; i < 40; i += 1) await w.randomOp(rng, i < 25);
    await ctx.services.rollups.fold(w.tenantId);
    for (let i = 0; i < 15; i += 1) await w.randomOp(rng, false);
  });
  /** Each corruption is repaired from raw rows afterwards, so every test starts clean. */
  afterEach(async () => {
    await ctx.services.rollups.rebuild(w.tenantId);
  });

  test('after a random sequence of creates, edits, deletes (journal not yet folded): exit 0 and "no differences"', async () => {
    expect(await journalCount(w.tenantId)).toBeGreaterThan(0);
    expect(await bucketCount(w.tenantId)).toBeGreaterThan(0);
    const clean = await verifyCli(w.tenantId);
    expect({ code: clean.code, stderr: clean.stderr }).toEqual({ code: 0, stderr: '' });
    expect(clean.stdout).toContain(`rollups of ${w.tenantId}: no differences between buckets and raw rows`);
  });

  test('a corrupted time bucket: exit 1 and a line naming its day and user with buckets vs raw minutes', async () => {
    await ctx.services.rollups.fold(w.tenantId);
    const tb = await sql<{ day: string; user_id: string | null }>`
      update time_buckets set minutes = minutes + 7
      where ctid = (select ctid from time_buckets where tenant_id = ${w.tenantId} order by day desc, minutes desc limit 1)
      returning day::text, user_id::text`.execute(ctx.db);
    expect(tb.rows).toHaveLength(1);
    const t = tb.rows[0]!;
    expect((await ctx.services.rollups.verify(w.tenantId)).time).toHaveLength(1);

    const dirty = await verifyCli(w.tenantId);
    expect(dirty.code).toBe(1);
    const line = dirty.stdout.split('\n').find((l) => l.startsWith(`time  day ${t.day} user ${t.user_id ?? '-'} `));
    expect(line).toBeDefined();
    const [, folded, raw] = /buckets \d+ entries \/ (\d+) min, raw \d+ entries \/ (\d+) min$/.exec(line!)!;
    expect(Number(folded) - Number(raw)).toBe(7);
    expect(differenceCount(dirty.stdout, w.tenantId)).toBeGreaterThanOrEqual(1);
    expect(dirty.stdout).not.toContain('no differences');
  });

  test('a corrupted csat bucket: exit 1 and a line naming its day and score with buckets vs raw', async () => {
    await ctx.services.rollups.fold(w.tenantId);
    const cb = await sql<{ day: string; score: number }>`
      update csat_buckets set responses = responses + 2
      where ctid = (select ctid from csat_buckets where tenant_id = ${w.tenantId} order by day desc, score limit 1)
      returning day::text, score`.execute(ctx.db);
    expect(cb.rows).toHaveLength(1);
    const c = cb.rows[0]!;
    const dirty = await verifyCli(w.tenantId);
    expect(dirty.code).toBe(1);
    const m = new RegExp(`^csat  day ${c.day} assignee \\S+ score ${c.score}: buckets (\\d+), raw (\\d+)$`, 'm').exec(dirty.stdout);
    expect(m).not.toBeNull();
    expect(Number(m![1]) - Number(m![2])).toBe(2);
    expect(differenceCount(dirty.stdout, w.tenantId)).toBeGreaterThanOrEqual(1);
  });

  test('--repair reports the differences, rebuilds from raw rows, and the next run exits 0', async () => {
    await sql`update time_buckets set entries = entries + 1 where ctid = (select ctid from time_buckets where tenant_id = ${w.tenantId} limit 1)`.execute(ctx.db);
    const repair = await verifyCli(w.tenantId, '--repair');
    expect(repair.code).toBe(1);
    expect(repair.stdout).toContain('buckets rebuilt from raw rows');
    await expectNoDifferences(w.tenantId);
    const after = await verifyCli(w.tenantId);
    expect(after.code).toBe(0);
  });

  test('a --tenant that is not a uuid exits 2', async () => {
    const r = await verifyCli('acme');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--tenant must be a workspace id');
  });
});

/**
 * Unfiltered reads are served from per-dimension rows (time_dims, csat_dims) when those tables exist: a
 * consistency check that cannot see them cannot vouch for the answers. Skipped where the tables do not exist.
 */
describe('npm run rollups:verify sees the tables the endpoints read', () => {
  const env = () => ({ NODE_ENV: 'test', DATABASE_URL: ctx.config.DATABASE_URL, API_KEY_PEPPER: ctx.config.API_KEY_PEPPER });
  const hasTable = async (name: string) => (await sql<{ t: string | null }>`select to_regclass(${name})::text as t`.execute(ctx.db)).rows[0]!.t !== null;

  for (const [table, column, endpoint] of [
    ['time_dims', 'minutes', 'time summary'],
    ['csat_dims', 'responses', 'csat aggregate'],
  ] as const) {
    test(`a corrupted ${table} row changes the ${endpoint} answer and verify exits 1`, async () => {
      if (!(await hasTable(table))) return;
      const ws = await createWorkspace(ctx);
      const a = await addMember(ctx, ws, 'editor');
      const t = await createTicket(ctx, ws, { assignee_id: a.userId });
      await entry(ws, t.id, { minutes: 30, user_id: a.userId });
      await csat(ws, t.id, 4);
      await ctx.services.rollups.fold(ws.tenantId);
      await expectNoDifferences(ws.tenantId);
      const before = { time: await summary(ws, { since_days: 7 }), csat: await aggregate(ws, 7) };

      const r = await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${sql.ref(column)} + 3 where tenant_id = ${ws.tenantId}`.execute(ctx.db);
      expect(Number(r.numAffectedRows)).toBeGreaterThan(0);
      const after = { time: await summary(ws, { since_days: 7 }), csat: await aggregate(ws, 7) };
      expect(after).not.toEqual(before); // the endpoint reads this table

      const run = await runTsx(['scripts/rollups-verify.ts', '--tenant', ws.tenantId], env());
      expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: expect.stringMatching(/difference\(s\)/) });
    });
  }
});

// ---------------------------------------------------------------------------------------------------------
