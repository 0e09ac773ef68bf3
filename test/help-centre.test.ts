/**
 * Help centres over HTTP: POST/GET /v1/help-centre/centres and PUT /v1/help-centre/brand (spec: Help centre
 * resource, Help centre branding object, Help centre endpoints; issue 9 Part 2 items 1 and 6).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { addMember, bearer, createWorkspace, mintKey, type Member } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

let admin: Member;
let editor: Member;
let viewer: Member;

const { ctx, ws } = useTestApp({ workspaces: 1 });
beforeAll(async () => {
  [admin, editor, viewer] = await Promise.all([addMember(ctx, ws, 'admin'), addMember(ctx, ws, 'editor'), addMember(ctx, ws, 'viewer')]);
});

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const label = () => `hc-${randomBytes(4).toString('hex')}`;
const centreBody = (over: Record<string, unknown> = {}) => ({ name: 'Acme Help', default_locale: 'en', locales: ['en', 'de'], subdomain_label: label(), ...over });

const create = (body: unknown, token: string) => ctx.http.post('/v1/help-centre/centres').set(bearer(token)).send(body as object);
const list = (token: string) => ctx.http.get('/v1/help-centre/centres').set(bearer(token));
const putBrand = (body: unknown, token: string, centreId?: string) =>
  ctx.http
    .put('/v1/help-centre/brand')
    .query(centreId ? { help_centre_id: centreId } : {})
    .set(bearer(token))
    .send(body as object);

/** A fresh workspace with its own admin (so the number of centres is under the test's control). */
async function freshWorkspace() {
  const w = await createWorkspace(ctx);
  const [a, e, v] = await Promise.all([addMember(ctx, w, 'admin'), addMember(ctx, w, 'editor'), addMember(ctx, w, 'viewer')]);
  return { w, admin: a, editor: e, viewer: v };
}

async function centreCount(tenantId: string): Promise<number> {
  const r = await ctx.db.selectFrom('help_centres').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', tenantId).executeTakeFirstOrThrow();
  return Number(r.n);
}
async function hostCount(fullHost: string): Promise<number> {
  const r = await ctx.db.selectFrom('help_centre_hosts').select((eb) => eb.fn.countAll<string>().as('n')).where('full_host', '=', fullHost).executeTakeFirstOrThrow();
  return Number(r.n);
}
async function storedBrand(centreId: string): Promise<Record<string, unknown>> {
  const r = await ctx.db.selectFrom('help_centres').select('brand').where('id', '=', centreId).executeTakeFirstOrThrow();
  return r.brand as Record<string, unknown>;
}
async function brandViaGet(token: string, centreId: string): Promise<Record<string, unknown>> {
  const res = await list(token);
  expect(res.status).toBe(200);
  const c = (res.body.help_centres as { id: string; brand: Record<string, unknown> }[]).find((x) => x.id === centreId);
  expect(c).toBeDefined();
  return c!.brand;
}

async function insertTranslation(tenantId: string, centreId: string, visibility: string, editorialState: string) {
  await sql`insert into help_article_translations (id, tenant_id, help_centre_id, article_id, locale, visibility, editorial_state)
            values (${randomUUID()}, ${tenantId}, ${centreId}, ${randomUUID()}, 'en', ${visibility}, ${editorialState})`.execute(ctx.db);
}

