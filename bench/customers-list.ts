/**
 * The customer directory's page read with 100,000 customers in one workspace: GET /v1/customers?limit=50 (first
 * page) and ?limit=50&offset=50000 (deep page), against ?limit=50 on a 100-customer workspace as the baseline
 * measured in the same run. Then EXPLAIN (ANALYZE, BUFFERS) of the page query and of the total's read, and a check that the
 * page read is served by the customers_page index.
 *   npm run bench:customers   (PostgreSQL and Redis must answer; `npm run up` or `npm test` prepares them)
 * BENCH_SECONDS (default 5) and BENCH_CONNECTIONS (default 16) tune the load.
 */
import { sql } from 'kysely';
import { benchWorkspaces, getLoad, openBenchApp } from './lib';
import { createReport, runBench, type Load } from './report';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const BIG = 100_000;
const SMALL = 100;
const DB_NAME = 'helpdesk_bench_customers';
const report = createReport('customers', {
  title: 'Customer directory page read at 100,000 customers',
  settings: { connections: CONNECTIONS, seconds: DURATION, customers: BIG, 'baseline customers': SMALL },
});

async function main() {
  const bench = await openBenchApp({ database: DB_NAME, redisPrefix: 'hd_bench_customers' });
  const { db, services, port } = bench;
  try {
    const bootstrap = benchWorkspaces(services);
    const big = await bootstrap('Big');
    const small = await bootstrap('Small');

    // One statement per workspace: unique emails, created_at one minute apart going back in time (about 69 days
    // for the big workspace), ids random so index order is decided by created_at and not by insertion order.
    const seed = async (tenantId: string, n: number) => {
      const t0 = performance.now();
      await sql`
        INSERT INTO customers (id, tenant_id, display_name, email, company, country, metadata, created_at, updated_at)
        SELECT gen_random_uuid(), ${tenantId}::uuid, 'Customer ' || g, 'customer' || g || '@bench.test',
               'Company ' || (g % 997), (ARRAY['DE','US','FR','GB','NL','SE','JP','BR'])[1 + g % 8],
               jsonb_build_object('seq', g, 'tier', CASE WHEN g % 10 = 0 THEN 'gold' ELSE 'standard' END),
               now() - g * interval '1 minute', now() - g * interval '1 minute'
        FROM generate_series(1, ${n}::int) AS g
      `.execute(db);
      return performance.now() - t0;
    };
    const seedMs = await seed(big.tenant_id, BIG);
    await seed(small.tenant_id, SMALL);
    await sql`VACUUM ANALYZE customers`.execute(db);
    console.log(`seeded ${BIG} + ${SMALL} customers in ${(seedMs / 1000).toFixed(1)} s (one INSERT … SELECT each), then VACUUM ANALYZE`);


    // Every case first answers once, checked, so a figure can never be the speed of an error page.
    const check = async (path: string, key: string, total: number, expectedLength: number) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${key}` } });
      const body = (await res.json()) as { total: number; customers: unknown[] };
      if (res.status !== 200 || body.total !== total || body.customers.length !== expectedLength) {
        throw new Error(`${path}: ${res.status} total=${body.total} length=${body.customers?.length}`);
      }
    };

    const { load, run: measure } = getLoad(port, CONNECTIONS, { titleWidth: 46 });
    const run = (title: string, path: string, key: string) => measure(title, path, key, DURATION);

    const cases = [
      { title: `baseline ${SMALL} customers: ?limit=50`, path: '/v1/customers?limit=50', key: small.api_key.secret, total: SMALL },
      { title: `${BIG} customers: ?limit=50 (first page)`, path: '/v1/customers?limit=50', key: big.api_key.secret, total: BIG },
      { title: `${BIG} customers: ?limit=50&offset=50000`, path: '/v1/customers?limit=50&offset=50000', key: big.api_key.secret, total: BIG },
    ];
    for (const c of cases) await check(c.path, c.key, c.total, 50);

    console.log(`\nnode ${process.version}, ${CONNECTIONS} connections, ${DURATION}s each, API key auth`);
    // Unreported warm-up, so the first case measured does not also pay for JIT, pool growth and cold caches.
    for (const c of cases) await load(c.path, c.key, 1);
    const loads: Load[] = [];
    for (const c of cases) loads.push(await run(c.title, c.path, c.key));
    const rates = loads.map((l) => l.rate);
    console.log(
      `first page: ${((rates[1]! / rates[0]!) * 100).toFixed(0)}% of baseline; deep page: ${((rates[2]! / rates[0]!) * 100).toFixed(0)}% of baseline`,
    );
    cases.forEach((c, i) => report.load(c.title, loads[i]!, { unit: 'req/s', baseline: i === 0 ? undefined : loads[0] }));

    const explain = async (title: string, query: ReturnType<typeof sql>) => {
      const { rows } = await query.execute(db);
      const text = (rows as { 'QUERY PLAN': string }[]).map((r) => r['QUERY PLAN']).join('\n');
      console.log(`\n${title}\n${text}`);
      return text;
    };
    const tenant = big.tenant_id;
    const pagePlan = await explain(
      'EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM customers WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT 50 OFFSET 0',
      sql`EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM customers WHERE tenant_id = ${tenant}::uuid ORDER BY created_at DESC, id DESC LIMIT 50 OFFSET 0`,
    );
    // A page past the first, as the store reads it (issue 38): the offset walked on the index alone, then 50 rows by key.
    const deepPlan = await explain(
      'EXPLAIN (ANALYZE, BUFFERS) SELECT c.* FROM (SELECT id, created_at FROM customers WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT 50 OFFSET 50000) p JOIN customers c ON … ORDER BY …',
      sql`EXPLAIN (ANALYZE, BUFFERS) SELECT c.* FROM (SELECT id, created_at FROM customers WHERE tenant_id = ${tenant}::uuid ORDER BY created_at DESC, id DESC LIMIT 50 OFFSET 50000) p
          JOIN customers c ON c.tenant_id = ${tenant}::uuid AND c.id = p.id ORDER BY p.created_at DESC, p.id DESC`,
    );
    await explain(
      'EXPLAIN (ANALYZE, BUFFERS) SELECT n FROM customer_counts WHERE tenant_id = $1   -- the total',
      sql`EXPLAIN (ANALYZE, BUFFERS) SELECT n FROM customer_counts WHERE tenant_id = ${tenant}::uuid`,
    );

    // The deep page sorts its 50 rows after the join (by the keys the index gave them in order): a sort of the page, not of the workspace.
    const usesIndex = (plan: string) => /Index (Only )?Scan using customers_page on customers/.test(plan) && !/Sort\b[^\n]*rows=(\d{3,})/.test(plan);
    const ok = usesIndex(pagePlan);
    console.log(`\n${ok ? 'PASS' : 'FAIL'}: the page query is served by the customers_page index with no sort step`);
    console.log(`${usesIndex(deepPlan) ? 'PASS' : 'FAIL'}: the deep page query (offset 50000) is served by the customers_page index with no sort step`);
    const planFigure = (name: string, plan: string, target: string) =>
      report.figure({ name, value: usesIndex(plan) ? 'index scan on customers_page, no sort' : 'other plan', target, met: usesIndex(plan) });
    planFigure('plan of the first page query', pagePlan, 'served by an index (issue 3)');
    planFigure('plan of the deep page query (offset 50000)', deepPlan, 'served by an index (bench check)');
    if (!ok) process.exitCode = 1;
  } finally {
    await bench.close();
  }
}

runBench(main);
