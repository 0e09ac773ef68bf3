/**
 * No lost updates (issue 18, part 3; RFC 9110): a ticket's strong ETag is its version; If-Match on PATCH
 * refuses a stale change with 412 and writes nothing; If-None-Match on GET answers 304 while current; every
 * change to what the ticket reads as (fields, timeline, work totals) moves the version on; and no operation
 * sends an ETag it did not declare.
 */
import { sql } from 'kysely';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { inlineShared } from './helpers/openapi-doc';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

const get = (id: string, headers: Record<string, string> = {}) => ctx.http.get(`/v1/tickets/${id}`).set({ ...bearer(ws.ownerKey), ...headers });
const patch = (id: string, body: Record<string, unknown>, headers: Record<string, string> = {}) => ctx.http.patch(`/v1/tickets/${id}`).set({ ...bearer(ws.ownerKey), ...headers }).send(body);
const etagOf = async (id: string) => {
  const res = await get(id);
  expect(res.headers.etag).toMatch(/^"\d+"$/);
  return res.headers.etag as string;
};

test('a ticket read carries a strong ETag; a PATCH with the current one applies and answers the next', async () => {
  const t = (await createTicket(ctx, ws)) as { id: string };
  const tag = await etagOf(t.id);
  const res = await patch(t.id, { priority: 'high' }, { 'If-Match': tag });
  expect(res.status).toBe(200);
  expect(res.body.priority).toBe('high');
  expect(res.headers.etag).toMatch(/^"\d+"$/);
  expect(res.headers.etag).not.toBe(tag);
  expect(await etagOf(t.id)).toBe(res.headers.etag);
});

test('a PATCH on a stale read → 412 precondition_failed, nothing written', async () => {
  const t = (await createTicket(ctx, ws)) as { id: string };
  const stale = await etagOf(t.id);
  await patch(t.id, { tags: ['theirs'] }).expect(200);
  const before = (await sql<{ n: number }>`select count(*)::int as n from ticket_events where ticket_id = ${t.id}`.execute(ctx.db)).rows[0]!.n;
  const res = await patch(t.id, { priority: 'urgent', tags: ['mine'] }, { 'If-Match': stale });
  expect(res.status).toBe(412);
  expect(res.body.code).toBe('precondition_failed');
  const now = await get(t.id);
  expect(now.body.priority).not.toBe('urgent');
  expect(now.body.tags).toEqual(['theirs']);
  const after = (await sql<{ n: number }>`select count(*)::int as n from ticket_events where ticket_id = ${t.id}`.execute(ctx.db)).rows[0]!.n;
  expect(after).toBe(before);
});

test('If-Match: * applies to any current version; a weak tag never matches a write; no If-Match applies as before', async () => {
  const t = (await createTicket(ctx, ws)) as { id: string };
  expect((await patch(t.id, { tags: ['a'] }, { 'If-Match': '*' })).status).toBe(200);
  const current = await etagOf(t.id);
  expect((await patch(t.id, { tags: ['b'] }, { 'If-Match': `W/${current}` })).status).toBe(412);
  expect((await patch(t.id, { tags: ['c'] }, { 'If-Match': `"0", ${current}` })).status).toBe(200);
  expect((await patch(t.id, { tags: ['d'] })).status).toBe(200);
});

test('If-None-Match with the current ETag → 304 without a body; after any change → 200 with the new one', async () => {
  const t = (await createTicket(ctx, ws)) as { id: string };
  const tag = await etagOf(t.id);
  const unchanged = await get(t.id, { 'If-None-Match': tag });
  expect(unchanged.status).toBe(304);
  expect(unchanged.text ?? '').toBe('');
  // A reply (timeline), a time entry and a todo (work totals): each is part of the read, so each moves it on.
  const seen = new Set([tag]);
  const steps = [
    () => ctx.http.post(`/v1/tickets/${t.id}/notes`).set(bearer(ws.ownerKey)).send({ body: 'Looking into it.' }),
    () => ctx.http.post(`/v1/tickets/${t.id}/time-entries`).set(bearer(ws.ownerKey)).send({ minutes: 5 }),
    () => ctx.http.post(`/v1/tickets/${t.id}/todos`).set(bearer(ws.ownerKey)).send({ title: 'Call back' }),
  ];
  for (const step of steps) {
    const before = [...seen].at(-1)!;
    expect((await step()).status).toBe(201);
    const res = await get(t.id, { 'If-None-Match': before });
    expect(res.status).toBe(200);
    const tag = String(res.headers.etag);
    expect(seen.has(tag)).toBe(false);
    seen.add(tag);
  }
});

