/**
 * Webhook endpoints (issue 19): managing where a workspace's events are POSTed. The secret is shown on
 * creation and rotation only, never in a read, an audit entry, an error or a log line; URLs are https only
 * (http only to loopback where the deployment allows it); event types are checked against the contract.
 */
import { startTestApp } from './helpers/context';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ env: { OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true' }, workspaces: 1 });

const create = (w: Workspace, body: Record<string, unknown>) => ctx.http.post('/v1/webhook-endpoints').set(bearer(w.ownerKey)).send(body);
const valid = { url: 'https://hooks.example.com/helpdesk', event_types: ['ticket.created', 'message.created'] };
const auditOf = async (w: Workspace, id: string) =>
  ((await ctx.http.get('/v1/audit-log?limit=500').set(bearer(w.ownerKey))).body.audit_entries as { action: string; target_id: string; details: unknown; actor_user_id: string | null }[]).filter(
    (e) => e.target_id === id,
  );

test('create answers 201 with the id and a whsec_ secret of 32 random bytes; reads never show it again', async () => {
  const res = await create(ws, { ...valid, description: 'CRM sync' });
  expect(res.status).toBe(201);
  expect(res.body).toMatchObject({ id: expect.any(String), url: valid.url, event_types: valid.event_types, enabled: true, description: 'CRM sync', disabled_reason: null, consecutive_failures: 0 });
  const secret = res.body.secret as string;
  expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
  expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);

  const list = await ctx.http.get('/v1/webhook-endpoints').set(bearer(ws.ownerKey)).expect(200);
  const listed = (list.body.webhook_endpoints as { id: string }[]).find((e) => e.id === res.body.id);
  expect(listed).toMatchObject({ id: res.body.id, url: valid.url });
  expect(JSON.stringify(list.body)).not.toContain(secret.slice(6, 20));
  expect(listed).not.toHaveProperty('secret');

  const patched = await ctx.http.patch(`/v1/webhook-endpoints/${res.body.id}`).set(bearer(ws.ownerKey)).send({ description: 'CRM', event_types: ['ticket.updated'] }).expect(200);
  expect(patched.body).toMatchObject({ description: 'CRM', event_types: ['ticket.updated'] });
  expect(patched.body).not.toHaveProperty('secret');
});

test('the URL must be https; http is refused unless it is loopback and OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK is on', async () => {
  const http = await create(ws, { ...valid, url: 'http://hooks.example.com/x' });
  expect(http.status).toBe(422);
  expect(http.body.code).toBe('endpoint_url_refused');
  for (const url of ['http://127.0.0.1:9/x', 'http://localhost:9/x', 'http://[::1]:9/x']) expect((await create(ws, { ...valid, url })).status).toBe(201);
  expect((await create(ws, { ...valid, url: 'ftp://hooks.example.com/x' })).status).toBe(400);
  expect((await create(ws, { ...valid, url: 'not a url' })).status).toBe(400);
  const patched = await ctx.http.patch(`/v1/webhook-endpoints/${(await create(ws, valid)).body.id}`).set(bearer(ws.ownerKey)).send({ url: 'http://example.org/' });
  expect(patched.status).toBe(422);

  // The deployment's default: no http at all, loopback included.
  const strict = await startTestApp();
  try {
    const w = await createWorkspace(strict);
    const res = await strict.http.post('/v1/webhook-endpoints').set(bearer(w.ownerKey)).send({ ...valid, url: 'http://127.0.0.1:9/x' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: 'endpoint_url_refused', detail: 'The endpoint URL must be https://.' });
    // Nor private, loopback or link-local addresses over https (names are checked when they resolve, at send).
    for (const url of ['https://127.0.0.1/x', 'https://10.1.2.3/x', 'https://169.254.169.254/latest', 'https://[::1]/x', 'https://[fd00::1]/x', 'https://[::ffff:192.168.1.1]/x']) {
      const refused = await strict.http.post('/v1/webhook-endpoints').set(bearer(w.ownerKey)).send({ ...valid, url });
      expect([url, refused.status, refused.body.code]).toEqual([url, 422, 'endpoint_url_refused']);
    }
    expect((await strict.http.post('/v1/webhook-endpoints').set(bearer(w.ownerKey)).send({ ...valid, url: 'https://93.184.216.34/x' })).status).toBe(201);
  } finally {
    await strict.close();
  }
});

test('an unknown event type is 422 event_type_unknown naming it; an empty list is a 400', async () => {
  const res = await create(ws, { ...valid, event_types: ['ticket.created', 'ticket.exploded'] });
  expect(res.status).toBe(422);
  expect(res.body.code).toBe('event_type_unknown');
  expect(res.body.detail).toContain('ticket.exploded');
  expect((await create(ws, { ...valid, event_types: [] })).status).toBe(400);
  const id = (await create(ws, valid)).body.id as string;
  const patched = await ctx.http.patch(`/v1/webhook-endpoints/${id}`).set(bearer(ws.ownerKey)).send({ event_types: ['nope'] });
  expect(patched.status).toBe(422);
  expect(patched.body.code).toBe('event_type_unknown');
});

