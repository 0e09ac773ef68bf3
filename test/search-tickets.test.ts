/**
 * Ticket search over the real API (issue 36): GET /v1/tickets?q=… with every operator, accents, stemming,
 * prefixes, phrases and exclusions, email and phone fragments, relevance and its cursor, the list filters,
 * workspace isolation, internal notes, merged tickets, read-after-write from a second API process, and the
 * refusals (malformed, too long, too complex, too expensive), none of them ever a 500.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { sql } from 'kysely';
import { startTestApp, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, type Workspace } from './helpers/factories';
import { connect, ingest } from './helpers/ingest';
import { whileLocked } from './helpers/locks';
import { smsPayload } from './helpers/payloads';
import { killGroup, spawnApi, type ApiProcess } from './helpers/processes';
import { serverUrl } from './helpers/db-names';
import { useTestApp } from './helpers/use-test-app';

let api2: ApiProcess | undefined;
const { ctx, workspaces: [ws, other] } = useTestApp({
  workers: true,
  workspaces: 2,
  timeout: 60_000,
  setup: async ({ ctx: c, workspaces: [w] }) => {
    await connect(c, w!, 'sms', { config: { label: 'sms main', secret: 'sms-secret' } });
  },
  teardown: () => {
    if (api2) killGroup(api2.proc);
  },
});

interface Summary {
  id: string;
  subject: string;
  status: string;
  tags: string[];
  created_at: string;
}
interface Page {
  tickets: Summary[];
  next_cursor: string | null;
}

/** A word no other ticket holds: letters only, so it is one lexeme under both configurations. */
const marker = () => `zq${randomBytes(5).toString('hex').replace(/[0-9]/g, (d) => 'ghijklmnop'[Number(d)]!)}`;

