/**
 * Customer search (issue 36): GET /v1/customers/search over the real API. Fragments of names (accents and case
 * ignored), emails and channel handles (phone numbers by their digits, however they are written), ranked exact →
 * prefix → contains and newest first within each, in cursor pages that neither repeat nor skip; never another
 * workspace's customers; short, long and hostile queries refused before PostgreSQL works on them; a search that
 * runs past SEARCH_TIMEOUT_MS answers 422.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { sql } from 'kysely';
import { RANKED_HITS_MAX } from '../src/domains/customers/service';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { connect, ingest } from './helpers/ingest';
import { whileLocked } from './helpers/locks';
import { smsPayload, telegramUpdate, whatsappPayload } from './helpers/payloads';
import { useTestApp } from './helpers/use-test-app';

const TIMEOUT_MS = 1500;
const { ctx } = useTestApp({ workers: true, env: { SEARCH_TIMEOUT_MS: String(TIMEOUT_MS), JOB_WAIT_MS: '5000' } });

interface Customer {
  id: string;
  display_name: string;
  email: string;
  created_at: string;
}
interface Page {
  customers: Customer[];
  next_cursor: string | null;
}

const tag = () => randomBytes(4).toString('hex');

const search = (w: Workspace, q: string, extra: Record<string, string> = {}) =>
  ctx.http.get('/v1/customers/search').query({ q, ...extra }).set(bearer(w.ownerKey));

async function found(w: Workspace, q: string): Promise<string[]> {
  const res = await search(w, q);
  if (res.status !== 200) throw new Error(`search ${JSON.stringify(q)}: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body as Page).customers.map((c) => c.id);
}

async function createCustomer(w: Workspace, body: { display_name: string; email: string; company?: string }): Promise<Customer> {
  const res = await ctx.http.post('/v1/customers').set(bearer(w.ownerKey)).send(body);
  if (res.status !== 201) throw new Error(`create customer: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Every page of a search, `limit` at a time, following next_cursor to the end. */
async function allPages(w: Workspace, q: string, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let after: string | null = null;
  for (let page = 0; page < 100; page++) {
    const res = await search(w, q, { limit: String(limit), ...(after ? { after } : {}) });
    expect(res.status).toBe(200);
    const body = res.body as Page;
    expect(body.customers.length).toBeLessThanOrEqual(limit);
    ids.push(...body.customers.map((c) => c.id));
    after = body.next_cursor;
    if (after === null) return ids;
  }
  throw new Error('more than 100 pages');
}

/** A customer known only by a channel handle, made the way a first message makes one (channel intake). */
async function customerOfHandle(w: Workspace, channel: 'sms' | 'whatsapp' | 'telegram', token: string, handle: string, name?: string): Promise<string> {
  const payload =
    channel === 'sms'
      ? smsPayload({ from: handle, body: 'Where is my parcel?' })
      : channel === 'whatsapp'
        ? whatsappPayload({ from: handle, name: name ?? 'Grace Hopper', text: 'Where is my parcel?' })
        : telegramUpdate({ fromId: Number(handle), firstName: name ?? 'Alan', lastName: 'Turing', text: 'Where is my parcel?' });
  const res = await ingest(ctx, channel, payload, { token });
  if (res.status !== 200) throw new Error(`ingest ${channel}: ${res.status} ${JSON.stringify(res.body)}`);
  const row = await ctx.db
    .selectFrom('customer_handles')
    .select('customer_id')
    .where('tenant_id', '=', w.tenantId)
    .where('handle', '=', handle)
    .executeTakeFirstOrThrow();
  return row.customer_id;
}

async function channelTokens(w: Workspace) {
  const token = async (channel: string) => (await connect(ctx, w, channel)).details.inbound_token!;
  return { sms: await token('sms'), whatsapp: await token('whatsapp'), telegram: await token('telegram') };
}

