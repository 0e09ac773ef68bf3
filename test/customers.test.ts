import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

interface CustomerBody {
  id: string;
  display_name: string;
  email: string;
  company: string;
  country: string;
  metadata: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

const tag = () => randomBytes(4).toString('hex');
const uniqueEmail = (local = 'c') => `${local}-${tag()}@example.test`;

/** Creates a customer through the API as `w`'s owner and returns the response body. */
async function createCustomer(w: Workspace, body: Record<string, unknown> = {}): Promise<CustomerBody> {
  const res = await ctx.http
    .post('/v1/customers')
    .set(bearer(w.ownerKey))
    .send({ display_name: 'Casey Customer', email: uniqueEmail(), ...body });
  if (res.status !== 201) throw new Error(`createCustomer failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const rowCount = async (tenantId: string) =>
  Number(
    (
      await ctx.db
        .selectFrom('customers')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('tenant_id', '=', tenantId)
        .executeTakeFirstOrThrow()
    ).n,
  );

const list = (w: Workspace, query = '') => ctx.http.get(`/v1/customers${query}`).set(bearer(w.ownerKey));
const ids = (res: { body: { customers: { id: string }[] } }) => res.body.customers.map((c) => c.id);

/** The spec's order: created_at descending, id descending (lower-case hex compares like PostgreSQL's uuid). */
const byNewest = (a: { created_at: string; id: string }, b: { created_at: string; id: string }) =>
  Date.parse(b.created_at) - Date.parse(a.created_at) || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

describe('POST /v1/customers', () => {
  test('returns 201 with every Customer field; country is upper-cased and metadata kept', async () => {
    const email = uniqueEmail('ada');
    const before = Date.now();
    const res = await ctx.http
      .post('/v1/customers')
      .set(bearer(ws.ownerKey))
      .send({ display_name: 'Ada Lovelace', email, company: 'Analytical Engines', country: 'de', metadata: { plan: 'gold', seats: 3, tags: ['vip'] } });
    expect(res.status).toBe(201);
    // The spec's eight fields, and the person's profile (issue 38): phone, notes, locale, time zone, handles, version, erased_at.
    expect(Object.keys(res.body).sort()).toEqual(
      ['company', 'country', 'created_at', 'display_name', 'email', 'erased_at', 'handles', 'id', 'locale', 'metadata', 'notes', 'phone', 'time_zone', 'updated_at', 'version'].sort(),
    );
    expect(res.body.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(res.body).toMatchObject({
      display_name: 'Ada Lovelace',
      email,
      company: 'Analytical Engines',
      country: 'DE',
      metadata: { plan: 'gold', seats: 3, tags: ['vip'] },
    });
    expect(new Date(res.body.created_at).toISOString()).toBe(res.body.created_at);
    expect(new Date(res.body.updated_at).toISOString()).toBe(res.body.updated_at);
    expect(Date.parse(res.body.created_at)).toBeGreaterThan(before - 60_000);

    const row = await ctx.db.selectFrom('customers').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
    expect(row.tenant_id).toBe(ws.tenantId);
    expect(row.country).toBe('DE');
    expect(row.metadata).toEqual({ plan: 'gold', seats: 3, tags: ['vip'] });
  });

  test('company and country default to "" and metadata to {} when absent', async () => {
    const res = await ctx.http.post('/v1/customers').set(bearer(ws.ownerKey)).send({ display_name: 'Bare', email: uniqueEmail() });
    expect(res.status).toBe(201);
    expect(res.body.company).toBe('');
    expect(res.body.country).toBe('');
    expect(res.body.metadata).toEqual({});
  });

  test('an email already used in the workspace, in a different case, is 409 customer_exists and nothing is written', async () => {
    const local = `Grace-${tag()}`;
    const first = await createCustomer(ws, { email: `${local}@Example.TEST`, display_name: 'Grace' });
    const before = await rowCount(ws.tenantId);

    const res = await ctx.http
      .post('/v1/customers')
      .set(bearer(ws.ownerKey))
      .send({ display_name: 'Impostor', email: `${local.toUpperCase()}@example.test`, company: 'Other' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('customer_exists');

    expect(await rowCount(ws.tenantId)).toBe(before);
    const same = await ctx.db
      .selectFrom('customers')
      .selectAll()
      .where('tenant_id', '=', ws.tenantId)
      .where(sql<string>`lower(email)`, '=', `${local}@example.test`.toLowerCase())
      .execute();
    expect(same).toHaveLength(1);
    expect(same[0]!.id).toBe(first.id);
    expect(same[0]!.display_name).toBe('Grace');
    expect(same[0]!.company).toBe('');
  });

  test('concurrent creates of one address in different cases: exactly one 201, the rest 409', async () => {
    const local = `race-${tag()}`;
    const variants = [`${local}@example.test`, `${local.toUpperCase()}@example.test`, `${local}@EXAMPLE.test`, `${local}@Example.Test`, `${local}@example.TEST`];
    const results = await Promise.all(
      variants.map((email) => ctx.http.post('/v1/customers').set(bearer(ws.ownerKey)).send({ display_name: 'Racer', email })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
    for (const r of results.filter((x) => x.status === 409)) expect(r.body.code).toBe('customer_exists');
    const rows = await ctx.db
      .selectFrom('customers')
      .select('id')
      .where('tenant_id', '=', ws.tenantId)
      .where(sql<string>`lower(email)`, '=', `${local}@example.test`)
      .execute();
    expect(rows).toHaveLength(1);
  });

  test('the same email in another workspace is a different customer', async () => {
    const other = await createWorkspace(ctx);
    const email = uniqueEmail('shared');
    const mine = await createCustomer(ws, { email });
    const theirs = await ctx.http.post('/v1/customers').set(bearer(other.ownerKey)).send({ display_name: 'Theirs', email: email.toUpperCase() });
    expect(theirs.status).toBe(201);
    expect(theirs.body.id).not.toBe(mine.id);
  });

  test('an editor can create; a viewer is refused with 403 insufficient_role and nothing is written', async () => {
    const editor = await addMember(ctx, ws, 'editor');
    const made = await ctx.http.post('/v1/customers').set(bearer(editor.token)).send({ display_name: 'By editor', email: uniqueEmail() });
    expect(made.status).toBe(201);

    const viewer = await addMember(ctx, ws, 'viewer');
    const before = await rowCount(ws.tenantId);
    const email = uniqueEmail('viewer');
    const res = await ctx.http.post('/v1/customers').set(bearer(viewer.token)).send({ display_name: 'By viewer', email });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect(await rowCount(ws.tenantId)).toBe(before);
  });

  test('a key with customers:read cannot create (403 insufficient_scope) but can read; customers:write can create', async () => {
    const reader = await mintKey(ctx, ws.ownerKey, { scopes: ['customers:read'] });
    const before = await rowCount(ws.tenantId);
    const res = await ctx.http.post('/v1/customers').set(bearer(reader.secret)).send({ display_name: 'Nope', email: uniqueEmail() });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_scope');
    expect(await rowCount(ws.tenantId)).toBe(before);
    expect((await ctx.http.get('/v1/customers?limit=1').set(bearer(reader.secret))).status).toBe(200);

    const writer = await mintKey(ctx, ws.ownerKey, { scopes: ['customers:write'] });
    const made = await ctx.http.post('/v1/customers').set(bearer(writer.secret)).send({ display_name: 'Yes', email: uniqueEmail() });
    expect(made.status).toBe(201);
    expect((await ctx.http.get(`/v1/customers/${made.body.id}`).set(bearer(writer.secret))).status).toBe(200);
  });

  test.each<[string, Record<string, unknown>]>([
    ['missing email', { display_name: 'No email' }],
    ['a malformed email', { display_name: 'Bad email', email: 'not-an-email' }],
    ['an unknown field', { display_name: 'Extra', email: 'extra@example.test', vip: true }],
    ['country "Germany"', { display_name: 'Country', email: 'country@example.test', country: 'Germany' }],
    ['missing display_name', { email: 'noname@example.test' }],
    ['a blank display_name', { display_name: '   ', email: 'blank@example.test' }],
    ['metadata that is not an object', { display_name: 'Meta', email: 'meta@example.test', metadata: ['a'] }],
  ])('refuses %s with 400 validation_failed and writes nothing', async (_label, body) => {
    const before = await rowCount(ws.tenantId);
    const res = await ctx.http.post('/v1/customers').set(bearer(ws.ownerKey)).send(body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(await rowCount(ws.tenantId)).toBe(before);
  });
});

describe('GET /v1/customers/{customer_id}', () => {
  test('returns the customer as created', async () => {
    const made = await createCustomer(ws, { company: 'Initech', country: 'us', metadata: { a: 1 } });
    const res = await ctx.http.get(`/v1/customers/${made.id}`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
    expect(res.body).toEqual(made);
  });

  test('a viewer can read', async () => {
    const made = await createCustomer(ws);
    const viewer = await addMember(ctx, ws, 'viewer');
    expect((await ctx.http.get(`/v1/customers/${made.id}`).set(bearer(viewer.token))).status).toBe(200);
  });

  test('another workspace\'s customer, an unknown uuid and a non-uuid are all 404', async () => {
    const other = await createWorkspace(ctx);
    const theirs = await createCustomer(other);
    for (const id of [theirs.id, randomUUID(), 'not-a-uuid', '123']) {
      const res = await ctx.http.get(`/v1/customers/${id}`).set(bearer(ws.ownerKey));
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    // …and it is still there for its own workspace.
    expect((await ctx.http.get(`/v1/customers/${theirs.id}`).set(bearer(other.ownerKey))).status).toBe(200);
  });
});

describe('GET /v1/customers', () => {
  /** A fresh workspace with `n` customers made through the API, returned newest first. */
  async function seeded(n: number): Promise<{ w: Workspace; made: CustomerBody[] }> {
    const w = await createWorkspace(ctx);
    const made: CustomerBody[] = [];
    for (let i = 0; i < n; i++) made.push(await createCustomer(w, { display_name: `Customer ${i}` }));
    return { w, made: [...made].sort(byNewest) };
  }

  test('without limit returns the whole workspace: limit echoes null, offset 0, total is the count', async () => {
    const { w, made } = await seeded(7);
    const res = await list(w);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['customers', 'limit', 'offset', 'total']);
    expect(res.body.limit).toBeNull();
    expect(res.body.offset).toBe(0);
    expect(res.body.total).toBe(7);
    expect(ids(res)).toEqual(made.map((c) => c.id));
    expect(res.body.customers[0]).toEqual(made[0]);
  });

  test('the whole workspace even beyond the largest page size', async () => {
    const w = await createWorkspace(ctx);
    await sql`
      INSERT INTO customers (id, tenant_id, display_name, email, created_at)
      SELECT gen_random_uuid(), ${w.tenantId}::uuid, 'Bulk ' || g, 'bulk' || g || '@example.test', now() - g * interval '1 second'
      FROM generate_series(1, 612) g
    `.execute(ctx.db);
    const all = await list(w);
    expect(all.status).toBe(200);
    expect(all.body.total).toBe(612);
    expect(all.body.customers).toHaveLength(612);
    expect(all.body.limit).toBeNull();
    const max = await list(w, '?limit=500');
    expect(max.status).toBe(200);
    expect(max.body.customers).toHaveLength(500);
    expect(max.body.limit).toBe(500);
  });

  test('limit=2&offset=1 returns the second and third newest and echoes limit 2', async () => {
    const { w, made } = await seeded(5);
    const res = await list(w, '?limit=2&offset=1');
    expect(res.status).toBe(200);
    expect(res.body.limit).toBe(2);
    expect(res.body.offset).toBe(1);
    expect(res.body.total).toBe(5);
    expect(ids(res)).toEqual([made[1]!.id, made[2]!.id]);
  });

  test('newest first', async () => {
    const w = await createWorkspace(ctx);
    const old = await createCustomer(w, { display_name: 'old' });
    const mid = await createCustomer(w, { display_name: 'mid' });
    const fresh = await createCustomer(w, { display_name: 'new' });
    // Set created_at apart explicitly so the order cannot hinge on the clock's resolution.
    const t = Date.now();
    for (const [c, ageMs] of [[old, 30_000], [mid, 20_000], [fresh, 10_000]] as const) {
      await sql`UPDATE customers SET created_at = ${new Date(t - ageMs)} WHERE id = ${c.id}`.execute(ctx.db);
    }
    const res = await list(w);
    expect(ids(res)).toEqual([fresh.id, mid.id, old.id]);
    const times = res.body.customers.map((c: CustomerBody) => Date.parse(c.created_at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
  });

  test('ties on created_at are broken by id, so paging with limit 1..3 visits every customer exactly once', async () => {
    const w = await createWorkspace(ctx);
    const tie = new Date('2024-05-01T12:00:00.000Z');
    const rows = [
      // Seven customers created in the very same instant, with random (not time-ordered) ids…
      ...Array.from({ length: 7 }, (_, i) => ({ id: randomUUID(), created_at: tie, i })),
      // …between one older and two newer ones (the newer two also tied with each other).
      { id: randomUUID(), created_at: new Date('2024-04-01T00:00:00.000Z'), i: 7 },
      { id: randomUUID(), created_at: new Date('2024-06-01T00:00:00.000Z'), i: 8 },
      { id: randomUUID(), created_at: new Date('2024-06-01T00:00:00.000Z'), i: 9 },
    ];
    await ctx.db
      .insertInto('customers')
      .values(
        rows.map((r) => ({
          id: r.id,
          tenant_id: w.tenantId,
          display_name: `Tied ${r.i}`,
          email: `tied-${r.i}-${tag()}@example.test`,
          company: '',
          country: '',
          metadata: '{}',
          created_at: r.created_at,
        })),
      )
      .execute();
    const expected = rows
      .map((r) => ({ id: r.id, created_at: r.created_at.toISOString() }))
      .sort(byNewest)
      .map((r) => r.id);

    // One read without limit already shows the order: created_at desc, then id desc.
    const whole = await list(w);
    expect(ids(whole)).toEqual(expected);

    for (const limit of [1, 2, 3]) {
      const visited: string[] = [];
      for (let offset = 0; ; offset += limit) {
        const page = await list(w, `?limit=${limit}&offset=${offset}`);
        expect(page.status).toBe(200);
        expect(page.body.total).toBe(rows.length);
        expect(page.body.limit).toBe(limit);
        expect(page.body.offset).toBe(offset);
        if (page.body.customers.length === 0) break;
        expect(page.body.customers.length).toBeLessThanOrEqual(limit);
        visited.push(...ids(page));
      }
      expect(new Set(visited).size).toBe(visited.length); // no overlap
      expect(visited).toEqual(expected); // no skip, and in order
    }
  });

  test('total is reported even when offset is past the end', async () => {
    const { w } = await seeded(3);
    for (const q of ['?offset=3', '?offset=10', '?limit=5&offset=3', '?limit=1&offset=1000']) {
      const res = await list(w, q);
      expect(res.status).toBe(200);
      expect(res.body.total).toBe(3);
      expect(res.body.customers).toEqual([]);
    }
  });

  test('an empty workspace lists total 0', async () => {
    const w = await createWorkspace(ctx);
    const res = await list(w);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ total: 0, limit: null, offset: 0, customers: [] });
  });

  test('offset 2147483647 (the maximum) is accepted and answers an empty page', async () => {
    const res = await list(ws, '?offset=2147483647');
    expect(res.status).toBe(200);
    expect(res.body.offset).toBe(2147483647);
    expect(res.body.customers).toEqual([]);
    expect(res.body.total).toBe(await rowCount(ws.tenantId));
    const limited = await list(ws, '?limit=500&offset=2147483647');
    expect(limited.status).toBe(200);
    expect(limited.body.customers).toEqual([]);
  });

  test.each(['0', '501', '-1', '1.5', 'abc', '1e2', '', ' 7', '0x10', '1000000000000'])(
    'limit=%p is 400 validation_failed',
    async (value) => {
      const res = await list(ws, `?limit=${encodeURIComponent(value)}`);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
    },
  );

  test.each(['-1', '2147483648', '1.5', 'abc', '1e2', '', '9999999999999999999999'])('offset=%p is 400 validation_failed', async (value) => {
    const res = await list(ws, `?limit=10&offset=${encodeURIComponent(value)}`);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
  });

  test.each(['?page=2', '?q=ada', '?sort=email', '?limit=1&limit=2', '?offset=0&offset=1'])(
    'an unknown or repeated query parameter (%s) is 400 validation_failed',
    async (query) => {
      const res = await list(ws, query);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
    },
  );

  test('a viewer can list', async () => {
    const viewer = await addMember(ctx, ws, 'viewer');
    const res = await ctx.http.get('/v1/customers?limit=1').set(bearer(viewer.token));
    expect(res.status).toBe(200);
    expect(res.body.limit).toBe(1);
  });

  test('a key without a customers scope is refused', async () => {
    const key = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:read'] });
    const res = await ctx.http.get('/v1/customers').set(bearer(key.secret));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_scope');
  });

  test('another workspace\'s customers never appear, in the list or the total', async () => {
    const a = await seeded(3);
    const b = await seeded(4);
    const listA = await list(a.w);
    const listB = await list(b.w);
    expect(listA.body.total).toBe(3);
    expect(listB.body.total).toBe(4);
    expect(ids(listA).sort()).toEqual(a.made.map((c) => c.id).sort());
    expect(ids(listB).sort()).toEqual(b.made.map((c) => c.id).sort());
    for (const q of ['?limit=500', '?limit=2&offset=1', '?offset=0']) {
      const pageA = await list(a.w, q);
      expect(pageA.body.total).toBe(3);
      for (const id of ids(pageA)) expect(b.made.map((c) => c.id)).not.toContain(id);
    }
  });
});

describe('the exact total kept by the database', () => {
  test('stays equal to the real row count through concurrent creates, bulk inserts and deletes', async () => {
    const w = await createWorkspace(ctx);
    const key = bearer(w.ownerKey);
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        ctx.http.post('/v1/customers').set(key).send({ display_name: `C${i}`, email: `c${i % 15}@count.test` }),
      ),
    );
    await sql`insert into customers (id, tenant_id, display_name, email)
      select gen_random_uuid(), ${w.tenantId}, 'bulk', 'bulk' || g || '@count.test' from generate_series(1, 40) g`.execute(ctx.db);
    await sql`delete from customers where tenant_id = ${w.tenantId} and email like 'bulk1%'`.execute(ctx.db);
    const real = await sql<{ n: number }>`select count(*)::int as n from customers where tenant_id = ${w.tenantId}`.execute(ctx.db);
    const res = await ctx.http.get('/v1/customers?limit=1').set(key);
    expect(real.rows[0]!.n).toBe(15 + 40 - 11);
    expect(res.body.total).toBe(real.rows[0]!.n);
  });
});
