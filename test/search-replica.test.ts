/**
 * Searches through the read replica (issue 36 over issue 20's DATABASE_READ_URL), against a real streaming replica
 * of a primary of the suite's own (helpers/pg-replica), lag made on demand by pausing WAL replay. Ticket, customer
 * and article searches read where GET /v1/tickets reads: a caller that did not write is answered by the replica
 * (shown by its older state: what the primary committed while replay is paused is not found), and a caller that
 * just wrote is answered by the primary, so its own reply is found by its very next search.
 */
import { randomBytes } from 'node:crypto';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { startReplicaPair, type OwnReplicaPair } from './helpers/pg-replica';
import { eventually, sleep } from './helpers/wait';

const DB = 'helpdesk_search_replica';
let pair: OwnReplicaPair;
let ctx: TestContext;
let w: Workspace;
/** Reads only: never leaves a write mark, so the routing gives it the replica whenever the replica is in time. */
let reader: { secret: string };
let centre: string;
let ticketId: string;

/** A word no other row holds: letters only, one lexeme under both text search configurations. */
const marker = () => `zq${[...randomBytes(8)].map((b) => String.fromCharCode(97 + (b % 26))).join('')}`;

async function ok<T>(res: { status: number; body: unknown }, what: string): Promise<T> {
  if (res.status >= 300) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as T;
}

/** The ids each search finds for `token`: tickets, customers, staff articles and the centre's public search. */
async function tickets(token: string, q: string): Promise<string[]> {
  const page = await ok<{ tickets: { id: string }[] }>(await ctx.http.get('/v1/tickets').query({ q }).set(bearer(token)), 'ticket search');
  return page.tickets.map((t) => t.id);
}
async function customers(token: string, q: string): Promise<string[]> {
  const page = await ok<{ customers: { id: string }[] }>(await ctx.http.get('/v1/customers/search').query({ q }).set(bearer(token)), 'customer search');
  return page.customers.map((c) => c.id);
}
async function staffArticles(token: string, q: string): Promise<string[]> {
  const page = await ok<{ articles: { translation_id: string }[] }>(await ctx.http.get('/v1/help-centre/articles/search').query({ q }).set(bearer(token)), 'article search');
  return page.articles.map((a) => a.translation_id);
}
async function publicArticles(q: string): Promise<string[]> {
  const page = await ok<{ articles: { translation_id: string }[] }>(await ctx.http.get(`/v1/help-centres/${centre}/search`).query({ q }), 'public search');
  return page.articles.map((a) => a.translation_id);
}

beforeAll(async () => {
  pair = await startReplicaPair();
  await pair.createMigratedDatabase(DB);
  ctx = await startTestApp({ database: false, env: pair.appEnv(DB, 60_000) });
  w = await createWorkspace(ctx);
  reader = await mintKey(ctx, w.ownerKey, { scopes: ['tickets:read', 'customers:read', 'help-centre-staff:read'] });
  centre = (await ok<{ id: string }>(await ctx.http.post('/v1/help-centre/centres').set(bearer(w.ownerKey)).send({ name: 'Help', default_locale: 'en', locales: ['en'], subdomain_label: `kb-${marker()}` }), 'centre')).id;
  ticketId = (await ok<{ id: string }>(await ctx.http.post('/v1/tickets').set(bearer(w.ownerKey)).send({ subject: 'Replica search', description: 'Before the pause.', customer_email: `${marker()}@example.test` }), 'ticket')).id;
  await pair.caughtUp(DB);
  // A first read starts the lag readings; the routing sends nothing to the replica before one has answered.
  await tickets(reader.secret, 'replica');
  await sleep(700);
}, 120_000);

afterAll(async () => {
  await pair?.resumeReplay().catch(() => {});
  await ctx?.close();
  pair?.destroy();
});

afterEach(async () => {
  await pair.resumeReplay();
});

test('with DATABASE_READ_URL set, a ticket search, a customer search and an article search (staff and public) are served by the replica', async () => {
  const m = marker();
  await pair.pauseReplay();
  const ticket = await ok<{ id: string }>(
    await ctx.http.post('/v1/tickets').set(bearer(w.ownerKey)).send({ subject: `Invoice ${m}`, description: '', customer_email: `${marker()}@example.test` }),
    'ticket',
  );
  const customer = await ok<{ id: string }>(await ctx.http.post('/v1/customers').set(bearer(w.ownerKey)).send({ display_name: `Replica ${m}`, email: `${marker()}@example.test` }), 'customer');
  const translation = await ok<{ translation_id: string }>(
    await ctx.http
      .put('/v1/help-centre/articles/sync')
      .set(bearer(w.ownerKey))
      .send({ source_article_id: `src-${m}`, locale: 'en', title: `Resetting ${m}`, body_html: `<p>${m} explained.</p>`, source_status: 'published', visibility: 'public', help_centre_id: centre }),
    'article',
  );

  // The primary has all three: the writer, routed to it by its write mark, finds them.
  expect(await tickets(w.ownerKey, m)).toEqual([ticket.id]);
  expect(await customers(w.ownerKey, m)).toEqual([customer.id]);
  expect(await staffArticles(w.ownerKey, m)).toEqual([translation.translation_id]);
  // A caller that wrote nothing reads the replica, which has not replayed them; so does an anonymous visitor.
  expect(await tickets(reader.secret, m)).toEqual([]);
  expect(await customers(reader.secret, m)).toEqual([]);
  expect(await staffArticles(reader.secret, m)).toEqual([]);
  expect(await publicArticles(m)).toEqual([]);

  await pair.resumeReplay();
  await eventually(
    async () => ((await tickets(reader.secret, m)).length === 1 && (await customers(reader.secret, m)).length === 1 && (await staffArticles(reader.secret, m)).length === 1 ? true : undefined),
    10_000,
    'the reader to find the replayed writes',
  );
  expect(await publicArticles(m)).toEqual([translation.translation_id]);
});

test('a caller who just wrote a reply finds it on its very next search while the replica is behind (read-your-writes)', async () => {
  // A caller of its own, so the only write mark it holds is the reply's.
  const agent = await mintKey(ctx, w.ownerKey, { scopes: ['tickets:write'] });
  await pair.caughtUp(DB);
  const m = marker();
  await pair.pauseReplay();
  await ok(await ctx.http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(agent.secret)).send({ body: `The ${m} is on its way.` }), 'reply');
  expect(await tickets(agent.secret, m)).toEqual([ticketId]);
  // The replica does not have the reply yet: without the write mark, the search would not have found it.
  expect(await tickets(reader.secret, m)).toEqual([]);
});