describe('phone numbers are found by their digits, however they are written', () => {
  let w: Workspace;
  let tokens: Awaited<ReturnType<typeof channelTokens>>;
  let sms: string;
  let wa: string;
  const local = String(randomInt(1000, 9999));
  const number = `+1415555${local}`;
  beforeAll(async () => {
    w = await createWorkspace(ctx);
    tokens = await channelTokens(w);
    sms = await customerOfHandle(w, 'sms', tokens.sms, number);
    wa = await customerOfHandle(w, 'whatsapp', tokens.whatsapp, `4420794${local}`, 'Ada Byron');
  });

  test.each([
    [`+1 (415) 555-${local}`],
    [`415-555-${local}`],
    [`415555${local}`],
    [`+1415555${local}`],
    [`(415) 555 ${local}`],
    [`555.${local}`],
  ])('the SMS customer is found by %s', async (q) => {
    expect(await found(w, q)).toContain(sms);
  });

  test('a WhatsApp number (digits without +) is found written as an international number', async () => {
    expect(await found(w, `+44 20 794 ${local}`)).toEqual([wa]);
    expect(await found(w, `020 794 ${local}`)).toEqual([]);
    expect(await found(w, `20794${local}`)).toEqual([wa]);
  });

  test('the number written exactly comes before numbers that merely contain the fragment', async () => {
    // Newer, and its digits hold the first number's: without the exact rank it would come first.
    const longer = await customerOfHandle(w, 'sms', tokens.sms, `+9${number.slice(1)}7`);
    const ids = await found(w, `+1 (415) 555-${local}`);
    expect(ids.indexOf(sms)).toBe(0);
    expect(ids).toContain(longer);
  });

  test('digits inside a word are not a phone number: "abc555" does not match by digits', async () => {
    expect(await found(w, `abc555${local}`)).toEqual([]);
  });

  test('a Telegram user is found by their id and their name', async () => {
    const id = String(7_100_000_000 + randomInt(0, 99_999_999));
    const tg = await customerOfHandle(w, 'telegram', tokens.telegram, id, `Konrad${tag()}`);
    expect(await found(w, id)).toEqual([tg]);
    const name = (await ctx.db.selectFrom('customers').select('display_name').where('id', '=', tg).executeTakeFirstOrThrow()).display_name;
    expect(await found(w, name.slice(0, 9).toUpperCase())).toContain(tg);
  });
});