describe('POST /v1/help-centre/centres', () => {
  test('an admin creates a centre: 201 with every field, its primary host verified at creation', async () => {
    const body = centreBody({ name: 'Acme Support', brand: { logoUrl: '/logo.svg', color: '#0f1522' } });
    const res = await create(body, admin.token);
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['article_count', 'brand', 'default_locale', 'enabled', 'hosts', 'id', 'locales', 'name', 'published_public_count'].sort());
    expect(res.body).toMatchObject({
      name: 'Acme Support',
      default_locale: 'en',
      enabled: true,
      locales: ['en', 'de'],
      article_count: 0,
      published_public_count: 0,
    });
    expect(res.body.brand).toEqual({ logo_url: '/logo.svg', brand_color: '#0f1522' });
    expect(res.body.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.body.hosts).toHaveLength(1);
    expect(res.body.hosts[0]).toEqual({
      subdomain_label: body.subdomain_label,
      full_host: `${body.subdomain_label}.${ctx.config.HELP_CENTRE_BASE_DOMAIN}`,
      is_primary: true,
      verified_at: expect.stringMatching(ISO),
    });
    // Persisted: the row and its host exist.
    const row = await ctx.db.selectFrom('help_centres').selectAll().where('id', '=', res.body.id).executeTakeFirst();
    expect(row?.tenant_id).toBe(ws.tenantId);
    expect(await hostCount(`${body.subdomain_label}.${ctx.config.HELP_CENTRE_BASE_DOMAIN}`)).toBe(1);
  });

  test('without brand the centre starts with an empty brand object', async () => {
    const res = await create(centreBody(), admin.token);
    expect(res.status).toBe(201);
    expect(res.body.brand).toEqual({});
  });

  test.each([
    ['editor', () => editor],
    ['viewer', () => viewer],
  ])('an %s is refused with 403 and nothing is created', async (_role, who) => {
    const before = await centreCount(ws.tenantId);
    const res = await create(centreBody(), who().token);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect(await centreCount(ws.tenantId)).toBe(before);
  });

  test('default_locale not among locales → 400 and nothing is created', async () => {
    const before = await centreCount(ws.tenantId);
    const res = await create(centreBody({ default_locale: 'fr', locales: ['en', 'de'] }), admin.token);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(await centreCount(ws.tenantId)).toBe(before);
  });

  test.each(['Bad_Label', '-x', 'x-', 'a'.repeat(64), 'UPPER', 'a.b', ''])('bad subdomain_label %j → 400 and nothing is created', async (bad) => {
    const before = await centreCount(ws.tenantId);
    const res = await create(centreBody({ subdomain_label: bad }), admin.token);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(await centreCount(ws.tenantId)).toBe(before);
  });

  test('a 63-character label and a one-character label are accepted', async () => {
    const long = `a${randomBytes(31).toString('hex')}`.slice(0, 63);
    expect(long).toHaveLength(63);
    expect((await create(centreBody({ subdomain_label: long }), admin.token)).status).toBe(201);
    const { admin: a } = await freshWorkspace();
    const one = 'abcdefghijklmnopqrstuvwxyz0123456789'[randomBytes(1)[0]! % 36]!;
    const r = await create(centreBody({ subdomain_label: one }), a.token);
    expect(r.status).toBe(201);
  });

  test('the same label again, in this or another workspace → 409 subdomain_taken and nothing is created', async () => {
    const taken = label();
    expect((await create(centreBody({ subdomain_label: taken }), admin.token)).status).toBe(201);
    const fullHost = `${taken}.${ctx.config.HELP_CENTRE_BASE_DOMAIN}`;

    const before = await centreCount(ws.tenantId);
    const same = await create(centreBody({ subdomain_label: taken }), admin.token);
    expect(same.status).toBe(409);
    expect(same.body.code).toBe('subdomain_taken');
    expect(await centreCount(ws.tenantId)).toBe(before);

    const other = await freshWorkspace();
    const cross = await create(centreBody({ subdomain_label: taken }), other.admin.token);
    expect(cross.status).toBe(409);
    expect(cross.body.code).toBe('subdomain_taken');
    expect(await centreCount(other.w.tenantId)).toBe(0);
    expect(await hostCount(fullHost)).toBe(1);
  });

  test.each(['www', 'api', 'admin', 'app', 'mail', 'smtp', 'ns1', 'mx', 'support', 'status', 'login', 'sso', 'billing', 'autodiscover', 'autoconfig', 'localhost', 'www2', 'api-v2'])(
    'the reserved label %j → 422 subdomain_reserved and nothing is created',
    async (reserved) => {
      const before = await centreCount(ws.tenantId);
      const res = await create(centreBody({ subdomain_label: reserved }), admin.token);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ code: 'subdomain_reserved', errors: [{ path: 'body.subdomain_label' }] });
      expect(await centreCount(ws.tenantId)).toBe(before);
      expect(await hostCount(`${reserved}.${ctx.config.HELP_CENTRE_BASE_DOMAIN}`)).toBe(0);
    },
  );

  test('labels that merely contain a reserved word are free', async () => {
    for (const free of [`www-${label()}`, `${label()}-support`, `apiary${randomBytes(2).toString('hex')}`]) {
      expect((await create(centreBody({ subdomain_label: free }), admin.token)).status).toBe(201);
    }
  });

  test.each([
    [{ logoURL: '/a.png' }, 'brand_key_unknown'],
    [{ logo_url: 'http://x.test/a.png' }, 'brand_value_invalid'],
    [{ logo: '/a.png', logo_url: '/b.png' }, 'brand_key_duplicate'],
  ])('invalid brand %j at creation → 422 %s and nothing is created', async (brand, code) => {
    const before = await centreCount(ws.tenantId);
    const body = centreBody({ brand });
    const res = await create(body, admin.token);
    expect(res.status).toBe(422);
    expect(res.body.code).toBe(code);
    expect(await centreCount(ws.tenantId)).toBe(before);
    expect(await hostCount(`${body.subdomain_label}.${ctx.config.HELP_CENTRE_BASE_DOMAIN}`)).toBe(0);
  });
});

