/**
 * Rollup and list reads from a read replica (DATABASE_READ_URL; issue 20), against a real streaming replica
 * of a primary of the suite's own (helpers/pg-replica: initdb and pg_basebackup from the system's
 * PostgreSQL). Lag is made on demand by pausing WAL replay on the replica. A caller reads its own writes at
 * once; another caller may read the replica's older state within DATABASE_READ_MAX_LAG_MS; past that, or with
 * the replica down, reads go to the primary; authentication (and its last_used_at touch) never uses the
 * replica.
 */
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { startReplicaPair, type OwnReplicaPair } from './helpers/pg-replica';
import { eventually, sleep } from './helpers/wait';

const DB = 'helpdesk_replica';
let pair: OwnReplicaPair;

beforeAll(async () => {
  pair = await startReplicaPair();
  await pair.createMigratedDatabase(DB);
}, 120_000);

afterAll(() => {
  pair?.destroy();
});

const app = (maxLagMs: number) => startTestApp({ database: false, env: pair.appEnv(DB, maxLagMs) });

async function customerCount(ctx: TestContext, token: string): Promise<number> {
  const res = await ctx.http.get('/v1/customers').set(bearer(token));
  expect(res.status).toBe(200);
  return res.body.total as number;
}

const addCustomer = (ctx: TestContext, w: Workspace) =>
  ctx.http.post('/v1/customers').set(bearer(w.ownerKey)).send({ display_name: 'Replica Test', email: `r-${Math.random().toString(36).slice(2)}@example.test` }).expect(201);

describe('with a replica allowed to be a minute behind', () => {
  let ctx: TestContext;
  let w: Workspace;
  let reader: { secret: string };
  beforeAll(async () => {
    ctx = await app(60_000);
    w = await createWorkspace(ctx);
    reader = await mintKey(ctx, w.ownerKey, { scopes: ['customers:read'] });
    await addCustomer(ctx, w);
    await pair.caughtUp(DB);
    // A first read starts the lag readings.
    await customerCount(ctx, reader.secret);
    await sleep(700);
  });
  afterAll(async () => {
    await pair.resumeReplay().catch(() => {});
    await ctx?.close();
  });

  test('a caller reads its own write at once while the replica is behind; another caller reads the replica until it replays', async () => {
    await pair.pauseReplay();
    const before = await customerCount(ctx, reader.secret);
    await addCustomer(ctx, w);
    // The writer: from the primary (its write mark), so its own customer is there.
    expect(await customerCount(ctx, w.ownerKey)).toBe(before + 1);
    // A caller that did not write reads the replica, which has not replayed the write yet.
    expect(await customerCount(ctx, reader.secret)).toBe(before);
    await pair.resumeReplay();
    await eventually(async () => ((await customerCount(ctx, reader.secret)) === before + 1 ? true : undefined), 10_000, 'the reader to see the replayed write');
  });

  test("a new API key's first request (which touches last_used_at) answers normally: authentication stays on the primary", async () => {
    const fresh = await mintKey(ctx, w.ownerKey, { scopes: ['customers:read'] });
    const res = await ctx.http.get('/v1/customers').set(bearer(fresh.secret));
    expect(res.status).toBe(200);
  });
});

describe('with a replica allowed to be half a second behind', () => {
  let ctx: TestContext;
  let w: Workspace;
  let reader: { secret: string };
  beforeAll(async () => {
    ctx = await app(500);
    w = await createWorkspace(ctx);
    reader = await mintKey(ctx, w.ownerKey, { scopes: ['customers:read'] });
    await customerCount(ctx, reader.secret);
  });
  afterAll(async () => {
    await pair.resumeReplay().catch(() => {});
    await ctx?.close();
  });

  test('once the replica is further behind than DATABASE_READ_MAX_LAG_MS, every read goes to the primary', async () => {
    await pair.pauseReplay();
    const before = await customerCount(ctx, w.ownerKey);
    await addCustomer(ctx, w);
    // Past the allowed lag (and a lag reading or two), the reader gets the primary's answer.
    await sleep(1500);
    expect(await customerCount(ctx, reader.secret)).toBe(before + 1);
    await pair.resumeReplay();
  });

  test('with the replica down, reads go to the primary after the next lag reading', async () => {
    await pair.caughtUp(DB);
    await addCustomer(ctx, w);
    const expected = await customerCount(ctx, w.ownerKey);
    pair.stopReplica();
    await sleep(1500);
    expect(await customerCount(ctx, reader.secret)).toBe(expected);
  });
});