describe('emails, names and companies', () => {
  test('fragments of an email find it: the local part, the domain, across the @, in any case', async () => {
    const w = await createWorkspace(ctx);
    const maya = await createCustomer(w, { display_name: 'Maya Fischer', email: 'maya.fischer@fischer-logistik.example', company: 'Fischer Logistik GmbH' });
    const other = await createCustomer(w, { display_name: 'Someone Else', email: 'someone@else.example' });
    for (const q of ['maya.fisch', 'FISCHER-LOGIS', 'er@fisch', 'logistik.example', 'maya.fischer@fischer-logistik.example']) {
      expect({ q, ids: await found(w, q) }).toEqual({ q, ids: [maya.id] });
    }
    expect(await found(w, 'else.exa')).toEqual([other.id]);
    expect(await found(w, 'Logistik GmbH')).toEqual([maya.id]);
  });

  test('accents and case are ignored both ways: "zoe angstrom" finds Zoë Ångström, "Müller" finds Muller', async () => {
    const w = await createWorkspace(ctx);
    const zoe = await createCustomer(w, { display_name: 'Zoë Ångström', email: `z-${tag()}@example.test` });
    const muller = await createCustomer(w, { display_name: 'Jörg Muller', email: `j-${tag()}@example.test` });
    const deja = await createCustomer(w, { display_name: 'Déjà Vu Café', email: `d-${tag()}@example.test` });
    expect(await found(w, 'zoe angstrom')).toEqual([zoe.id]);
    expect(await found(w, 'ANGSTRÖM')).toEqual([zoe.id]);
    expect(await found(w, 'Zoë Å')).toEqual([zoe.id]);
    expect(await found(w, 'Müller')).toEqual([muller.id]);
    expect(await found(w, 'jorg')).toEqual([muller.id]);
    expect(await found(w, 'deja vu cafe')).toEqual([deja.id]);
    expect(await found(w, '  Déjà   vu  ')).toEqual([deja.id]);
  });

  test('%, _ and \\ in the fragment are the characters themselves, never wildcards', async () => {
    const w = await createWorkspace(ctx);
    const t = tag();
    const underscore = await createCustomer(w, { display_name: 'Under Score', email: `a_b-${t}@example.test` });
    await createCustomer(w, { display_name: 'No Underscore', email: `axb-${t}@example.test` });
    const percent = await createCustomer(w, { display_name: 'Save 100% now', email: `p-${t}@example.test` });
    const thousand = await createCustomer(w, { display_name: 'Save 1000 now', email: `q-${t}@example.test` });
    const slash = await createCustomer(w, { display_name: 'Back\\slash Ltd', email: `s-${t}@example.test` });
    expect(await found(w, `a_b-${t}`)).toEqual([underscore.id]);
    expect(await found(w, '100%')).toEqual([percent.id]);
    expect(await found(w, '1000')).toEqual([thousand.id]);
    expect(await found(w, `a%b-${t}`)).toEqual([]);
    expect(await found(w, 'back\\slash')).toEqual([slash.id]);
  });

  test('the answer holds the customers exactly as GET /v1/customers/{id} shows them', async () => {
    const w = await createWorkspace(ctx);
    const c = await createCustomer(w, { display_name: 'Grace Hopper', email: `grace-${tag()}@navy.example`, company: 'US Navy' });
    const res = await search(w, 'hopper');
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['customers', 'next_cursor']);
    const one = await ctx.http.get(`/v1/customers/${c.id}`).set(bearer(w.ownerKey));
    expect(res.body.customers).toEqual([one.body]);
    expect(res.body.next_cursor).toBeNull();
  });
});

describe('order and paging', () => {
  test('exact email first, then matches at the start of a word, then the rest, newest first within each', async () => {
    const w = await createWorkspace(ctx);
    const t = tag();
    const exact = await createCustomer(w, { display_name: 'Kim Exact', email: `kim-${t}@orbit.example` });
    const prefixOld = await createCustomer(w, { display_name: 'Prefix Old', email: `kim-${t}@orbit.example.org` });
    const containsOld = await createCustomer(w, { display_name: 'Contains Old', email: `akim-${t}@orbit.example` });
    const prefixNew = await createCustomer(w, { display_name: `kim-${t}@orbit.example fan`, email: `fan-${t}@example.test` });
    const containsNew = await createCustomer(w, { display_name: 'Contains New', email: `bkim-${t}@orbit.example` });
    expect(await found(w, `kim-${t}@orbit.example`)).toEqual([exact.id, prefixNew.id, prefixOld.id, containsNew.id, containsOld.id]);
  });

  test('pages of any size list every match once, in the one-page order, also while new customers arrive', async () => {
    const w = await createWorkspace(ctx);
    const word = `pager${tag()}@example.test`;
    for (let i = 0; i < 23; i++) {
      // Every rank: the email is the query (exact); the name starts with it (prefix); it is inside the company or email.
      await createCustomer(w, {
        display_name: i % 3 === 0 && i > 0 ? `${word} ${i}` : `Person ${i}`,
        email: i === 0 ? word : i % 3 === 2 ? `${i}.${word}` : `p${i}-${tag()}@example.test`,
        company: i % 3 === 1 ? `x${word}y ${i}` : '',
      });
    }
    const whole = await allPages(w, word, 100);
    expect(whole).toHaveLength(23);
    for (const limit of [1, 4, 7]) expect(await allPages(w, word, limit)).toEqual(whole);

    // Customers created between two page reads: the pages still show every earlier match exactly once.
    const seen: string[] = [];
    let after: string | null = null;
    do {
      const res = await search(w, word, { limit: '5', ...(after ? { after } : {}) });
      seen.push(...(res.body as Page).customers.map((c) => c.id));
      after = (res.body as Page).next_cursor;
      await createCustomer(w, { display_name: `${word} late ${tag()}`, email: `late-${tag()}@example.test` });
    } while (after !== null);
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of whole) expect(seen).toContain(id);
  });

  test('a cursor from another list is refused 400, never a 500', async () => {
    const w = await createWorkspace(ctx);
    const tickets = await ctx.http.get('/v1/customers/search').query({ q: 'abc', after: 'eyJzIjoiLWNyZWF0ZWRfYXQiLCJrIjoiMSIsImkiOiIxIn0' }).set(bearer(w.ownerKey));
    expect(tickets.status).toBe(400);
    expect(tickets.body.code).toBe('validation_failed');
  });
});

