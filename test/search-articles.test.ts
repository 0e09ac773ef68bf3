/**
 * Help-centre article search (issue 36) over the real API: staff search every translation of their workspace
 * (drafts, archived and internal ones, each with its state); anyone searches one enabled centre's published,
 * public translations in one locale. Full text over title, excerpt and body (English stems, accents ignored),
 * best match first, in cursor pages; never another workspace's articles; hostile or malformed queries answered
 * 4xx or an empty page, never a 500; the public route is budgeted per client address.
 */
import { randomBytes } from 'node:crypto';
import { boundSnippet } from '../src/domains/help-centre/search';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp({ env: { PUBLIC_SEARCH_RATE_POINTS: '100000' } });

interface Hit {
  translation_id: string;
  article_id: string;
  locale: string;
  title: string;
  excerpt: string;
  url: string;
  snippet_html: string;
  help_centre_id?: string;
  editorial_state?: string;
  visibility?: string;
  updated_at?: string;
}
interface Page {
  articles: Hit[];
  next_cursor: string | null;
}

const tag = () => randomBytes(4).toString('hex');
/** A word of letters only (the English stemmer leaves it be), unique to one test. */
const word = () => `zq${[...randomBytes(6)].map((b) => String.fromCharCode(97 + (b % 26))).join('')}`;

async function centreFor(w: Workspace, locales = ['en', 'de']): Promise<string> {
  const res = await ctx.http
    .post('/v1/help-centre/centres')
    .set(bearer(w.ownerKey))
    .send({ name: 'Help', default_locale: locales[0], locales, subdomain_label: `kb-${tag()}` });
  expect(res.status).toBe(201);
  return res.body.id;
}

interface ArticleInput {
  title: string;
  body: string;
  locale?: string;
  status?: string;
  visibility?: 'public' | 'signed_in' | 'internal';
  centre?: string;
}