async function create(w: Workspace, body: Record<string, unknown>): Promise<Summary & { customer_id: string }> {
  const res = await ctx.http
    .post('/v1/tickets')
    .set(bearer(w.ownerKey))
    .send({ subject: 'A question', description: '', customer_email: `c${randomBytes(4).toString('hex')}@example.test`, ...body });
  if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function write(w: Workspace, id: string, kind: 'replies' | 'notes', body: string) {
  const res = await ctx.http.post(`/v1/tickets/${id}/${kind}`).set(bearer(w.ownerKey)).send({ body });
  if (res.status !== 201) throw new Error(`${kind}: ${res.status} ${JSON.stringify(res.body)}`);
}

const list = (w: Workspace | string, query: Record<string, string | number>) =>
  ctx.http
    .get('/v1/tickets')
    .set(bearer(typeof w === 'string' ? w : w.ownerKey))
    .query(query);

/** The ids a search finds (one page of up to 500), in the order given. */
async function found(q: string, extra: Record<string, string | number> = {}, w: Workspace | string = ws): Promise<string[]> {
  const res = await list(w, { q, limit: 500, ...extra });
  if (res.status !== 200) throw new Error(`search ${q}: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body as Page).tickets.map((t) => t.id);
}

/** Every id of every page, following the cursor. */
async function allPages(query: Record<string, string | number>, between?: (page: number) => Promise<void>): Promise<string[]> {
  const ids: string[] = [];
  let after: string | null = null;
  for (let page = 0; page < 100; page += 1) {
    const res = await list(ws, { ...query, ...(after ? { after } : {}) });
    expect(res.status).toBe(200);
    const body = res.body as Page;
    ids.push(...body.tickets.map((t) => t.id));
    after = body.next_cursor;
    if (!after) return ids;
    await between?.(page);
  }
  throw new Error('more than 100 pages');
}

describe('what a search matches', () => {
  test('every word must match, and only the last bare word is a prefix', async () => {
    const m = marker();
    const both = await create(ws, { subject: `${m} invoice`, description: 'The refund has not arrived.' });
    const one = await create(ws, { subject: `${m} invoice`, description: 'Please send a copy.' });
    expect(await found(`${m} refund`)).toEqual([both.id]);
    expect((await found(`${m} invoice`)).sort()).toEqual([both.id, one.id].sort());
    // "refu" is a prefix at the end, a whole word elsewhere.
    expect(await found(`${m} refu`)).toEqual([both.id]);
    expect(await found(`refu ${m}`)).toEqual([]);
    expect(await found(`${m} invo`)).toHaveLength(2);
  });

  test('accents and case are ignored both ways: "Déjà vu" finds "deja vu" and the reverse', async () => {
    const m = marker();
    const accented = await create(ws, { subject: `${m} Déjà vu again`, description: '' });
    const plain = await create(ws, { subject: `${m} status`, description: 'A DEJA VU moment: Ærøskøbing, Straße.' });
    expect((await found(`${m} "deja vu"`)).sort()).toEqual([accented.id, plain.id].sort());
    expect((await found(`${m} "Déjà vu"`)).sort()).toEqual([accented.id, plain.id].sort());
    expect(await found(`${m} aeroskobing`)).toEqual([plain.id]);
    expect(await found(`${m} strasse`)).toEqual([plain.id]);
  });

  test('words match their other forms (stemming), and stop words still match as written', async () => {
    const m = marker();
    const t = await create(ws, { subject: `${m} Refunds`, description: 'We refunded the payments to the card.' });
    expect(await found(`${m} refunding`)).toEqual([t.id]);
    expect(await found(`${m} payment`)).toEqual([t.id]);
    expect(await found(`${m} the`)).toEqual([t.id]);
    expect(await found(`${m} "to the card"`)).toEqual([t.id]);
  });

  test('a phrase matches its words adjacent and in order; the same words bare match in any order', async () => {
    const m = marker();
    const inOrder = await create(ws, { subject: `${m} billing`, description: 'My card was charged twice yesterday.' });
    const reversed = await create(ws, { subject: `${m} billing`, description: 'Twice now the shop charged my card.' });
    expect(await found(`${m} "charged twice"`)).toEqual([inOrder.id]);
    expect((await found(`${m} charged twice`)).sort()).toEqual([inOrder.id, reversed.id].sort());
    expect(await found(`${m} "twice charged"`)).toEqual([]);
  });

  test('-word and -"phrase" leave out the tickets holding them', async () => {
    const m = marker();
    const paypal = await create(ws, { subject: `${m} refund`, description: 'Paid with PayPal.' });
    const bank = await create(ws, { subject: `${m} refund`, description: 'Paid by bank transfer.' });
    const card = await create(ws, { subject: `${m} refund`, description: 'Paid by card, bank declined.' });
    expect((await found(`${m} -paypal`)).sort()).toEqual([bank.id, card.id].sort());
    expect((await found(`${m} -"bank transfer"`)).sort()).toEqual([paypal.id, card.id].sort());
    expect(await found(`${m} -paypal -bank`)).toEqual([]);
    // Exclusions narrowed by an operator or a list filter are a search of their own.
    expect((await found(`-paypal status:open ${m}`)).sort()).toEqual([bank.id, card.id].sort());
  });

  test('the customer name, email, tags and identifiers like INV-4471 are searched as words', async () => {
    const m = marker();
    const t = await create(ws, {
      subject: `${m} question`,
      description: 'About invoice INV-4471 and order #10482.',
      customer_email: `maya.${m}@fischer-logistik.example`,
      tags: ['key-account'],
    });
    expect(await found(`${m} 4471`)).toEqual([t.id]);
    expect(await found(`${m} INV-4471`)).toEqual([t.id]);
    expect(await found(`${m} 10482`)).toEqual([t.id]);
    expect(await found(`maya.${m}@fischer-logistik.example`)).toEqual([t.id]);
    expect(await found(`${m} fischer`)).toEqual([t.id]);
    expect(await found(`${m} key-account`)).toEqual([t.id]);
  });

  test('a change of subject or tags is searchable at once, and the old words are gone', async () => {
    const m = marker();
    const t = await create(ws, { subject: `${m} printer`, description: '', tags: ['hardware'] });
    const res = await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ tags: ['escalated'] });
    expect(res.status).toBe(200);
    expect(await found(`${m} escalated`)).toEqual([t.id]);
    expect(await found(`${m} hardware`)).toEqual([]);
    // Replies written before the change stay in the document it was rebuilt into.
    await write(ws, t.id, 'replies', 'Toner ordered.');
    await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ tags: ['toner'] }).expect(200);
    expect(await found(`${m} toner ordered`)).toEqual([t.id]);
  });
});

describe('operators', () => {
  test('from: an email fragment, and a phone fragment written another way than the handle', async () => {
    const m = marker();
    const byEmail = await create(ws, { subject: `${m} hello`, description: '', customer_email: `jonas.${m}@northwind.example` });
    const sms = await ingest(ctx, 'sms', smsPayload({ from: '+14155550100', body: `${m} where is my parcel` }), ws.tenantId);
    expect(sms.status).toBe(200);
    const byPhone = sms.body.ticket_id as string;
    expect(await found(`${m} from:northwind`)).toEqual([byEmail.id]);
    expect(await found(`from:jonas.${m.slice(0, 6)}`)).toEqual([byEmail.id]);
    for (const fragment of ['415-555', '(415) 555-01', '4155550100', '+1 415 555 0100']) {
      expect(await found(`${m} from:"${fragment}"`)).toEqual([byPhone]);
    }
    // Any of several from:, and none when it names nobody.
    expect((await found(`${m} from:northwind from:415555`)).sort()).toEqual([byEmail.id, byPhone].sort());
    expect(await found(`${m} from:999-888`)).toEqual([]);
  });

  test("a provider message's id is found", async () => {
    const m = marker();
    const sid = `SM${randomBytes(16).toString('hex')}`;
    const res = await ingest(ctx, 'sms', smsPayload({ sid, from: `+1555${randomInt(1_000_000, 9_999_999)}`, body: `${m} hi` }), ws.tenantId);
    expect(res.status).toBe(200);
    expect(await found(sid)).toEqual([res.body.ticket_id]);
  });

  test('tag:, status:, channel:, assignee: and before:/after: narrow; repeated status:/assignee: mean any of', async () => {
    const m = marker();
    const agent = await addMember(ctx, ws, 'editor');
    const billing = await create(ws, { subject: `${m} a`, description: '', tags: ['billing', 'Key Account'], source: 'email', assignee_id: agent.userId });
    const pending = await create(ws, { subject: `${m} b`, description: '', tags: ['billing'], source: 'api', assignee_id: ws.ownerId });
    const old = await create(ws, { subject: `${m} c`, description: '', source: 'api' });
    await ctx.http.patch(`/v1/tickets/${pending.id}`).set(bearer(ws.ownerKey)).send({ status: 'pending' }).expect(200);
    await sql`update tickets set created_at = '2025-01-15T12:00:00Z' where tenant_id = ${ws.tenantId} and id = ${old.id}`.execute(ctx.db);

    expect((await found(`${m} tag:billing`)).sort()).toEqual([billing.id, pending.id].sort());
    expect(await found(`${m} tag:"Key Account"`)).toEqual([billing.id]);
    expect(await found(`${m} tag:billing tag:"Key Account"`)).toEqual([billing.id]);
    expect(await found(`${m} status:pending`)).toEqual([pending.id]);
    expect((await found(`${m} status:open,pending`)).length).toBe(3);
    expect(await found(`${m} channel:email`)).toEqual([billing.id]);
    expect((await found(`${m} CHANNEL:API`)).sort()).toEqual([pending.id, old.id].sort());
    // assignee:me is the caller: the owner's key, then the agent's token.
    expect(await found(`${m} assignee:me`)).toEqual([pending.id]);
    expect(await found(`${m} assignee:me`, {}, agent.token)).toEqual([billing.id]);
    expect(await found(`${m} assignee:none`)).toEqual([old.id]);
    expect(await found(`${m} assignee:${agent.userId}`)).toEqual([billing.id]);
    expect((await found(`${m} assignee:none assignee:me`)).sort()).toEqual([pending.id, old.id].sort());
    // A date is that UTC day's start.
    expect(await found(`${m} before:2025-01-16`)).toEqual([old.id]);
    expect(await found(`${m} before:2025-01-15`)).toEqual([]);
    expect(await found(`${m} after:2025-01-15 before:2025-01-15T12:00:01Z`)).toEqual([old.id]);
    expect((await found(`${m} after:2025-01-16`)).sort()).toEqual([billing.id, pending.id].sort());
    // Operators alone are a search too (no words to rank by: newest first).
    expect(await found('tag:"Key Account"')).toEqual([billing.id]);
  });

  test('q combines with the list filters (AND), the cursor and sort', async () => {
    const m = marker();
    const a = await create(ws, { subject: `${m} alpha`, description: '', tags: ['vip'], priority: 'urgent' });
    const b = await create(ws, { subject: `${m} beta`, description: '', tags: ['vip'] });
    const c = await create(ws, { subject: `${m} gamma`, description: '' });
    await ctx.http.patch(`/v1/tickets/${b.id}`).set(bearer(ws.ownerKey)).send({ status: 'pending' }).expect(200);
    expect((await found(m, { tag: 'vip' })).sort()).toEqual([a.id, b.id].sort());
    expect(await found(m, { tag: 'vip', status: 'pending' })).toEqual([b.id]);
    expect(await found(m, { priority: 'urgent' })).toEqual([a.id]);
    expect(await found(`${m} status:open`, { tag: 'vip' })).toEqual([a.id]);
    expect(await found(`${m} status:open`, { status: 'pending' })).toEqual([]);
    expect(await found(m, { sort: 'created_at' })).toEqual([a.id, b.id, c.id]);
    expect(await found(m, { sort: '-created_at' })).toEqual([c.id, b.id, a.id]);
    // Exclusions alone are fine once a list filter narrows them.
    expect(await found(`-alpha -gamma -${marker()}`, { tag: 'vip', status: 'pending' })).toContain(b.id);
  });

  test('a blank q is the plain list; sort=relevance needs q; a cursor of another order is refused', async () => {
    const plain = await list(ws, { limit: 3 });
    const blank = await list(ws, { q: '   ', limit: 3 });
    expect(blank.status).toBe(200);
    expect(blank.body).toEqual(plain.body);
    const noQ = await list(ws, { sort: 'relevance' });
    expect(noQ.status).toBe(400);
    expect(noQ.body.errors).toEqual([{ path: 'query.sort', message: 'sort=relevance ranks by the search: send q with it' }]);
    // A relevance cursor on the plain list, and a time cursor on a search (whose default order is relevance).
    const m = marker();
    await create(ws, { subject: `${m} one`, description: '' });
    await create(ws, { subject: `${m} two`, description: '' });
    const ranked = (await list(ws, { q: m, limit: 1 })).body as Page;
    expect((await list(ws, { after: ranked.next_cursor! })).status).toBe(400);
    const timed = (await list(ws, { limit: 1 })).body as Page;
    expect((await list(ws, { q: m, after: timed.next_cursor! })).status).toBe(400);
    expect((await list(ws, { q: m, sort: '-created_at', after: timed.next_cursor! })).status).toBe(200);
  });
});

describe('relevance and paging', () => {
  test('a ticket with the word in its subject and three messages outranks one that has it once; relevance is the default with q', async () => {
    const w = marker();
    const once = await create(ws, { subject: 'A question', description: `One mention of the ${w}.` });
    const often = await create(ws, { subject: `${w} claim`, description: 'My question.' });
    for (const body of [`The ${w} covers it.`, `${w} number attached.`, `Is the ${w} still valid?`]) await write(ws, often.id, 'replies', body);
    const middle = await create(ws, { subject: 'Other', description: `${w}, and ${w} again.` });
    expect(await found(w)).toEqual([often.id, middle.id, once.id]);
    expect(await found(w, { sort: 'relevance' })).toEqual([often.id, middle.id, once.id]);
    // Newest first under -created_at, whatever the rank.
    expect(await found(w, { sort: '-created_at' })).toEqual([middle.id, often.id, once.id]);
  });

  test('paging 60 matches by 7 gives every match exactly once, by relevance (with ties) and by time with a ticket arriving between pages', async () => {
    const term = marker();
    const made: string[] = [];
    for (let i = 0; i < 60; i += 1) {
      // Five tiers of rank (the term once to five times), twelve tickets in each: ties are broken by id.
      const t = await create(ws, { subject: `${term} `.repeat((i % 5) + 1), description: `number ${i}` });
      made.push(t.id);
    }
    const byRank = await allPages({ q: term, limit: 7 });
    expect(byRank).toHaveLength(60);
    expect(new Set(byRank).size).toBe(60);
    expect([...byRank].sort()).toEqual([...made].sort());
    // The order is the ranking: the five-term tickets first, then four…
    const tier = (id: string) => made.indexOf(id) % 5;
    expect(byRank.map(tier)).toEqual([...byRank.map(tier)].sort((x, y) => y - x));

    const arrivals: string[] = [];
    const byTime = await allPages({ q: term, limit: 7, sort: '-created_at' }, async (page) => {
      if (page === 2) arrivals.push((await create(ws, { subject: `${term} late`, description: '' })).id);
    });
    expect(byTime).toEqual([...made].reverse());
    expect(byTime).not.toContain(arrivals[0]);

    // Under relevance too, a ticket arriving mid-way never makes an earlier match repeat or go missing.
    const withArrival = await allPages({ q: term, limit: 7 }, async (page) => {
      if (page === 4) await create(ws, { subject: `${term} late again`, description: '' });
    });
    const originals = withArrival.filter((id) => made.includes(id));
    expect(originals).toHaveLength(60);
    expect(new Set(originals).size).toBe(60);
  });
});

describe('what search never does', () => {
  test('1,000 tokens planted in one workspace are never found from another (and are found from their own)', async () => {
    const tokens = Array.from({ length: 1000 }, () => marker());
    // Ten tickets of a hundred tokens each, in workspace A.
    for (let i = 0; i < 10; i += 1) {
      await create(ws, { subject: `planted ${i}`, description: tokens.slice(i * 100, (i + 1) * 100).join(' ') });
    }
    // A ticket in B too, so B's searches run against documents of their own.
    await create(other, { subject: 'B has tickets', description: 'planted elsewhere' });
    const hits: string[] = [];
    for (let i = 0; i < tokens.length; i += 20) {
      const batch = tokens.slice(i, i + 20);
      const answers = await Promise.all(batch.map((t) => list(other, { q: t })));
      for (const [j, res] of answers.entries()) {
        expect(res.status).toBe(200);
        if ((res.body as Page).tickets.length > 0) hits.push(batch[j]!);
      }
    }
    expect(hits).toEqual([]);
    // The same tokens from A: a sample, each found in its one ticket.
    for (const t of tokens.filter((_, i) => i % 97 === 0)) expect(await found(t)).toHaveLength(1);
  });

  test('internal notes are found by every member who can list tickets; a web chat visitor cannot search at all', async () => {
    const m = marker();
    const t = await create(ws, { subject: 'Quiet ticket', description: '' });
    await write(ws, t.id, 'notes', `Internal: the customer is ${m} on the watch list.`);
    const viewer = await addMember(ctx, ws, 'viewer');
    expect(await found(m, {}, viewer.token)).toEqual([t.id]);
    const chat = await connect(ctx, ws, 'web_chat', { config: { allowed_origins: ['https://shop.example'] } });
    const session = await ctx.http.post(`/v1/web-chat/sessions?token=${encodeURIComponent(chat.details.inbound_token!)}`).send({});
    expect(session.status).toBe(201);
    expect((await list(session.body.visitor_token as string, { q: m })).status).toBe(401);
  });

  test('a merged-away ticket is never returned, and its text is found once, on the winner', async () => {
    const m = marker();
    const source = await create(ws, { subject: `${m} duplicate`, description: `Original words ${m}.` });
    await write(ws, source.id, 'replies', `Answered ${m} here.`);
    const winner = await create(ws, { subject: 'The real one', description: '' });
    expect(await found(m)).toEqual([source.id]);
    await ctx.http.post(`/v1/tickets/${source.id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: winner.id }).expect(200);
    expect(await found(m)).toEqual([winner.id]);
    expect(await found(`${m} answered`)).toEqual([winner.id]);
    expect(await found(m, { status: 'merged' })).toEqual([]);
    expect(await found(`"original words" ${m}`)).toEqual([winner.id]);
  });

  test('a reply written through one API process is found by the very next search sent to another', async () => {
    api2 = await spawnApi(ctx.config);
    const t = await create(ws, { subject: 'Across processes', description: '' });
    for (let i = 0; i < 5; i += 1) {
      const m = marker();
      await write(ws, t.id, 'replies', `Round ${i}: ${m}`);
      const res = await fetch(`${api2.url}/v1/tickets?q=${encodeURIComponent(m)}`, { headers: bearer(ws.ownerKey) });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Page).tickets.map((x) => x.id)).toEqual([t.id]);
    }
  }, 60_000);

  test('a message of 64 KiB built to make the text parser quadratic is indexed within a second, and its words are found', async () => {
    // Runs without a space cost PostgreSQL's parser time quadratic in their length (64 KiB of "a-1." or "_a" took it
    // 8 s and more); search_safe (migration 0038) cuts runs at 100 characters. The statement timeout makes the
    // regression a failure rather than a slow test.
    const t = await create(ws, { subject: 'Parser runs', description: '' });
    const m = marker();
    for (const run of ['a-1.', '_a', 'a1_']) {
      const body = `${m} ${run.repeat(Math.floor(65_000 / run.length))}`;
      const took = await ctx.db.connection().execute(async (c) => {
        await sql`SET statement_timeout = 1000`.execute(c);
        const started = Date.now();
        await sql`SELECT length(search_text(${body})::text)`.execute(c);
        await sql`RESET statement_timeout`.execute(c);
        return Date.now() - started;
      });
      expect(took).toBeLessThan(1000);
      await write(ws, t.id, 'notes', body);
    }
    expect(await found(m)).toEqual([t.id]);
  }, 60_000);

  test('a 10,000-term query is refused at once, over HTTP and as a stored search', async () => {
    const tenThousand = Array.from({ length: 10_000 }, (_, i) => `w${i}`).join(' ');
    let started = Date.now();
    // Longer than a request line may be: refused before the app reads it.
    const res = await list(ws, { q: tenThousand });
    expect([400, 431]).toContain(res.status);
    expect(Date.now() - started).toBeLessThan(2000);
    // The most that fits a request line: refused by the parser, before any SQL.
    started = Date.now();
    const fits = await ctx.http.get(`/v1/tickets?q=${Array.from({ length: 7000 }, () => 'a').join('+')}`).set(bearer(ws.ownerKey));
    expect(fits.status).toBe(400);
    expect(fits.body).toMatchObject({ code: 'query_too_long', errors: [{ path: 'q', message: 'at most 512 characters' }] });
    expect(Date.now() - started).toBeLessThan(2000);
    const view = await ctx.http.post('/v1/saved-views').set(bearer(ws.ownerKey)).send({ name: 'huge', filters: { q: tenThousand }, shared: false });
    expect(view.status).toBe(422);
    expect(view.body.errors).toEqual([{ path: 'body.filters.q', message: 'at most 4096 characters' }]);
  });

  test('past SEARCH_QUERY_MAX_TERMS is 400 query_too_complex', async () => {
    const res = await list(ws, { q: Array.from({ length: 33 }, (_, i) => `w${i}`).join(' ') });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'query_too_complex', errors: [{ path: 'q' }] });
  });

  test.each([
    ['refund "charged twice', 'unclosed quote (opened at character 8)'],
    ['status:', 'the operator status: has no value'],
    ['status:exploded', 'unknown status "exploded"'],
    ['channel:fax', 'unknown channel "fax"'],
    ['before:2026-13-01', 'before:2026-13-01 is not a date'],
    ['assignee:bob', 'assignee:bob is not me, none or a user id'],
    ['from:ab', 'from:ab is shorter than 3 characters'],
    ['-spam -"out of office"', 'only exclusions'],
    ['-tag:vip refund', 'the operator tag: cannot be excluded'],
    ['!!! ???', 'nothing to search for'],
  ])('a malformed query %p is 400 query_invalid naming the problem', async (q, message) => {
    const res = await list(ws, { q });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('query_invalid');
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0].path).toBe('q');
    expect(res.body.errors[0].message).toContain(message);
  });

  test('two hundred random queries of quotes, operators and tsquery syntax are each 200 or 400, never a 500', async () => {
    const pieces = ['"', '-', ':', '*', '&', '|', '!', '(', ')', "'", '\\', '<->', '<2>', ':*', 'a', 'refund', 'tag:', 'from:', 'status:open', 'Déjà', '%', '_', ' ', ' ', '😀', '\u0000'];
    const statuses = new Map<number, number>();
    for (let i = 0; i < 200; i += 1) {
      const q = Array.from({ length: randomInt(1, 12) }, () => pieces[randomInt(0, pieces.length)]!).join('');
      const res = await list(ws, { q });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status !== 200 && res.status !== 400) throw new Error(`${JSON.stringify(q)} answered ${res.status}: ${JSON.stringify(res.body)}`);
    }
    expect(statuses.get(200)).toBeGreaterThan(0);
  });
});

