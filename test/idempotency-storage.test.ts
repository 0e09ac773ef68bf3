/**
 * What an Idempotency-Key keeps (issue 32, findings 4 and 6): the first answer, kept a day for replays, held
 * secrets in clear (an API key's `sk_zr_…`, an endpoint's `whsec_…`, an integration's webhook URL) and, for a
 * reopen of a long ticket, megabytes per key. Kept answers are now sealed under ENCRYPTION_KEYS, and one over
 * IDEMPOTENCY_MAX_STORED_BYTES is kept as a pointer to the resource it showed.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { createTicket, setStatus } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ env: { OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true' }, workspaces: 1 });

/** Every stored answer of the workspace, as the table holds it. */
const stored = async (tenantId: string) =>
  (await sql<{ key: string; response_body: string | null }>`select key, response_body from idempotency_keys where tenant_id = ${tenantId}`.execute(ctx.db)).rows;

/** A POST with a fresh key, then the same again: both answers, the second a replay. */
async function twice(path: string, body: Record<string, unknown> = {}, token = ws.ownerKey) {
  const key = randomUUID();
  const send = () => ctx.http.post(path).set({ ...bearer(token), 'Idempotency-Key': key }).send(body);
  const first = await send();
  const again = await send();
  expect(again.headers['idempotent-replayed']).toBe('true');
  return { key, first, again };
}

describe('kept answers hold no secret', () => {
  test('after every secret-minting operation the table holds neither the secret nor anything of the answer in clear, and a replay still answers it', async () => {
    const w = await createWorkspace(ctx);
    const secrets: string[] = [];

    const apiKey = await twice('/v1/api-keys', { name: 'ci', scopes: ['tickets:read'] }, w.ownerKey);
    expect(apiKey.first.status).toBe(201);
    expect(apiKey.again.body).toEqual(apiKey.first.body);
    secrets.push(apiKey.first.body.secret);

    const endpoint = await twice('/v1/webhook-endpoints', { url: 'http://127.0.0.1:9/hook', event_types: ['ticket.created'] }, w.ownerKey);
    expect(endpoint.first.status).toBe(201);
    secrets.push(endpoint.first.body.secret);
    const rotated = await twice(`/v1/webhook-endpoints/${endpoint.first.body.id}/rotate-secret`, {}, w.ownerKey);
    expect(rotated.first.status).toBe(200);
    secrets.push(rotated.first.body.secret);

    const integration = await twice('/v1/integrations', { provider: 'zendesk', name: 'Zendesk' }, w.ownerKey);
    expect(integration.first.status).toBe(201);
    secrets.push(integration.first.body.id, integration.first.body.webhook_url);

    await ctx.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send({ enabled: true, display_name: 'SMS', config: {} }).expect(200);
    const token = await twice('/v1/channels/sms/inbound-token/rotate', {}, w.ownerKey);
    expect(token.first.status).toBe(200);
    secrets.push(token.first.body.inbound_token);

    for (const r of [apiKey, endpoint, rotated, integration, token]) expect(r.again.body).toEqual(r.first.body);
    const rows = await stored(w.tenantId);
    expect(rows).toHaveLength(5);
    for (const row of rows) {
      for (const secret of secrets) expect(row.response_body).not.toContain(secret);
      expect(row.response_body).toMatch(/^v1\./);
      expect(row.response_body).not.toMatch(/sk_zr_|whsec_|"id"/);
    }
  });
});

describe('large answers are kept as pointers', () => {
  /** A ticket whose timeline is about `kb` kilobytes. */
  async function longTicket(w: Workspace, kb: number) {
    const t = (await createTicket(ctx, w)) as { id: string };
    for (let i = 0; i < Math.ceil(kb / 60); i += 1) await ctx.http.post(`/v1/tickets/${t.id}/notes`).set(bearer(w.ownerKey)).send({ body: `${i} ${'x'.repeat(60_000)}` }).expect(201);
    return t.id;
  }

  test('reopening a long ticket under 20 fresh keys keeps a few hundred bytes each, not the timeline; a replay answers the ticket as it now stands', async () => {
    const w = await createWorkspace(ctx);
    const id = await longTicket(w, 1200);
    const keys: string[] = [];
    for (let i = 0; i < 20; i += 1) {
      await setStatus(ctx, w, id, 'solved');
      const key = randomUUID();
      keys.push(key);
      const res = await ctx.http.post(`/v1/tickets/${id}/reopen`).set({ ...bearer(w.ownerKey), 'Idempotency-Key': key });
      expect(res.status).toBe(200);
      expect(JSON.stringify(res.body).length).toBeGreaterThan(1_000_000);
    }
    const rows = await stored(w.tenantId);
    expect(rows).toHaveLength(20);
    const total = rows.reduce((n, r) => n + (r.response_body?.length ?? 0), 0);
    expect(total).toBeLessThan(20 * 1024);
    const replay = await ctx.http.post(`/v1/tickets/${id}/reopen`).set({ ...bearer(w.ownerKey), 'Idempotency-Key': keys[19]! });
    expect(replay.status).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const now = await ctx.http.get(`/v1/tickets/${id}`).set(bearer(w.ownerKey));
    expect(replay.body).toEqual(now.body);
  });

  test('a small change to a ticket with a large description keeps a pointer, and the replay answers the same events it appended', async () => {
    const w = await createWorkspace(ctx);
    const t = (await createTicket(ctx, w, { description: '€'.repeat(65_000) })) as { id: string };
    const key = randomUUID();
    const send = () => ctx.http.patch(`/v1/tickets/${t.id}`).set({ ...bearer(w.ownerKey), 'Idempotency-Key': key }).send({ priority: 'urgent' });
    const first = await send();
    expect(first.status).toBe(200);
    expect(first.body.new_events.length).toBeGreaterThan(0);
    const [row] = (await stored(w.tenantId)).filter((r) => r.key === key);
    expect(row!.response_body!.length).toBeLessThan(2048);
    const again = await send();
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
  });

  test('a small answer is kept whole: its replay is the first answer byte for byte', async () => {
    const key = randomUUID();
    const send = () => ctx.http.post('/v1/tickets').set({ ...bearer(ws.ownerKey), 'Idempotency-Key': key }).send({ subject: 'Small', description: 'short', customer_email: 's@example.test' });
    const first = await send();
    const again = await send();
    expect(again.text).toBe(first.text);
  });
});