async function article(w: Workspace, a: ArticleInput): Promise<{ translation_id: string; article_id: string }> {
  const res = await ctx.http
    .put('/v1/help-centre/articles/sync')
    .set(bearer(w.ownerKey))
    .send({
      source_article_id: `src-${tag()}`,
      locale: a.locale ?? 'en',
      title: a.title,
      body_html: a.body,
      source_status: a.status ?? 'published',
      visibility: a.visibility ?? 'public',
      ...(a.centre ? { help_centre_id: a.centre } : {}),
    });
  if (res.status !== 200) throw new Error(`sync: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const staff = (w: Workspace, q: string, extra: Record<string, string> = {}) => ctx.http.get('/v1/help-centre/articles/search').query({ q, ...extra }).set(bearer(w.ownerKey));
const visitor = (centre: string, q: string, extra: Record<string, string> = {}) => ctx.http.get(`/v1/help-centres/${centre}/search`).query({ q, ...extra });

async function staffIds(w: Workspace, q: string, extra: Record<string, string> = {}): Promise<string[]> {
  const res = await staff(w, q, extra);
  if (res.status !== 200) throw new Error(`staff search ${JSON.stringify(q)}: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body as Page).articles.map((a) => a.translation_id);
}
async function visitorIds(centre: string, q: string, extra: Record<string, string> = {}): Promise<string[]> {
  const res = await visitor(centre, q, extra);
  if (res.status !== 200) throw new Error(`public search ${JSON.stringify(q)}: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body as Page).articles.map((a) => a.translation_id);
}

describe('what staff and visitors find', () => {
  let w: Workspace;
  let centre: string;
  const secret = word();
  const a: Record<string, { translation_id: string; article_id: string }> = {};
  beforeAll(async () => {
    w = await createWorkspace(ctx);
    centre = await centreFor(w, ['en', 'de']);
    a.published = await article(w, { title: 'Reset your password', body: `<p>Open Settings and choose Reset password. ${secret} published.</p>` });
    a.draft = await article(w, { title: 'Refund policy (draft)', body: `<p>Refunds take five days. ${secret} draft.</p>`, status: 'draft' });
    a.archived = await article(w, { title: 'Old shipping rates', body: `<p>Shipping was free. ${secret} archived.</p>`, status: 'archived' });
    a.internal = await article(w, { title: 'Escalation runbook', body: `<p>Page the on-call engineer. ${secret} internal.</p>`, visibility: 'internal' });
    a.signedIn = await article(w, { title: 'Partner pricing', body: `<p>Partners get twenty percent. ${secret} signed in.</p>`, visibility: 'signed_in' });
    a.german = await article(w, { title: 'Passwörter zurücksetzen', body: `<p>Öffnen Sie die Einstellungen. ${secret} deutsch.</p>`, locale: 'de' });
  });

  test('staff find every translation holding the word, drafts, archived and internal ones included, each with its state', async () => {
    const res = await staff(w, secret);
    expect(res.status).toBe(200);
    const hits = (res.body as Page).articles;
    const byId = new Map(hits.map((h) => [h.translation_id, h]));
    expect(new Set(byId.keys())).toEqual(new Set(Object.values(a).map((x) => x.translation_id)));
    expect(byId.get(a.draft!.translation_id)).toMatchObject({ editorial_state: 'draft', visibility: 'public', help_centre_id: centre, locale: 'en', title: 'Refund policy (draft)' });
    expect(byId.get(a.archived!.translation_id)).toMatchObject({ editorial_state: 'archived' });
    expect(byId.get(a.internal!.translation_id)).toMatchObject({ editorial_state: 'published', visibility: 'internal' });
    expect(byId.get(a.published!.translation_id)!.url).toMatch(new RegExp(`^https://kb-[0-9a-f]+\\.[^/]+/en/articles/${a.published!.article_id}-reset-your-password$`));
  });

  test('a visitor finds only the published, public translation in the centre\'s default locale', async () => {
    expect(await visitorIds(centre, secret)).toEqual([a.published!.translation_id]);
    const hit = (await visitor(centre, secret)).body.articles[0] as Hit;
    expect(Object.keys(hit).sort()).toEqual([
      'article_id', 'editorial_state', 'excerpt', 'help_centre_id', 'locale', 'snippet_html', 'title', 'translation_id', 'updated_at', 'url', 'visibility',
    ]);
    expect(hit).toMatchObject({ editorial_state: 'published', visibility: 'public', help_centre_id: centre, title: 'Reset your password' });
  });

  test('a draft\'s, an archived, an internal and a signed-in article\'s own words are never found by a visitor', async () => {
    for (const q of ['refunds five days', 'shipping free', 'on-call engineer', 'escalation runbook', 'partner pricing twenty', `${secret} draft`, `${secret} internal`]) {
      expect({ q, ids: await visitorIds(centre, q) }).toEqual({ q, ids: [] });
    }
    // Staff do find them.
    expect(await staffIds(w, 'escalation runbook')).toEqual([a.internal!.translation_id]);
    expect(await staffIds(w, 'refunds five days')).toEqual([a.draft!.translation_id]);
  });

  test('locale: a visitor reads one locale (the default unless asked), staff any or one', async () => {
    expect(await visitorIds(centre, 'einstellungen')).toEqual([]);
    expect(await visitorIds(centre, 'einstellungen', { locale: 'de' })).toEqual([a.german!.translation_id]);
    expect(await visitorIds(centre, 'password', { locale: 'de' })).toEqual([]);
    expect(await visitorIds(centre, secret, { locale: 'fr' })).toEqual([]);
    expect(await staffIds(w, 'einstellungen')).toEqual([a.german!.translation_id]);
    expect(new Set(await staffIds(w, secret, { locale: 'de' }))).toEqual(new Set([a.german!.translation_id]));
    expect(await staffIds(w, 'einstellungen', { locale: 'en' })).toEqual([]);
  });

  test('English word forms and accents: "passwords" finds password, "refunded" finds Refunds, "passworter" finds Passwörter', async () => {
    expect(await visitorIds(centre, 'passwords')).toEqual([a.published!.translation_id]);
    expect(await staffIds(w, 'refunded')).toEqual([a.draft!.translation_id]);
    expect(await visitorIds(centre, 'PASSWORTER zurucksetzen', { locale: 'de' })).toEqual([a.german!.translation_id]);
  });

  test('a phrase, an exclusion and OR work as in a web search', async () => {
    expect(await staffIds(w, '"reset password"')).toEqual([a.published!.translation_id]);
    expect(await staffIds(w, '"password reset"')).toEqual([]);
    expect(new Set(await staffIds(w, `${secret} -draft -archived -internal -signed -deutsch`))).toEqual(new Set([a.published!.translation_id]));
    expect(new Set(await staffIds(w, 'runbook OR pricing'))).toEqual(new Set([a.internal!.translation_id, a.signedIn!.translation_id]));
  });

  test('the snippet is escaped HTML, the matches in <mark>, at most 300 characters', async () => {
    const w2 = await createWorkspace(ctx);
    const c2 = await centreFor(w2, ['en']);
    const long = Array.from({ length: 400 }, (_, i) => `filler${i}`).join(' ');
    await article(w2, { title: 'Embedding the widget', body: `<p>${long}</p><p>Paste the &lt;script&gt; tag &amp; the widget loads. <b>x</b></p><p>${long}</p>` });
    const hit = (await visitor(c2, 'widget')).body.articles[0] as Hit;
    expect(hit.snippet_html).toContain('<mark>widget</mark>');
    const text = hit.snippet_html.replaceAll('<mark>', '').replaceAll('</mark>', '');
    expect(text).not.toContain('<');
    expect(text).not.toContain('>');
    expect(text).toContain('&lt;script&gt;');
    const visible = text.replace(/&[a-z]+;/g, '_');
    expect(visible.length).toBeLessThanOrEqual(301);
  });

  test('a snippet cut short keeps its tags whole: an open <mark> is closed, an entity never split, white space runs as one', () => {
    expect(boundSnippet('one <mark>two</mark> three', 100)).toBe('one <mark>two</mark> three');
    expect(boundSnippet('one  \n <mark>twothree</mark> four', 7)).toBe('one <mark>two</mark>…');
    expect(boundSnippet('a &amp; b &lt;c&gt;', 5)).toBe('a &amp; b…');
    expect(boundSnippet('a &amp; b &lt;c&gt;', 7)).toBe('a &amp; b &lt;…');
  });

  test('a title match ranks above a body-only match', async () => {
    const w2 = await createWorkspace(ctx);
    const c2 = await centreFor(w2, ['en']);
    const k = word();
    const inBody = await article(w2, { title: 'Something else', body: `<p>Mentions ${k} once in passing.</p>` });
    const inTitle = await article(w2, { title: `All about ${k}`, body: '<p>Details.</p>' });
    expect(await visitorIds(c2, k)).toEqual([inTitle.translation_id, inBody.translation_id]);
  });

  test('an edit is found by the very next search, and its old words no longer', async () => {
    const w2 = await createWorkspace(ctx);
    await centreFor(w2, ['en']);
    const [before, after] = [word(), word()];
    const t = await article(w2, { title: `Edited ${before}`, body: '<p>The body stays.</p>' });
    expect(await staffIds(w2, before)).toEqual([t.translation_id]);
    const edit = await ctx.http.patch(`/v1/help-centre/articles/${t.translation_id}`).set(bearer(w2.ownerKey)).send({ title: `Edited ${after}`, body_markdown: 'The body changed.' });
    expect(edit.status).toBe(200);
    expect(await staffIds(w2, after)).toEqual([t.translation_id]);
    expect(await staffIds(w2, 'body changed')).toEqual([t.translation_id]);
    expect(await staffIds(w2, before)).toEqual([]);
  });
});