describe('GET /v1/help-centre/centres', () => {
  test('a viewer lists only this workspace\'s centres, with their hosts', async () => {
    const a = await freshWorkspace();
    const b = await freshWorkspace();
    const a1 = await create(centreBody({ name: 'A one' }), a.admin.token);
    const a2 = await create(centreBody({ name: 'A two' }), a.admin.token);
    const b1 = await create(centreBody({ name: 'B one' }), b.admin.token);
    expect([a1.status, a2.status, b1.status]).toEqual([201, 201, 201]);

    const res = await list(a.viewer.token);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(['help_centres']);
    const ids = (res.body.help_centres as { id: string }[]).map((c) => c.id).sort();
    expect(ids).toEqual([a1.body.id, a2.body.id].sort());
    const one = (res.body.help_centres as Record<string, unknown>[]).find((c) => c.id === a1.body.id);
    expect(one).toEqual(a1.body);

    const resB = await list(b.viewer.token);
    expect((resB.body.help_centres as { id: string }[]).map((c) => c.id)).toEqual([b1.body.id]);
  });

  test('a workspace with no centre lists an empty array', async () => {
    const { viewer: v } = await freshWorkspace();
    const res = await list(v.token);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ help_centres: [] });
  });

  test('an API key needs help-centre-staff:read', async () => {
    const { w } = await freshWorkspace();
    const ok = await mintKey(ctx, w.ownerKey, { scopes: ['help-centre-staff:read'] });
    const no = await mintKey(ctx, w.ownerKey, { scopes: ['tickets:read'] });
    expect((await list(ok.secret)).status).toBe(200);
    const refused = await list(no.secret);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('insufficient_scope');
  });

  test('article_count counts every translation; published_public_count only published and public ones', async () => {
    const { w, admin: a, viewer: v } = await freshWorkspace();
    const c1 = (await create(centreBody(), a.token)).body.id as string;
    const c2 = (await create(centreBody(), a.token)).body.id as string;
    await insertTranslation(w.tenantId, c1, 'public', 'published'); // counted by both
    await insertTranslation(w.tenantId, c1, 'public', 'published'); // counted by both
    await insertTranslation(w.tenantId, c1, 'public', 'draft'); // draft
    await insertTranslation(w.tenantId, c1, 'internal', 'published'); // internal
    await insertTranslation(w.tenantId, c1, 'signed_in', 'published'); // not public
    await insertTranslation(w.tenantId, c1, 'internal', 'draft');
    await insertTranslation(w.tenantId, c2, 'public', 'published'); // another centre

    // Another workspace's articles count nowhere here.
    const other = await freshWorkspace();
    const oc = (await create(centreBody(), other.admin.token)).body.id as string;
    await insertTranslation(other.w.tenantId, oc, 'public', 'published');

    const res = await list(v.token);
    expect(res.status).toBe(200);
    const byId = new Map((res.body.help_centres as { id: string; article_count: number; published_public_count: number }[]).map((c) => [c.id, c]));
    expect(byId.get(c1)).toMatchObject({ article_count: 6, published_public_count: 2 });
    expect(byId.get(c2)).toMatchObject({ article_count: 1, published_public_count: 1 });
    expect(Number.isInteger(byId.get(c1)!.article_count)).toBe(true);
  });
});

