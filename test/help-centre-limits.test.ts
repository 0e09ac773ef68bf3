/**
 * The help centre's explicit limits on article bodies (400 payload_too_complex, naming the field and the
 * limit; nothing written) and the render pool's time budget.
 */
import { randomBytes } from 'node:crypto';
import { startTestApp, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, type Workspace } from './helpers/factories';

let ctx: TestContext;
beforeAll(async () => {
  // A roomy budget: these tests are about the limits, and must not turn on how busy the machine is.
  ctx = await startTestApp({ env: { RENDER_BUDGET_MS: '10000' } });
});
afterAll(async () => {
  await ctx.close();
});

async function setUp(c: TestContext = ctx) {
  const w = await createWorkspace(c);
  const centre = await c.http
    .post('/v1/help-centre/centres')
    .set(bearer(w.ownerKey))
    .send({ name: 'Help', default_locale: 'en', locales: ['en'], subdomain_label: `kb-${randomBytes(4).toString('hex')}` });
  expect(centre.status).toBe(201);
  const t = await sync(c, w, { body_html: '<p>Original words.</p>' });
  expect(t.status).toBe(200);
  return { w, translationId: t.body.translation_id as string };
}

const sync = (c: TestContext, w: Workspace, over: Record<string, unknown>) =>
  c.http
    .put('/v1/help-centre/articles/sync')
    .set(bearer(w.ownerKey))
    .send({ source_article_id: '360001', locale: 'en', title: 'Reset your password', body_html: '<p>x</p>', source_status: 'published', ...over });

const edit = (c: TestContext, w: Workspace, id: string, body: Record<string, unknown>) =>
  c.http.patch(`/v1/help-centre/articles/${id}`).set(bearer(w.ownerKey)).send(body);

function expectTooComplex(res: { status: number; body: Record<string, unknown> }, path: string, mentions: RegExp) {
  expect(res.status).toBe(400);
  expect(res.body.code).toBe('payload_too_complex');
  const errors = res.body.errors as { path: string; message: string }[];
  expect(errors).toHaveLength(1);
  expect(errors[0]!.path).toBe(path);
  expect(errors[0]!.message).toMatch(mentions);
}

async function bodyOf(w: Workspace, id: string) {
  const res = await ctx.http.get(`/v1/help-centre/articles/${id}`).set(bearer(w.ownerKey));
  expect(res.status).toBe(200);
  return res.body as { body_html: string; body_markdown: string; locally_edited_at: string | null };
}

describe('article body limits', () => {
  test('refuses body_html nested 101 deep, naming the field and the limit; the stored article is unchanged', async () => {
    const { w, translationId } = await setUp();
    const res = await sync(ctx, w, { body_html: '<blockquote>'.repeat(101) + 'deep' });
    expectTooComplex(res, 'body.body_html', /nested more than 100 deep/);
    expect((await bodyOf(w, translationId)).body_html).toContain('Original words.');
  });

  test('20,000 <blockquote> deep (the reported 500) is refused at once', async () => {
    const { w } = await setUp();
    expectTooComplex(await sync(ctx, w, { body_html: '<blockquote>'.repeat(20_000) }), 'body.body_html', /nested more than 100 deep/);
  });

  test('depth counts open elements as the sanitiser does: void elements and implied end tags do not nest', async () => {
    const { w } = await setUp();
    const html = '<div>'.repeat(95) + '<br><img src="https://x.test/a.png"><hr>'.repeat(200) + '<ul>' + '<li>item'.repeat(300) + '</ul>' + '<p>para'.repeat(300) + '</div>'.repeat(95);
    const res = await sync(ctx, w, { body_html: html });
    expect(res.status).toBe(200);
    expect(res.body.body_html).toContain('item');
  });

  test('refuses more than 64 attributes on one element', async () => {
    const { w } = await setUp();
    const attrs = Array.from({ length: 65 }, (_, i) => `data-a${i}="1"`).join(' ');
    expectTooComplex(await sync(ctx, w, { body_html: `<p ${attrs}>x</p>` }), 'body.body_html', /more than 64 attributes/);
  });

  test('refuses more than 20,000 elements', async () => {
    const { w } = await setUp();
    expectTooComplex(await sync(ctx, w, { body_html: '<b>x</b>'.repeat(20_001) }), 'body.body_html', /more than 20000 elements/);
  });

  test('refuses body_html over 256 KiB and accepts one just under it', async () => {
    const { w } = await setUp();
    expectTooComplex(await sync(ctx, w, { body_html: `<p>${'a'.repeat(256 * 1024)}</p>` }), 'body.body_html', /at most 262144 \(256 KiB\)/);
    const ok = await sync(ctx, w, { body_html: `<p>${'word '.repeat((250 * 1024) / 5)}</p>` });
    expect(ok.status).toBe(200);
  });

  test('refuses body_markdown over 128 KiB; the translation is not marked edited', async () => {
    const { w, translationId } = await setUp();
    expectTooComplex(await edit(ctx, w, translationId, { body_markdown: 'a'.repeat(128 * 1024 + 1) }), 'body.body_markdown', /at most 131072 \(128 KiB\)/);
    expect((await bodyOf(w, translationId)).locally_edited_at).toBeNull();
  });

  test('raw HTML inside markdown is held to the same structure limits', async () => {
    const { w, translationId } = await setUp();
    expectTooComplex(await edit(ctx, w, translationId, { body_markdown: '<div>'.repeat(500) }), 'body.body_markdown', /nested more than 100 deep/);
  });

  test('an edit of "_a" x 40,000 (quadratic in the old renderer) renders and keeps the markdown as written', async () => {
    const { w, translationId } = await setUp();
    const res = await edit(ctx, w, translationId, { body_markdown: '_a'.repeat(40_000) });
    expect(res.status).toBe(200);
    expect(res.body.body_markdown).toBe('_a'.repeat(40_000));
  });
});