describe('paging', () => {
  test('pages of any size list every hit once, in the one-page order', async () => {
    const w = await createWorkspace(ctx);
    const centre = await centreFor(w, ['en']);
    const k = word();
    for (let i = 0; i < 13; i++) {
      // Different densities of the word, so the ranks differ; some tie.
      await article(w, { title: `Article ${i}`, body: `<p>${Array.from({ length: 1 + (i % 4) }, () => k).join(' filler ')} and more text ${i}.</p>` });
    }
    const all = async (limit: number, path: (after: string | null) => Promise<{ status: number; body: Page }>) => {
      const ids: string[] = [];
      let after: string | null = null;
      do {
        const res = await path(after);
        expect(res.status).toBe(200);
        expect(res.body.articles.length).toBeLessThanOrEqual(limit);
        ids.push(...res.body.articles.map((h) => h.translation_id));
        after = res.body.next_cursor;
      } while (after !== null);
      return ids;
    };
    const staffPages = (limit: number) => all(limit, (after) => staff(w, k, { limit: String(limit), ...(after ? { after } : {}) }));
    const whole = await staffPages(50);
    expect(whole).toHaveLength(13);
    expect(new Set(whole).size).toBe(13);
    expect(await staffPages(1)).toEqual(whole);
    expect(await staffPages(5)).toEqual(whole);
    expect(await all(4, (after) => visitor(centre, k, { limit: '4', ...(after ? { after } : {}) }))).toEqual(whole);
  });
});

