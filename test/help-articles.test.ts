import { randomBytes } from 'node:crypto';
import { addMember, bearer, createWorkspace, type Workspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp();

const label = () => `kb-${randomBytes(4).toString('hex')}`;

async function centreFor(w: Workspace) {
  const res = await ctx.http
    .post('/v1/help-centre/centres')
    .set(bearer(w.ownerKey))
    .send({ name: 'Help', default_locale: 'en', locales: ['en', 'de'], subdomain_label: label() });
  expect(res.status).toBe(201);
  return res.body as { id: string; hosts: { full_host: string }[] };
}

const sync = (w: Workspace, body: Record<string, unknown>) => ctx.http.put('/v1/help-centre/articles/sync').set(bearer(w.ownerKey)).send(body);
const article = (over: Record<string, unknown> = {}) => ({
  source_article_id: '360001',
  locale: 'en',
  title: 'Reset your password',
  body_html: '<p>Click <a href="https://source.test/hc/en-us/articles/360002-other">here</a>.</p><script>alert(1)</script><img src="x" onerror="alert(2)">',
  source_status: 'published',
  visibility: 'public',
  container_path: ['Accounts', 'Sign-in'],
  source_url: 'https://source.test/hc/en-us/articles/360001',
  source_updated_at: '2026-11-01T10:00:00Z',
  ...over,
});

describe('article sync and read', () => {
  test('a synced translation is served only as the sanitised render, with its reports, URL, breadcrumbs and markdown', async () => {
    const w = await createWorkspace(ctx);
    const centre = await centreFor(w);
    const res = await sync(w, article());
    expect(res.status).toBe(200);
    const t = res.body;
    expect(t.body_html).not.toMatch(/<script|onerror|alert\(1\)/);
    expect(t.sanitize_report.removed_tags).toEqual({ script: 1 });
    expect(t.sanitize_report.removed_attributes).toEqual({ onerror: 1 });
    expect(t.body_markdown).toContain('Click');
    expect(t.editorial_state).toBe('published');
    expect(t.published_at).not.toBeNull();
    expect(t.url).toBe(`https://${centre.hosts[0]!.full_host}/en/articles/${t.article_id}-reset-your-password`);
    expect(t.breadcrumbs.map((b: { name: string; path: string }) => [b.name, b.path])).toEqual([
      ['Accounts', '/en/accounts'],
      ['Sign-in', '/en/accounts/sign-in'],
    ]);
    // No route ever returns what the source sent.
    const read = await ctx.http.get(`/v1/help-centre/articles/${t.translation_id}`).set(bearer(w.ownerKey));
    expect(read.status).toBe(200);
    for (const field of ['body_html', 'body_markdown', 'excerpt', 'title']) {
      expect(read.body[field]).not.toMatch(/<script|onerror|alert\(/);
    }
    expect(JSON.stringify(read.body)).not.toContain('<script>');
    expect(read.body.excerpt).toBe('Click here.');
  });

  test('a link to another source article is rewritten to this centre once that article is known; alternates list the other locales', async () => {
    const w = await createWorkspace(ctx);
    const centre = await centreFor(w);
    const other = (await sync(w, article({ source_article_id: '360002', title: 'Other article', body_html: '<p>x</p>' }))).body;
    const t = (await sync(w, article())).body;
    expect(t.link_report.rewritten).toEqual([
      { from: 'https://source.test/hc/en-us/articles/360002-other', to: `https://${centre.hosts[0]!.full_host}/en/articles/${other.article_id}-other-article`, reason: 'source_article' },
    ]);
    const de = (await sync(w, article({ locale: 'de', title: 'Passwort zurücksetzen', source_updated_at: '2026-10-01T10:00:00Z' }))).body;
    expect(de.alternates).toEqual([{ locale: 'en', url: t.url }]);
    // The default-locale translation changed at the source after the German one: German is outdated.
    expect(de.outdated).toBe(true);
    expect(de.outdated_locales).toEqual(['de']);
  });

  test.each(['javascript:alert(document.cookie)', 'JavaScript:alert(1)', 'data:text/html,<script>alert(1)</script>', 'vbscript:msgbox(1)', 'file:///etc/passwd', 'ftp://source.test/a'])(
    'a source_url with a non-web scheme (%s) is refused 400 validation_failed and nothing is written',
    async (bad) => {
      const w = await createWorkspace(ctx);
      await centreFor(w);
      const res = await sync(w, article({ source_url: bad }));
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'validation_failed', errors: [{ path: 'body.source_url', message: 'an http or https URL' }] });
      const n = await ctx.db.selectFrom('help_articles').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', w.tenantId).executeTakeFirstOrThrow();
      expect(Number(n.n)).toBe(0);
    },
  );

  test('missing at source marks the translation and deletes nothing; a sync for an unknown translation marked missing is 404', async () => {
    const w = await createWorkspace(ctx);
    await centreFor(w);
    const t = (await sync(w, article())).body;
    const missing = await sync(w, { source_article_id: '360001', locale: 'en', missing: true });
    expect(missing.status).toBe(200);
    expect(missing.body.missing_at_source_at).not.toBeNull();
    expect(missing.body.body_html).toBe(t.body_html);
    expect((await sync(w, { source_article_id: 'nope', locale: 'en', missing: true })).status).toBe(404);
  });

  test('with several centres and no help_centre_id the sync is 400 help_centre_required and writes nothing', async () => {
    const w = await createWorkspace(ctx);
    await centreFor(w);
    await centreFor(w);
    const res = await sync(w, article());
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('help_centre_required');
    const counts = await ctx.db.selectFrom('help_article_translations').select('id').where('tenant_id', '=', w.tenantId).execute();
    expect(counts).toHaveLength(0);
  });
});

