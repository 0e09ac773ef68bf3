/**
 * Cursor paging of GET /v1/tickets at 100,000 tickets in one workspace (issue 18, part 4): the first page and
 * page 10,000 (the last ten tickets, reached with the cursor the page before would give out), newest first and
 * by -updated_at, against the first page of a 100-ticket workspace as the baseline measured in the same run.
 * Target: the deep page's p99 equal (±20 %) to the first page's; only a deep page more than 20 % slower misses. Then EXPLAIN (ANALYZE, BUFFERS) of both page
 * reads and a check that each is one index range scan with no sort step.
 *   npm run bench:paging   (PostgreSQL and Redis must answer; `npm run up` or `npm test` prepares them)
 * BENCH_SECONDS (default 5) and BENCH_CONNECTIONS (default 16) tune the load.
 */
import { sql } from 'kysely';
import { encodeCursor } from '../src/lib/paging';
import { benchWorkspaces, getLoad, openBenchApp } from './lib';
import { createReport, runBench, type Load } from './report';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const BIG = 100_000;
const SMALL = 100;
const LIMIT = 10;
const DB_NAME = 'helpdesk_bench_paging';
const report = createReport('paging', {
  title: 'Ticket list cursor pages at 100,000 tickets',
  settings: { connections: CONNECTIONS, seconds: DURATION, tickets: BIG, 'baseline tickets': SMALL, limit: LIMIT },
});