describe('workspaces and centres', () => {
  test('300 probes of another workspace\'s words, by its staff search and by the own centre\'s public search, find nothing', async () => {
    const [a, b] = [await createWorkspace(ctx), await createWorkspace(ctx)];
    await centreFor(a, ['en']);
    const bCentre = await centreFor(b, ['en']);
    const words: string[] = [];
    for (let i = 0; i < 10; i++) {
      const k = word();
      words.push(k);
      await article(a, { title: `Secret ${k}`, body: `<p>Confidential ${k} for workspace A only.</p>`, status: i % 2 ? 'draft' : 'published' });
    }
    // B has an article of its own matching the common words, so its answers are not empty by accident.
    const mine = await article(b, { title: 'Secret confidential', body: '<p>Workspace B only.</p>' });
    let answered = 0;
    for (let round = 0; answered < 300; round++) {
      for (const q of [...words, 'secret', 'confidential', `"${words[round % words.length]} for workspace"`]) {
        const s = await staffIds(b, q);
        const v = await visitorIds(bCentre, q);
        for (const id of [...s, ...v]) expect(id).toBe(mine.translation_id);
        answered += 2;
      }
    }
    expect(await staffIds(a, words[0]!)).toHaveLength(1);
  });

  test('a disabled centre, an unknown one and a malformed id are all 404 to a visitor', async () => {
    const w = await createWorkspace(ctx);
    const centre = await centreFor(w, ['en']);
    const k = word();
    await article(w, { title: `Visible ${k}`, body: '<p>Here.</p>' });
    expect(await visitorIds(centre, k)).toHaveLength(1);
    await ctx.db.updateTable('help_centres').set({ enabled: false }).where('id', '=', centre).execute();
    const disabled = await visitor(centre, k);
    expect(disabled.status).toBe(404);
    expect(disabled.body.code).toBe('not_found');
    const unknown = await visitor('2f1d3c4b-5a69-4788-9a0b-1c2d3e4f5a6b', k);
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ ...disabled.body, request_id: unknown.body.request_id });
    expect((await visitor('not-a-uuid', k)).status).toBe(404);
    // Staff still search the disabled centre's articles.
    expect(await staffIds(w, k, { help_centre_id: centre })).toHaveLength(1);
  });

  test('staff naming another workspace\'s centre get 404; a viewer may search; a key without help-centre-staff:read may not', async () => {
    const [w, other] = [await createWorkspace(ctx), await createWorkspace(ctx)];
    await centreFor(w, ['en']);
    const theirs = await centreFor(other, ['en']);
    const res = await staff(w, 'anything', { help_centre_id: theirs });
    expect(res.status).toBe(404);
    const viewer = await addMember(ctx, w, 'viewer');
    expect((await ctx.http.get('/v1/help-centre/articles/search').query({ q: 'anything' }).set(bearer(viewer.token))).status).toBe(200);
    const key = await mintKey(ctx, w.ownerKey, { scopes: ['customers:read'] });
    const refused = await ctx.http.get('/v1/help-centre/articles/search').query({ q: 'anything' }).set(bearer(key.secret));
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('insufficient_scope');
    expect((await ctx.http.get('/v1/help-centre/articles/search').query({ q: 'anything' })).status).toBe(401);
  });
});