describe('a fragment with more hits than are ranked whole (RANKED_HITS_MAX)', () => {
  test('the exact match comes first, then every other hit newest first, in pages that neither repeat nor skip', async () => {
    const w = await createWorkspace(ctx);
    const t = tag();
    const q = `x@broad-${t}.example`;
    const exact = await createCustomer(w, { display_name: 'The Exact One', email: q });
    // Ranked, it would come second (a word starts with the fragment); walked newest first, it comes last.
    const prefix = await createCustomer(w, { display_name: `${q} fan`, email: `fan-${t}@example.test` });
    // Many customers at once (through SQL: 2,100 through the API would take the test's whole budget), all newer.
    await sql`
      INSERT INTO customers (id, tenant_id, display_name, email, created_at)
      SELECT gen_random_uuid(), ${w.tenantId}, 'Bulk ' || g, g || ${q}, now() + g * interval '1 millisecond'
      FROM generate_series(1, ${RANKED_HITS_MAX + 100}) g`.execute(ctx.db);
    const first = await search(w, q, { limit: '3' });
    expect(first.status).toBe(200);
    expect((first.body as Page).customers.map((c) => c.id)[0]).toBe(exact.id);
    expect((first.body as Page).customers[1]!.display_name).toBe(`Bulk ${RANKED_HITS_MAX + 100}`);

    const ids = await allPages(w, q, 100);
    expect(ids).toHaveLength(RANKED_HITS_MAX + 102);
    expect(ids[ids.length - 1]).toBe(prefix.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids[0]).toBe(exact.id);
    const rows = await ctx.db.selectFrom('customers').select(['id', 'created_at']).where('tenant_id', '=', w.tenantId).where('id', '<>', exact.id).execute();
    const newest = rows.sort((a, b) => b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : -1)).map((r) => r.id);
    expect(ids.slice(1)).toEqual(newest);
  });
});

describe('workspaces never see each other', () => {
  test('400 probes from another workspace, of names, emails, companies and numbers that exist, find nothing', async () => {
    const [a, b] = [await createWorkspace(ctx), await createWorkspace(ctx)];
    const tokens = await channelTokens(a);
    const probes: string[] = [];
    const aIds = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const t = tag();
      const c = await createCustomer(a, { display_name: `Secret Person ${t}`, email: `secret.${t}@hidden-${t}.example`, company: `Hidden ${t} AG` });
      aIds.add(c.id);
      const number = `+1650${String(randomInt(1_000_000, 9_999_999))}`;
      aIds.add(await customerOfHandle(a, 'sms', tokens.sms, number));
      probes.push(t, `secret.${t}`, `hidden-${t}`, `Secret Person ${t}`, `Hidden ${t}`, number, number.slice(2), `(${number.slice(2, 5)}) ${number.slice(5, 8)}-${number.slice(8)}`, 'secret', 'hidden', 'person');
    }
    // B has a customer of its own that matches the common words, so B's answers are not empty by accident.
    const mine = await createCustomer(b, { display_name: 'Secret Person of B', email: `secret-${tag()}@b.example`, company: 'Hidden B' });
    let hits = 0;
    let answered = 0;
    for (let round = 0; answered < 400; round++) {
      for (const q of probes) {
        if (answered >= 400) break;
        const ids = await found(b, q);
        answered += 1;
        hits += ids.filter((id) => aIds.has(id)).length;
        for (const id of ids) expect(id).toBe(mine.id);
      }
    }
    expect(hits).toBe(0);
    // The probes do find A's customers from A.
    expect((await found(a, probes[0]!)).length).toBe(1);
  });
});