describe('stored searches', () => {
  test('a saved view keeps a search and replays as the same request; a malformed one is refused when saved', async () => {
    const m = marker();
    const t = await create(ws, { subject: `${m} refund request`, description: '' });
    const view = await ctx.http
      .post('/v1/saved-views')
      .set(bearer(ws.ownerKey))
      .send({ name: 'My open refunds', filters: { q: `${m} refund status:open`, status: 'open' }, shared: false });
    expect(view.status).toBe(201);
    expect(view.body.filters).toEqual({ q: `${m} refund status:open`, status: 'open' });
    expect(await found(view.body.filters.q, { status: view.body.filters.status })).toEqual([t.id]);

    const bad = await ctx.http.post('/v1/saved-views').set(bearer(ws.ownerKey)).send({ name: 'Broken', filters: { q: 'status:nope' }, shared: false });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ code: 'filter_invalid', errors: [{ path: 'body.filters.q', message: expect.stringContaining('unknown status "nope"') }] });
  });

  test('a macro trigger condition cannot search (it is checked against one ticket, not run as a list)', async () => {
    const res = await ctx.http
      .post('/v1/macros')
      .set(bearer(ws.ownerKey))
      .send({ name: 'Tag refunds', actions: [{ type: 'add_tags', tags: ['refund'] }], trigger: { event: 'ticket.created', conditions: { q: 'refund' } } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: 'filter_unknown', errors: [{ path: 'body.trigger.conditions.q' }] });
  });
});