describe('queries that are malformed, long or hostile', () => {
  let w: Workspace;
  let centre: string;
  beforeAll(async () => {
    w = await createWorkspace(ctx);
    centre = await centreFor(w, ['en']);
    await article(w, { title: 'Unclosed quotes and operators', body: '<p>A body about or and not.</p>' });
  });

  test.each([['"unclosed'], ['OR OR'], ['a OR'], ['foo & bar'], ['foo <-> bar'], ['x:*'], ['-"unclosed'], ['--a'], ['"a" "b'], ['not!'], ['(a | b)'], ['a'.repeat(500)], ['é😀ü']])(
    '%j is read as a web search: 200, never a 500',
    async (q) => {
      for (const res of [await staff(w, q), await visitor(centre, q)]) {
        expect(res.status).toBe(200);
        expect(Array.isArray(res.body.articles)).toBe(true);
      }
    },
  );

  test.each([['-'], ['"'], ['-"'], ['((('], ['!!!'], ['\\'], ["'"], ['&|!'], ['   '], ['']])('%j holds no word: 400 query_invalid naming q', async (q) => {
    for (const res of [await staff(w, q), await visitor(centre, q)]) {
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('query_invalid');
      expect(res.body.errors).toEqual([{ path: 'q', message: 'no word to search for' }]);
    }
  });

  test('past SEARCH_QUERY_MAX_CHARS is 400 query_too_long, past SEARCH_QUERY_MAX_TERMS words 400 query_too_complex', async () => {
    const long = await staff(w, 'a'.repeat(513));
    expect(long.status).toBe(400);
    expect(long.body.code).toBe('query_too_long');
    const many = await visitor(centre, Array.from({ length: 33 }, (_, i) => `w${i}`).join(' '));
    expect(many.status).toBe(400);
    expect(many.body.code).toBe('query_too_complex');
    expect((await visitor(centre, Array.from({ length: 32 }, (_, i) => `w${i}`).join(' '))).status).toBe(200);
  });

  test('an article of 80,000 characters of word_word_… (quadratic for the text parser) is written, found and shown fast', async () => {
    const k = word();
    const started = Date.now();
    const t = await article(w, { title: 'Underscores', body: `<p>${k}_head ${'_a'.repeat(40_000)}</p>` });
    const hits = (await visitor(centre, `${k} head`)).body.articles as Hit[];
    expect(hits.map((h) => h.translation_id)).toEqual([t.translation_id]);
    expect(hits[0]!.snippet_html).toContain(`<mark>${k}</mark>`);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  test('a hostile 100 KB query is refused fast (431 before any handler), and a 10 KB one 400', async () => {
    const started = Date.now();
    expect((await visitor(centre, 'refund '.repeat(15_000))).status).toBe(431);
    expect((await staff(w, 'refund '.repeat(15_000))).status).toBe(431);
    const tenK = await visitor(centre, 'refund '.repeat(1_400));
    expect(tenK.status).toBe(400);
    expect(tenK.body.code).toBe('query_too_long');
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe('the public search is budgeted per client address', () => {
  const budgeted = useTestApp({ env: { PUBLIC_SEARCH_RATE_POINTS: '3', PUBLIC_SEARCH_RATE_WINDOW_SECONDS: '60' } });

  test('past PUBLIC_SEARCH_RATE_POINTS a visitor is answered 429 throttled with Retry-After, refusals counted too', async () => {
    const w = await createWorkspace(budgeted.ctx);
    const res = await budgeted.ctx.http
      .post('/v1/help-centre/centres')
      .set(bearer(w.ownerKey))
      .send({ name: 'Help', default_locale: 'en', locales: ['en'], subdomain_label: `kb-${tag()}` });
    const centre = res.body.id as string;
    const ask = (q: string) => budgeted.ctx.http.get(`/v1/help-centres/${centre}/search`).query({ q });
    expect((await ask('refund')).status).toBe(200);
    expect((await ask('-')).status).toBe(400);
    expect((await ask('refund')).status).toBe(200);
    const over = await ask('refund');
    expect(over.status).toBe(429);
    expect(over.body.code).toBe('throttled');
    expect(Number(over.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Staff searches are the API's own budget, not this one.
    expect((await budgeted.ctx.http.get('/v1/help-centre/articles/search').query({ q: 'refund' }).set(bearer(w.ownerKey))).status).toBe(200);
  });
});