async function main() {
  const bench = await openBenchApp({ database: DB_NAME, redisPrefix: 'hd_bench_paging' });
  const { db, services, port } = bench;
  try {
    const bootstrap = benchWorkspaces(services);
    const big = await bootstrap('Big');
    const small = await bootstrap('Small');
    const api = (path: string, key: string, init: RequestInit = {}) =>
      fetch(`http://127.0.0.1:${port}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });

    // One real ticket per workspace (its customer and SLA policy), then the rest copied from it in one
    // INSERT … SELECT: created_at one minute apart going back, updated_at shuffled, ids random, so the index
    // order is decided by the timestamps and not by insertion order.
    const seed = async (key: string, tenantId: string, n: number) => {
      const res = await api('/v1/tickets', key, { method: 'POST', body: JSON.stringify({ subject: 'Seed', description: 'seed', customer_email: 'seed@bench.test' }) });
      if (res.status !== 201) throw new Error(`seed ticket: ${res.status} ${await res.text()}`);
      const seedTicket = (await res.json()) as { id: string };
      const t0 = performance.now();
      await sql`
        INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id,
                             first_response_due, resolution_due, tags, created_at, updated_at)
        SELECT gen_random_uuid(), t.tenant_id, 'Ticket ' || g, 'Bench ticket ' || g,
               (ARRAY['open','pending','solved','closed'])[1 + g % 4], (ARRAY['low','normal','high','urgent'])[1 + g % 4],
               (ARRAY['email','sms','web_chat','api'])[1 + g % 4], t.customer_id, t.sla_policy_id,
               now() + interval '4 hours', now() + interval '1 day', ARRAY['bench'],
               now() - g * interval '1 minute', now() - ((g * 7919) % ${n}::int) * interval '1 minute'
        FROM tickets t, generate_series(1, ${n - 1}::int) AS g
        WHERE t.tenant_id = ${tenantId}::uuid AND t.id = ${seedTicket.id}::uuid
      `.execute(db);
      return performance.now() - t0;
    };
    const seedMs = await seed(big.api_key.secret, big.tenant_id, BIG);
    await seed(small.api_key.secret, small.tenant_id, SMALL);
    await sql`VACUUM ANALYZE tickets`.execute(db);
    console.log(`seeded ${BIG} + ${SMALL} tickets in ${(seedMs / 1000).toFixed(1)} s (one INSERT … SELECT each), then VACUUM ANALYZE`);

    // The cursor page 10,000 starts from: the last row of page 9,999, as the API itself would have given it out.
    const cursorBefore = async (sort: '-created_at' | '-updated_at', position: number) => {
      const column = sort === '-created_at' ? 'created_at' : 'updated_at';
      const { rows } = await sql<{ id: string; key: string }>`
        SELECT id, to_char(${sql.ref(column)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS key
        FROM tickets WHERE tenant_id = ${big.tenant_id}::uuid
        ORDER BY ${sql.ref(column)} DESC, id DESC OFFSET ${position - 1} LIMIT 1`.execute(db);
      return encodeCursor({ sort, key: rows[0]!.key, id: rows[0]!.id });
    };
    const deepPosition = BIG - LIMIT;
    const deepCreated = await cursorBefore('-created_at', deepPosition);
    const deepUpdated = await cursorBefore('-updated_at', deepPosition);

    const cases = [
      { title: `baseline ${SMALL} tickets: first page`, path: `/v1/tickets?limit=${LIMIT}`, key: small.api_key.secret, last: false },
      { title: `${BIG} tickets: first page`, path: `/v1/tickets?limit=${LIMIT}`, key: big.api_key.secret, last: false },
      { title: `${BIG} tickets: page 10,000`, path: `/v1/tickets?limit=${LIMIT}&after=${deepCreated}`, key: big.api_key.secret, last: true },
      { title: `${BIG} tickets: first page, sort=-updated_at`, path: `/v1/tickets?limit=${LIMIT}&sort=-updated_at`, key: big.api_key.secret, last: false },
      { title: `${BIG} tickets: page 10,000, sort=-updated_at`, path: `/v1/tickets?limit=${LIMIT}&sort=-updated_at&after=${deepUpdated}`, key: big.api_key.secret, last: true },
    ];
    // Every case first answers once, checked, so a figure can never be the speed of an error page: a full page,
    // and the deep pages are the last (next_cursor null).
    for (const c of cases) {
      const res = await api(c.path, c.key);
      const body = (await res.json()) as { tickets: unknown[]; next_cursor: string | null };
      if (res.status !== 200 || body.tickets.length !== LIMIT || (body.next_cursor === null) !== c.last) {
        throw new Error(`${c.path}: ${res.status} length=${body.tickets?.length} next_cursor=${body.next_cursor}`);
      }
    }

    const { load, run: measure } = getLoad(port, CONNECTIONS, { titleWidth: 50 });
    const run = async (title: string, path: string, key: string) => {
      const r = await measure(title, path, key, DURATION);
      if (r.non2xx > 0) process.exitCode = 1;
      return r;
    };

    console.log(`\nnode ${process.version}, ${CONNECTIONS} connections, ${DURATION}s each, API key auth, limit=${LIMIT}`);
    // Unreported warm-up, so the first case measured does not also pay for JIT, pool growth and cold caches.
    for (const c of cases) await load(c.path, c.key, 1);
    const loads: Load[] = [];
    for (const c of cases) loads.push(await run(c.title, c.path, c.key));
    cases.forEach((c, i) => report.load(c.title, loads[i]!, { unit: 'req/s', baseline: i === 0 ? undefined : loads[0] }));

    // The target: a deep page costs what the first costs (p99 within ±20 %), in both sort orders.
    const compare = (name: string, first: Load, deep: Load) => {
      const ratio = deep.p99 / first.p99;
      // Equal within ±20 % is the wording; a deep page that comes out faster than the first is noise
      // in the good direction, not a miss, so only "more than 20 % slower" fails.
      const met = ratio <= 1.2;
      console.log(`${name}: page 10,000 p99 ${deep.p99} ms vs first page ${first.p99} ms = ${ratio.toFixed(2)}x (${met ? 'met' : 'MISSED'}: at most 1.2x)`);
      report.figure({ name, value: deep.p99, unit: 'ms', baseline: first.p99, target: 'equal ±20 % to the first page, i.e. at most 1.2x (issue 18)', met });
    };
    compare('page 10,000 p99 against the first page p99 (-created_at)', loads[1]!, loads[2]!);
    compare('page 10,000 p99 against the first page p99 (-updated_at)', loads[3]!, loads[4]!);

    const explain = async (title: string, query: ReturnType<typeof sql>) => {
      const { rows } = await query.execute(db);
      const text = (rows as { 'QUERY PLAN': string }[]).map((r) => r['QUERY PLAN']).join('\n');
      console.log(`\n${title}\n${text}`);
      return text;
    };
    const tenant = big.tenant_id;
    const lastCreated = JSON.parse(Buffer.from(deepCreated, 'base64url').toString()) as { k: string; i: string };
    const lastUpdated = JSON.parse(Buffer.from(deepUpdated, 'base64url').toString()) as { k: string; i: string };
    const plans = [
      { name: 'first page (-created_at)', index: 'tickets_page', plan: await explain('EXPLAIN (ANALYZE, BUFFERS) first page, -created_at', sql`EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM tickets WHERE tenant_id = ${tenant}::uuid ORDER BY created_at DESC, id DESC LIMIT ${LIMIT + 1}`) },
      {
        name: 'page 10,000 (-created_at)',
        index: 'tickets_page',
        plan: await explain('EXPLAIN (ANALYZE, BUFFERS) page 10,000, -created_at', sql`EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM tickets WHERE tenant_id = ${tenant}::uuid AND (created_at, id) < (${lastCreated.k}::timestamptz, ${lastCreated.i}::uuid) ORDER BY created_at DESC, id DESC LIMIT ${LIMIT + 1}`),
      },
      {
        name: 'page 10,000 (-updated_at)',
        index: 'tickets_updated_page',
        plan: await explain('EXPLAIN (ANALYZE, BUFFERS) page 10,000, -updated_at', sql`EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM tickets WHERE tenant_id = ${tenant}::uuid AND (updated_at, id) < (${lastUpdated.k}::timestamptz, ${lastUpdated.i}::uuid) ORDER BY updated_at DESC, id DESC LIMIT ${LIMIT + 1}`),
      },
    ];
    let allIndexed = true;
    for (const p of plans) {
      const ok = new RegExp(`Index Scan using ${p.index} on tickets`).test(p.plan) && !/\bSort\b/.test(p.plan);
      allIndexed &&= ok;
      console.log(`${ok ? 'PASS' : 'FAIL'}: the ${p.name} read is an index scan on ${p.index} with no sort step`);
      report.figure({ name: `plan of the ${p.name} read`, value: ok ? `index scan on ${p.index}, no sort` : 'other plan', target: 'one index range scan (issue 18)', met: ok });
    }
    if (!allIndexed) process.exitCode = 1;
  } finally {
    await bench.close();
  }
}

runBench(main);