test('no accidental ETags: lists and other reads send none unless they declare one', async () => {
  const list = await ctx.http.get('/v1/tickets').set(bearer(ws.ownerKey));
  expect(list.status).toBe(200);
  expect(list.headers.etag).toBeUndefined();
  const members = await ctx.http.get('/v1/members').set(bearer(ws.ownerKey));
  expect(members.headers.etag).toBeUndefined();
  // So no If-None-Match can turn them into a 304 the client did not expect.
  expect((await ctx.http.get('/v1/members').set({ ...bearer(ws.ownerKey), 'If-None-Match': '*' })).status).toBe(200);
});

test('the OpenAPI document says it: ETag and 304 on the ticket read, If-Match and 412 on its PATCH', async () => {
  const doc = inlineShared((await ctx.http.get('/v1/openapi.json')).body) as {
    paths: Record<string, Record<string, { parameters: { name: string; in: string }[]; responses: Record<string, { description: string; headers?: Record<string, unknown> }> }>>;
  };
  const read = doc.paths['/v1/tickets/{ticket_id}']!.get!;
  const write = doc.paths['/v1/tickets/{ticket_id}']!.patch!;
  expect(read.parameters.map((p) => p.name)).toContain('If-None-Match');
  expect(read.responses['304']).toBeDefined();
  expect(read.responses['200']!.headers).toHaveProperty('ETag');
  expect(write.parameters.map((p) => p.name)).toContain('If-Match');
  expect(write.responses['412']!.description).toContain('precondition_failed');
  expect(doc.paths['/v1/tickets']!.get!.responses['304']).toBeUndefined();
});

describe('workspace settings', () => {
  const settings = (headers: Record<string, string> = {}) => ctx.http.get('/v1/tenants/me').set({ ...bearer(ws.ownerKey), ...headers });
  const change = (body: Record<string, unknown>, headers: Record<string, string> = {}) => ctx.http.patch('/v1/tenants/me').set({ ...bearer(ws.ownerKey), ...headers }).send(body);

  test('carry a strong ETag; a stale If-Match → 412 with nothing written; the current one applies', async () => {
    const read = await settings();
    const tag = String(read.headers.etag);
    expect(tag).toMatch(/^"\d+"$/);
    expect((await settings({ 'If-None-Match': tag })).status).toBe(304);
    const applied = await change({ name: 'Renamed once' }, { 'If-Match': tag });
    expect(applied.status).toBe(200);
    expect(applied.headers.etag).not.toBe(tag);
    const stale = await change({ name: 'Renamed on a stale read' }, { 'If-Match': tag });
    expect(stale.status).toBe(412);
    expect(stale.body.code).toBe('precondition_failed');
    expect((await settings()).body.name).toBe('Renamed once');
  });

  test('a provider key set or deleted (rows of their own) moves the version on too', async () => {
    const before = String((await settings()).headers.etag);
    await change({ provider_keys: { openai: 'sk-test-0123456789' } }).expect(200);
    const after = await settings({ 'If-None-Match': before });
    expect(after.status).toBe(200);
    expect(after.body.provider_keys_set.openai).toBe(true);
  });
});