describe('local edits and conflicts', () => {
  test('edit → sync → conflict → read → resolve incoming: the source version replaces the edit only when chosen', async () => {
    const w = await createWorkspace(ctx);
    await centreFor(w);
    const t = (await sync(w, article())).body;
    const editor = await addMember(ctx, w, 'editor');
    const edit = await ctx.http
      .patch(`/v1/help-centre/articles/${t.translation_id}`)
      .set(bearer(editor.token))
      .send({ body_markdown: '# Local\n\nOur own words. <script>alert(3)</script>' });
    expect(edit.status).toBe(200);
    expect(edit.body.body_html).toContain('<h1>Local</h1>');
    expect(edit.body.body_html).not.toContain('<script');
    expect(edit.body.locally_edited_at).not.toBeNull();

    // No conflict yet.
    expect((await ctx.http.get(`/v1/help-centre/articles/${t.translation_id}/conflict`).set(bearer(w.ownerKey))).status).toBe(409);

    const incoming = await sync(w, article({ body_html: '<p>Source rewrite</p><script>x()</script>' }));
    expect(incoming.status).toBe(200);
    expect(incoming.body.has_conflict).toBe(true);
    expect(incoming.body.conflict_seen_at).not.toBeNull();
    expect(incoming.body.body_html).toContain('Our own words');

    const cmp = await ctx.http.get(`/v1/help-centre/articles/${t.translation_id}/conflict`).set(bearer(w.ownerKey));
    expect(cmp.status).toBe(200);
    expect(cmp.body.local_body_html).toContain('Our own words');
    expect(cmp.body.incoming_body_html).toBe('<p>Source rewrite</p>');
    expect(cmp.body.incoming_sanitize_report.removed_tags).toEqual({ script: 1 });
    // Reading the comparison applied nothing.
    const again = await ctx.http.get(`/v1/help-centre/articles/${t.translation_id}`).set(bearer(w.ownerKey));
    expect(again.body.has_conflict).toBe(true);
    expect(again.body.body_html).toContain('Our own words');

    const resolved = await ctx.http.post(`/v1/help-centre/articles/${t.translation_id}/conflict/resolve`).set(bearer(editor.token)).send({ keep: 'incoming' });
    expect(resolved.status).toBe(200);
    expect(resolved.body).toMatchObject({ has_conflict: false, locally_edited_at: null, body_html: '<p>Source rewrite</p>' });
    expect(resolved.body.sanitize_report.removed_tags).toEqual({ script: 1 });
    expect((await ctx.http.post(`/v1/help-centre/articles/${t.translation_id}/conflict/resolve`).set(bearer(editor.token)).send({ keep: 'incoming' })).status).toBe(409);
  });

  test('resolve local: the edit stays, the incoming version is discarded, and the next sync conflicts again', async () => {
    const w = await createWorkspace(ctx);
    await centreFor(w);
    const t = (await sync(w, article())).body;
    await ctx.http.patch(`/v1/help-centre/articles/${t.translation_id}`).set(bearer(w.ownerKey)).send({ title: 'Our title' });
    await sync(w, article({ title: 'Source title' }));
    const kept = await ctx.http.post(`/v1/help-centre/articles/${t.translation_id}/conflict/resolve`).set(bearer(w.ownerKey)).send({ keep: 'local' });
    expect(kept.status).toBe(200);
    expect(kept.body).toMatchObject({ has_conflict: false, title: 'Our title' });
    expect(kept.body.locally_edited_at).not.toBeNull();
    const next = await sync(w, article({ title: 'Source title 2' }));
    expect(next.body).toMatchObject({ has_conflict: true, title: 'Our title' });
  });

  test('a viewer may read but not edit, sync or resolve; another workspace\'s translation is 404', async () => {
    const w = await createWorkspace(ctx);
    await centreFor(w);
    const t = (await sync(w, article())).body;
    const viewer = await addMember(ctx, w, 'viewer');
    expect((await ctx.http.get(`/v1/help-centre/articles/${t.translation_id}`).set(bearer(viewer.token))).status).toBe(200);
    expect((await ctx.http.patch(`/v1/help-centre/articles/${t.translation_id}`).set(bearer(viewer.token)).send({ title: 'x' })).status).toBe(403);
    expect((await ctx.http.put('/v1/help-centre/articles/sync').set(bearer(viewer.token)).send(article())).status).toBe(403);
    const stranger = await createWorkspace(ctx);
    expect((await ctx.http.get(`/v1/help-centre/articles/${t.translation_id}`).set(bearer(stranger.ownerKey))).status).toBe(404);
  });
});