describe('a search running past SEARCH_TIMEOUT_MS', () => {
  let slow: TestContext;
  let w: Workspace;
  beforeAll(async () => {
    slow = await startTestApp({ env: { SEARCH_TIMEOUT_MS: '50' } });
    w = await createWorkspace(slow);
  }, 60_000);
  afterAll(async () => {
    await slow?.close();
  });

  test('is cancelled by PostgreSQL and answered 422 query_too_expensive; the next search runs normally', async () => {
    const res = await slow.http.post('/v1/tickets').set(bearer(w.ownerKey)).send({ subject: 'Slow search', description: 'needle', customer_email: 'slow@example.test' });
    expect(res.status).toBe(201);
    // Another session holds ticket_search exclusively: the search waits for its lock until statement_timeout ends it.
    await whileLocked(serverUrl(slow.databaseName!), 'ticket_search', async () => {
      const started = Date.now();
      const cancelled = await slow.http.get('/v1/tickets').set(bearer(w.ownerKey)).query({ q: 'needle' });
      expect(cancelled.status).toBe(422);
      expect(cancelled.body).toMatchObject({ code: 'query_too_expensive', errors: [{ path: 'q', message: 'matches too much to answer in time' }] });
      expect(cancelled.body.detail).toContain('50 ms');
      expect(Date.now() - started).toBeLessThan(5000);
      // The plain list never searched, and is not held up by it.
      expect((await slow.http.get('/v1/tickets').set(bearer(w.ownerKey))).status).toBe(200);
    });
    const again = await slow.http.get('/v1/tickets').set(bearer(w.ownerKey)).query({ q: 'needle' });
    expect(again.status).toBe(200);
    expect((again.body as Page).tickets).toHaveLength(1);
  });
});