describe('macros', () => {
  test('create and PATCH answer an ETag; a PATCH on a stale one → 412 with nothing written', async () => {
    const created = await ctx.http.post('/v1/macros').set(bearer(ws.ownerKey)).send({ name: 'Escalate', actions: [{ type: 'set_priority', priority: 'high' }] });
    expect(created.status).toBe(201);
    const tag = String(created.headers.etag);
    expect(tag).toMatch(/^"\d+"$/);
    const renamed = await ctx.http.patch(`/v1/macros/${created.body.id}`).set({ ...bearer(ws.ownerKey), 'If-Match': tag }).send({ name: 'Escalate now' });
    expect(renamed.status).toBe(200);
    expect(renamed.headers.etag).not.toBe(tag);
    const stale = await ctx.http.patch(`/v1/macros/${created.body.id}`).set({ ...bearer(ws.ownerKey), 'If-Match': tag }).send({ name: 'Stale rename' });
    expect(stale.status).toBe(412);
    const list = await ctx.http.get('/v1/macros').set(bearer(ws.ownerKey));
    const listed = (list.body.macros as { id: string; name: string; version: string }[]).find((m) => m.id === created.body.id)!;
    expect(listed.name).toBe('Escalate now');
    // The list carries each macro's version, so a client that read only the list can send If-Match.
    expect(`"${listed.version}"`).toBe(renamed.headers.etag);
    expect((await ctx.http.patch(`/v1/macros/${created.body.id}`).set({ ...bearer(ws.ownerKey), 'If-Match': `"${listed.version}"` }).send({ enabled: false })).status).toBe(200);
  });
});

describe('help-centre article translations', () => {
  let w: Workspace;
  let en: string;
  beforeAll(async () => {
    w = await createWorkspace(ctx);
    const centre = await ctx.http
      .post('/v1/help-centre/centres')
      .set(bearer(w.ownerKey))
      .send({ name: 'Help', default_locale: 'en', locales: ['en', 'de'], subdomain_label: `kb-${Date.now().toString(36)}` });
    expect(centre.status).toBe(201);
    const synced = await syncArticle({ locale: 'en', title: 'Reset your password' });
    en = synced.body.translation_id;
  });

  const syncArticle = (over: Record<string, unknown>) =>
    ctx.http
      .put('/v1/help-centre/articles/sync')
      .set(bearer(w.ownerKey))
      .send({ source_article_id: '360001', body_html: '<p>Hi</p>', source_status: 'published', visibility: 'public', container_path: ['Accounts'], source_updated_at: '2026-11-01T10:00:00Z', ...over })
      .expect(200);
  const read = (id: string, headers: Record<string, string> = {}) => ctx.http.get(`/v1/help-centre/articles/${id}`).set({ ...bearer(w.ownerKey), ...headers });
  const editArticle = (id: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    ctx.http.patch(`/v1/help-centre/articles/${id}`).set({ ...bearer(w.ownerKey), ...headers }).send(body);

  test('a read carries a strong ETag and answers 304 to it; an edit with it applies and answers the next', async () => {
    const first = await read(en);
    expect(first.headers.etag).toMatch(/^"[^"]+"$/);
    expect((await read(en, { 'If-None-Match': String(first.headers.etag) })).status).toBe(304);
    const edited = await editArticle(en, { excerpt: 'How to reset it' }, { 'If-Match': String(first.headers.etag) });
    expect(edited.status).toBe(200);
    expect(edited.headers.etag).not.toBe(first.headers.etag);
    expect((await read(en)).headers.etag).toBe(edited.headers.etag);
  });

  test('an edit on a stale read → 412 precondition_failed, nothing written', async () => {
    const stale = (await read(en)).headers.etag as string;
    await editArticle(en, { excerpt: 'Theirs' }).expect(200);
    const res = await editArticle(en, { excerpt: 'Mine', title: 'Mine too' }, { 'If-Match': stale });
    expect(res.status).toBe(412);
    expect(res.body.code).toBe('precondition_failed');
    const now = await read(en);
    expect(now.body.excerpt).toBe('Theirs');
    expect(now.body.title).toBe('Reset your password');
  });

  test('a sibling translation arriving changes the ETag (its alternates changed), so an old tag is neither 304 nor a match', async () => {
    const before = await read(en);
    expect(before.body.alternates).toEqual([]);
    await syncArticle({ locale: 'de', title: 'Passwort zurücksetzen' });
    const after = await read(en, { 'If-None-Match': String(before.headers.etag) });
    expect(after.status).toBe(200);
    expect(after.body.alternates.map((a: { locale: string }) => a.locale)).toEqual(['de']);
    expect(after.headers.etag).not.toBe(before.headers.etag);
    expect((await editArticle(en, { excerpt: 'x' }, { 'If-Match': String(before.headers.etag) })).status).toBe(412);
  });
});