test('create, rotate, disable and delete are audited, never with the secret; the rotated secret is new and shown once', async () => {
  const created = await create(ws, valid);
  const id = created.body.id as string;
  const rotated = await ctx.http.post(`/v1/webhook-endpoints/${id}/rotate-secret`).set(bearer(ws.ownerKey)).expect(200);
  expect(rotated.body.secret).toMatch(/^whsec_/);
  expect(rotated.body.secret).not.toBe(created.body.secret);
  expect(rotated.body.previous_secret_expires_at).toEqual(expect.any(String));
  // Default overlap: 24 h.
  expect(Date.parse(rotated.body.previous_secret_expires_at) - Date.now()).toBeGreaterThan(23.9 * 3600 * 1000);
  await ctx.http.patch(`/v1/webhook-endpoints/${id}`).set(bearer(ws.ownerKey)).send({ enabled: false }).expect(200);
  const again = await ctx.http.patch(`/v1/webhook-endpoints/${id}`).set(bearer(ws.ownerKey)).send({ enabled: true }).expect(200);
  expect(again.body).toMatchObject({ enabled: true, disabled_reason: null });
  await ctx.http.delete(`/v1/webhook-endpoints/${id}`).set(bearer(ws.ownerKey)).expect(204);
  expect((await ctx.http.delete(`/v1/webhook-endpoints/${id}`).set(bearer(ws.ownerKey))).status).toBe(404);

  const entries = await auditOf(ws, id);
  expect(entries.map((e) => e.action).sort()).toEqual(['endpoint.created', 'endpoint.deleted', 'endpoint.disabled', 'endpoint.enabled', 'endpoint.secret_rotated']);
  const text = JSON.stringify(entries);
  for (const s of [created.body.secret as string, rotated.body.secret as string]) {
    expect(text).not.toContain(s.slice(6, 22));
    expect(ctx.logs.text).not.toContain(s.slice(6, 22));
  }
});

test('another workspace\'s endpoint is 404 on every operation', async () => {
  const other = await createWorkspace(ctx);
  const id = (await create(ws, valid)).body.id as string;
  const as = bearer(other.ownerKey);
  expect((await ctx.http.patch(`/v1/webhook-endpoints/${id}`).set(as).send({ enabled: false })).status).toBe(404);
  expect((await ctx.http.delete(`/v1/webhook-endpoints/${id}`).set(as)).status).toBe(404);
  expect((await ctx.http.post(`/v1/webhook-endpoints/${id}/rotate-secret`).set(as)).status).toBe(404);
  expect((await ctx.http.get(`/v1/webhook-endpoints/${id}/deliveries`).set(as)).status).toBe(404);
  expect((await ctx.http.post(`/v1/webhook-endpoints/${id}/replay`).set(as).send({ since: '2025-01-01T00:00:00Z' })).status).toBe(404);
  expect(((await ctx.http.get('/v1/webhook-endpoints').set(as)).body.webhook_endpoints as unknown[]).length).toBe(0);
});

test('management takes events:write and admin; deliveries are readable with events:read from the viewer role', async () => {
  const id = (await create(ws, valid)).body.id as string;
  const reader = await mintKey(ctx, ws.ownerKey, { scopes: ['events:read'] });
  expect((await ctx.http.post('/v1/webhook-endpoints').set(bearer(reader.secret)).send(valid)).status).toBe(403);
  expect((await ctx.http.get(`/v1/webhook-endpoints/${id}/deliveries`).set(bearer(reader.secret))).status).toBe(200);
  const tickets = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:write'] });
  expect((await ctx.http.get(`/v1/webhook-endpoints/${id}/deliveries`).set(bearer(tickets.secret))).status).toBe(403);
  const writer = await mintKey(ctx, ws.ownerKey, { scopes: ['events:write'] });
  expect((await ctx.http.post('/v1/webhook-endpoints').set(bearer(writer.secret)).send(valid)).status).toBe(201);

  const viewer = await addMember(ctx, ws, 'viewer');
  expect((await ctx.http.get(`/v1/webhook-endpoints/${id}/deliveries`).set(bearer(viewer.token))).status).toBe(200);
  // The list shows URLs, which often carry the receiver's own token: admins only.
  expect((await ctx.http.get('/v1/webhook-endpoints').set(bearer(viewer.token))).status).toBe(403);
  expect((await ctx.http.post('/v1/webhook-endpoints').set(bearer(viewer.token)).send(valid)).status).toBe(403);
});

test('replaying to a disabled endpoint is 409 endpoint_disabled', async () => {
  const id = (await create(ws, { ...valid, enabled: false })).body.id as string;
  const res = await ctx.http.post(`/v1/webhook-endpoints/${id}/replay`).set(bearer(ws.ownerKey)).send({ since: '2025-01-01T00:00:00Z' });
  expect(res.status).toBe(409);
  expect(res.body.code).toBe('endpoint_disabled');
});
