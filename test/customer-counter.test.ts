/**
 * The customer counter under many writers (issue 20, "confirm under 4 workers"): a workspace's count is
 * sixteen rows, and a writer takes one no other transaction holds. Sixteen transactions of one workspace,
 * each on its own backend (as sixteen worker slots over four processes are), all create customers and stay
 * open together without one waiting on another; the total stays exact through inserts and deletes.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { bearer, createWorkspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp();

const within = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms).unref())]);

test('sixteen open transactions of one workspace create customers without waiting on each other; the total is exact', async () => {
  const ws = await createWorkspace(ctx);
  const clients = await Promise.all(
    Array.from({ length: 16 }, async () => {
      const c = new Client({ connectionString: ctx.config.DATABASE_URL });
      await c.connect();
      return c;
    }),
  );
  try {
    await Promise.all(clients.map((c) => c.query('BEGIN')));
    const ids = clients.map(() => randomUUID());
    // Every insert returns while all sixteen transactions are still open: none waits for another's commit.
    await within(
      Promise.all(clients.map((c, i) => c.query('INSERT INTO customers (id, tenant_id, display_name, email) VALUES ($1, $2, $3, $4)', [ids[i], ws.tenantId, `C${i}`, `c${i}-${ids[i]}@example.test`]))),
      5000,
      'the sixteen inserts',
    );
    await Promise.all(clients.map((c) => c.query('COMMIT')));
    const list = await ctx.http.get('/v1/customers').set(bearer(ws.ownerKey)).expect(200);
    expect(list.body.total).toBe(16);

    // Deletes take a free row too, and the sum stays exact.
    await Promise.all(clients.slice(0, 8).map((c) => c.query('BEGIN')));
    await within(Promise.all(clients.slice(0, 8).map((c, i) => c.query('DELETE FROM customers WHERE tenant_id = $1 AND id = $2', [ws.tenantId, ids[i]]))), 5000, 'the eight deletes');
    await Promise.all(clients.slice(0, 8).map((c) => c.query('COMMIT')));
    expect((await ctx.http.get('/v1/customers').set(bearer(ws.ownerKey)).expect(200)).body.total).toBe(8);
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
  }
});

test('a new workspace has its sixteen counter rows from the start', async () => {
  const ws = await createWorkspace(ctx);
  const rows = await ctx.db.selectFrom('customer_counts').select(['shard', 'n']).where('tenant_id', '=', ws.tenantId).orderBy('shard').execute();
  expect(rows.map((r) => Number(r.shard))).toEqual(Array.from({ length: 16 }, (_, i) => i));
});