describe('refusals', () => {
  let w: Workspace;
  beforeAll(async () => {
    w = await createWorkspace(ctx);
  });

  test.each([['ab'], ['a'], ['  ab  '], ['+1'], ['a-b'], ['@@@@'], ['...']])('%j has fewer than 3 letters or digits: 400 query_invalid naming q', async (q) => {
    const res = await search(w, q);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('query_invalid');
    expect(res.body.errors).toEqual([{ path: 'q', message: 'at least 3 letters or digits' }]);
  });

  test('more than SEARCH_QUERY_MAX_TERMS (32) words is 400 query_too_complex', async () => {
    const res = await search(w, Array.from({ length: 33 }, (_, i) => `w${i}`).join(' '));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('query_too_complex');
  });

  test('q is required', async () => {
    const res = await ctx.http.get('/v1/customers/search').set(bearer(w.ownerKey));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
  });

  test('a query past SEARCH_QUERY_MAX_CHARS (512) is 400 query_too_long; 512 characters are searched', async () => {
    const res = await search(w, 'x'.repeat(513));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('query_too_long');
    expect(res.body.detail).toContain('513');
    expect((await search(w, 'é'.repeat(512))).status).toBe(200);
  });

  test('a hostile 10 KB query is refused 400 and a 100 KB one 431, both fast', async () => {
    const started = Date.now();
    const tenK = await search(w, 'a_'.repeat(5_000));
    expect(tenK.status).toBe(400);
    expect(tenK.body.code).toBe('query_too_long');
    const hundredK = await search(w, 'a'.repeat(100_000));
    expect(hundredK.status).toBe(431);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  test('a viewer may search; a key without customers:read may not', async () => {
    const viewer = await addMember(ctx, w, 'viewer');
    expect((await ctx.http.get('/v1/customers/search').query({ q: 'abc' }).set(bearer(viewer.token))).status).toBe(200);
    const reader = await mintKey(ctx, w.ownerKey, { scopes: ['customers:read'] });
    expect((await ctx.http.get('/v1/customers/search').query({ q: 'abc' }).set(bearer(reader.secret))).status).toBe(200);
    const other = await mintKey(ctx, w.ownerKey, { scopes: ['tickets:read'] });
    const res = await ctx.http.get('/v1/customers/search').query({ q: 'abc' }).set(bearer(other.secret));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_scope');
  });

  test('GET /v1/customers stays the directory it was: no q, offset paging', async () => {
    const res = await ctx.http.get('/v1/customers').query({ q: 'abc' }).set(bearer(w.ownerKey));
    expect(res.status).toBe(400);
    const list = await ctx.http.get('/v1/customers').query({ limit: '1' }).set(bearer(w.ownerKey));
    expect(Object.keys(list.body).sort()).toEqual(['customers', 'limit', 'offset', 'total']);
  });

  test('a search still running at SEARCH_TIMEOUT_MS is stopped: 422 query_too_expensive, and the next search works', async () => {
    await createCustomer(w, { display_name: 'Blocked Person', email: `blocked-${tag()}@example.test` });
    // A lock on the handles makes the search wait, which the statement timeout counts like any other work.
    await whileLocked(ctx.config.DATABASE_URL, 'customer_handles', async () => {
      const started = Date.now();
      const res = await search(w, 'blocked person');
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ code: 'query_too_expensive', errors: [{ path: 'q', message: 'matches too much to answer in time' }] });
      expect(res.body.detail).toContain(`${TIMEOUT_MS} ms`);
      expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 100);
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 3000);
    });
    expect((await found(w, 'blocked person')).length).toBe(1);
  });
});