describe('markdown rendering (markdown-it in place of marked)', () => {
  test('an edit renders what editors write: headings, emphasis, strikethrough, lists, tables, code, bare URLs linked', async () => {
    const { w, translationId } = await setUp();
    const md = '## Steps\n\n1. Open **Settings**\n2. Choose _Security_ ~~now~~\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\ncode <b>\n```\n\nSee https://example.com/help for more.';
    const res = await edit(ctx, w, translationId, { body_markdown: md });
    expect(res.status).toBe(200);
    const html = res.body.body_html as string;
    expect(html).toContain('<h2>Steps</h2>');
    expect(html).toMatch(/<ol>\s*<li>Open <strong>Settings<\/strong><\/li>/);
    expect(html).toContain('<em>Security</em> <s>now</s>');
    expect(html).toMatch(/<table>[\s\S]*<td>1<\/td>/);
    expect(html).toContain('<code>code &lt;b&gt;\n</code>');
    expect(html).toContain('<a href="https://example.com/help" rel="noopener noreferrer nofollow">https://example.com/help</a>');
  });
});

describe('render time budget', () => {
  test('a render past RENDER_BUDGET_MS is stopped and answers 400 payload_too_complex; the next render works', async () => {
    const { w, translationId } = await setUp();
    // A second app on the same database with a 50 ms budget (it shares this process's render pool): the only
    // render it runs is the heavy one, so nothing ordinary has to fit the tight budget.
    const tight = await startTestApp({ database: false, env: { DATABASE_URL: ctx.config.DATABASE_URL, RENDER_BUDGET_MS: '50' } });
    try {
      // Within every limit (one paragraph of text), but 170-370 ms of markdown parsing on this machine.
      const res = await edit(tight, w, translationId, { body_markdown: '_a'.repeat(65_000) });
      expectTooComplex(res, 'body.body_markdown', /takes longer than 50 ms to render/);
      expect((await bodyOf(w, translationId)).locally_edited_at).toBeNull();
      // The stopped thread is replaced; renders under the ordinary budget go on.
      for (let i = 0; i < 3; i++) {
        const small = await edit(ctx, w, translationId, { body_markdown: `Short and **fine** ${i}.` });
        expect(small.status).toBe(200);
        expect(small.body.body_html).toContain('<strong>fine</strong>');
      }
    } finally {
      await tight.close();
    }
  });
});

test('an editor, not only an admin, gets the same refusal', async () => {
  const { w, translationId } = await setUp();
  const editor = await addMember(ctx, w, 'editor');
  const res = await ctx.http.patch(`/v1/help-centre/articles/${translationId}`).set(bearer(editor.token)).send({ body_markdown: '<div>'.repeat(500) });
  expectTooComplex(res, 'body.body_markdown', /nested more than 100 deep/);
});