describe('PUT /v1/help-centre/brand', () => {
  test('with exactly one centre help_centre_id may be omitted; response is {help_centre_id, brand}', async () => {
    const { admin: a, viewer: v } = await freshWorkspace();
    const id = (await create(centreBody(), a.token)).body.id as string;
    const res = await putBrand({ title: 'Acme Help', brand_color: '#abc' }, a.token);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ help_centre_id: id, brand: { title: 'Acme Help', brand_color: '#abc' } });
    expect(await brandViaGet(v.token, id)).toEqual({ title: 'Acme Help', brand_color: '#abc' });
  });

  test('help_centre_id given as empty or "null" means not given', async () => {
    const { admin: a } = await freshWorkspace();
    const id = (await create(centreBody(), a.token)).body.id as string;
    for (const q of ['', 'null']) {
      const res = await ctx.http.put('/v1/help-centre/brand').query({ help_centre_id: q }).set(bearer(a.token)).send({ title: `T ${q}` });
      expect(res.status).toBe(200);
      expect(res.body.help_centre_id).toBe(id);
    }
  });

  test('with two centres, omitted → 400 help_centre_required and nothing stored; named → that one only', async () => {
    const { admin: a, viewer: v } = await freshWorkspace();
    const c1 = (await create(centreBody(), a.token)).body.id as string;
    const c2 = (await create(centreBody(), a.token)).body.id as string;
    const res = await putBrand({ title: 'Nope' }, a.token);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('help_centre_required');
    expect(await storedBrand(c1)).toEqual({});
    expect(await storedBrand(c2)).toEqual({});

    const named = await putBrand({ title: 'Second' }, a.token, c2);
    expect(named.status).toBe(200);
    expect(named.body).toEqual({ help_centre_id: c2, brand: { title: 'Second' } });
    expect(await brandViaGet(v.token, c2)).toEqual({ title: 'Second' });
    expect(await brandViaGet(v.token, c1)).toEqual({});
  });

  test('another workspace\'s centre id → 404 and its brand is untouched', async () => {
    const mine = await freshWorkspace();
    await create(centreBody(), mine.admin.token);
    const other = await freshWorkspace();
    const theirs = (await create(centreBody({ brand: { title: 'Theirs' } }), other.admin.token)).body.id as string;
    const res = await putBrand({ title: 'Hijack' }, mine.admin.token, theirs);
    expect(res.status).toBe(404);
    expect(await storedBrand(theirs)).toEqual({ title: 'Theirs' });
    // An id that exists nowhere is 404 too.
    expect((await putBrand({ title: 'X' }, mine.admin.token, randomUUID())).status).toBe(404);
  });

  test('a workspace without any centre → 404', async () => {
    const { admin: a } = await freshWorkspace();
    expect((await putBrand({ title: 'X' }, a.token)).status).toBe(404);
  });

  test('replace semantics: a key not sent again is removed (absent, not null)', async () => {
    const { admin: a, viewer: v } = await freshWorkspace();
    const id = (await create(centreBody(), a.token)).body.id as string;
    const first = await putBrand({ logo_url: '/l.png', title: 'Acme', tagline: 'We help' }, a.token);
    expect(first.status).toBe(200);
    expect(await brandViaGet(v.token, id)).toEqual({ logo_url: '/l.png', title: 'Acme', tagline: 'We help' });

    const second = await putBrand({ title: 'Acme 2' }, a.token);
    expect(second.status).toBe(200);
    expect(second.body.brand).toEqual({ title: 'Acme 2' });
    const after = await brandViaGet(v.token, id);
    expect(after).toEqual({ title: 'Acme 2' });
    expect(Object.prototype.hasOwnProperty.call(after, 'logo_url')).toBe(false);
    expect(Object.prototype.hasOwnProperty.call(after, 'tagline')).toBe(false);
    expect(await storedBrand(id)).toEqual({ title: 'Acme 2' });

    const cleared = await putBrand({}, a.token);
    expect(cleared.status).toBe(200);
    expect(await brandViaGet(v.token, id)).toEqual({});
  });

  test('stored under canonical names: aliases never appear in the stored object', async () => {
    const { admin: a, viewer: v } = await freshWorkspace();
    const id = (await create(centreBody(), a.token)).body.id as string;
    const res = await putBrand({ logoUrl: 'https://cdn.acme.test/logo.png', favicon: '/f.ico', colour: '#A1B2C3', siteTitle: '  Acme  ', tagLine: 'Hello' }, a.token);
    expect(res.status).toBe(200);
    const canonical = { logo_url: 'https://cdn.acme.test/logo.png', favicon_url: '/f.ico', brand_color: '#A1B2C3', title: 'Acme', tagline: 'Hello' };
    expect(res.body.brand).toEqual(canonical);
    expect(await brandViaGet(v.token, id)).toEqual(canonical);
    expect(await storedBrand(id)).toEqual(canonical);
  });

  test.each([
    [{ title: 'New', logoURL: '/a.png' }, 'brand_key_unknown', 'logoURL'],
    [{ title: 'New', logo_url: 'javascript:alert(1)' }, 'brand_value_invalid', 'logo_url'],
    [{ title: 'New', color: 'red' }, 'brand_value_invalid', 'color'],
    [{ title: 'New', tagline: 'a<b' }, 'brand_value_invalid', 'tagline'],
    [{ title: 'New', siteTitle: 'Dup' }, 'brand_key_duplicate', 'siteTitle'],
  ])('%j → 422 %s naming %s, and the brand is unchanged', async (body, code, key) => {
    const { admin: a, viewer: v } = await freshWorkspace();
    const id = (await create(centreBody({ brand: { title: 'Old', tagline: 'Kept' } }), a.token)).body.id as string;
    const res = await putBrand(body, a.token);
    expect(res.status).toBe(422);
    expect(res.body.code).toBe(code);
    expect(res.body.detail).toContain(`"${key}"`);
    expect(await brandViaGet(v.token, id)).toEqual({ title: 'Old', tagline: 'Kept' });
  });

  test('an editor (and a viewer) is refused with 403 and nothing is stored', async () => {
    const { admin: a, editor: e, viewer: v } = await freshWorkspace();
    const id = (await create(centreBody({ brand: { title: 'Old' } }), a.token)).body.id as string;
    for (const who of [e, v]) {
      const res = await putBrand({ title: 'Edited' }, who.token);
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('insufficient_role');
    }
    expect(await storedBrand(id)).toEqual({ title: 'Old' });
  });

  test('an API key needs help-centre-staff:write', async () => {
    const { w, admin: a } = await freshWorkspace();
    const id = (await create(centreBody(), a.token)).body.id as string;
    const readOnly = await mintKey(ctx, w.ownerKey, { scopes: ['help-centre-staff:read'] });
    const writer = await mintKey(ctx, w.ownerKey, { scopes: ['help-centre-staff:write'] });
    const refused = await putBrand({ title: 'K' }, readOnly.secret);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('insufficient_scope');
    expect(await storedBrand(id)).toEqual({});
    expect((await putBrand({ title: 'K' }, writer.secret)).status).toBe(200);
    expect(await storedBrand(id)).toEqual({ title: 'K' });
  });
});
