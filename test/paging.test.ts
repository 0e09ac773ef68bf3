/**
 * Lists that integrations can follow (issue 18, part 4): every list that can grow answers
 * `{<items>, next_cursor}`; following `next_cursor` as `after` visits every row exactly once, in order, also
 * while rows arrive and when sort keys tie; a cursor is checked (another sort's, a tampered one, a foreign
 * shape: 400, never a 500); tickets sort four ways and filter by updated_after and several values.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { inlineShared } from './helpers/openapi-doc';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

type Row = { id?: string; user_id?: string; provider_message_id?: string };
const idOf = (r: Row) => r.id ?? r.user_id ?? r.provider_message_id!;

/** Follows next_cursor from the first page to the end, `limit` rows a page; every page must be full but the last. */
async function walk(path: string, name: string, limit: number, token = ws.ownerKey): Promise<string[]> {
  const seen: string[] = [];
  let after: string | null = null;
  const sep = path.includes('?') ? '&' : '?';
  for (let pages = 0; pages < 1000; pages += 1) {
    const res: { status: number; body: Record<string, unknown> } = await ctx.http.get(`${path}${sep}limit=${limit}${after ? `&after=${after}` : ''}`).set(bearer(token));
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual([name, 'next_cursor'].sort());
    const rows = res.body[name] as Row[];
    seen.push(...rows.map(idOf));
    after = res.body.next_cursor as string | null;
    if (after === null) return seen;
    expect(rows).toHaveLength(limit);
  }
  throw new Error('the cursor never ended');
}

async function onePage(path: string, name: string, token = ws.ownerKey): Promise<string[]> {
  const sep = path.includes('?') ? '&' : '?';
  const res = await ctx.http.get(`${path}${sep}limit=500`).set(bearer(token));
  expect(res.status).toBe(200);
  expect(res.body.next_cursor).toBeNull();
  return (res.body[name] as Row[]).map(idOf);
}

const tickets = (q: string, w = ws) => ctx.http.get(`/v1/tickets${q}`).set(bearer(w.ownerKey));

describe('tickets', () => {
  let w: Workspace;
  let made: string[];
  beforeAll(async () => {
    w = await createWorkspace(ctx);
    made = [];
    for (let i = 0; i < 7; i += 1) made.push(((await createTicket(ctx, w, { subject: `Ticket ${i}` })) as { id: string }).id);
  });

  test('following next_cursor visits every ticket once, newest first, and ends with null', async () => {
    const all = await walk('/v1/tickets', 'tickets', 500, w.ownerKey);
    expect(all).toEqual([...made].reverse());
    for (const limit of [1, 2, 3, 7]) expect(await walk('/v1/tickets', 'tickets', limit, w.ownerKey)).toEqual(all);
  });

  test('pages stay stable while tickets arrive: new tickets neither repeat nor skip a row of the pages that follow', async () => {
    const first = (await tickets('?limit=3', w)).body;
    const arrivals = [];
    for (let i = 0; i < 4; i += 1) arrivals.push(((await createTicket(ctx, w, { subject: `Arrival ${i}` })) as { id: string }).id);
    const rest: string[] = [];
    let after = first.next_cursor as string | null;
    while (after) {
      const page = (await tickets(`?limit=3&after=${after}`, w)).body;
      rest.push(...page.tickets.map((t: { id: string }) => t.id));
      after = page.next_cursor;
    }
    const seen = [...first.tickets.map((t: { id: string }) => t.id), ...rest];
    const before = [...made].reverse();
    expect(seen.slice(0, before.length)).toEqual(before);
    expect(seen).toHaveLength(before.length);
    for (const id of arrivals) expect(seen).not.toContain(id);
    // Whoever starts again sees the arrivals first.
    expect((await tickets('?limit=4', w)).body.tickets.map((t: { id: string }) => t.id)).toEqual([...arrivals].reverse());
  });

  test('rows whose sort keys tie to the microsecond are each visited once (the id breaks the tie)', async () => {
    const t = await createWorkspace(ctx);
    const ids = [];
    for (let i = 0; i < 5; i += 1) ids.push(((await createTicket(ctx, t)) as { id: string }).id);
    await sql`update tickets set created_at = '2025-03-14T09:26:53.412345Z' where tenant_id = ${t.tenantId}`.execute(ctx.db);
    const seen = await walk('/v1/tickets', 'tickets', 2, t.ownerKey);
    expect([...seen].sort()).toEqual([...ids].sort());
    expect(await walk('/v1/tickets?sort=created_at', 'tickets', 2, t.ownerKey)).toEqual([...seen].reverse());
  });

  test('sort=created_at is oldest first; -updated_at puts the last changed first; updated_after returns only what changed since', async () => {
    const ascending = await walk('/v1/tickets?sort=created_at', 'tickets', 2, w.ownerKey);
    expect(ascending).toEqual([...(await walk('/v1/tickets?sort=-created_at', 'tickets', 500, w.ownerKey))].reverse());
    const oldest = made[0]!;
    const since = new Date().toISOString();
    await ctx.http.patch(`/v1/tickets/${oldest}`).set(bearer(w.ownerKey)).send({ priority: 'urgent' }).expect(200);
    const byUpdate = await walk('/v1/tickets?sort=-updated_at', 'tickets', 2, w.ownerKey);
    expect(byUpdate[0]).toBe(oldest);
    expect(await walk('/v1/tickets?sort=updated_at', 'tickets', 3, w.ownerKey)).toEqual([...byUpdate].reverse());
    expect(await walk(`/v1/tickets?sort=updated_at&updated_after=${encodeURIComponent(since)}`, 'tickets', 2, w.ownerKey)).toEqual([oldest]);
  });

  test('filters hold across pages: status=open,pending pages through exactly the matching tickets', async () => {
    const pending = made[1]!;
    await ctx.http.patch(`/v1/tickets/${pending}`).set(bearer(w.ownerKey)).send({ status: 'pending' }).expect(200);
    const solved = made[2]!;
    await ctx.http.patch(`/v1/tickets/${solved}`).set(bearer(w.ownerKey)).send({ status: 'solved' }).expect(200);
    const openOrPending = await walk('/v1/tickets?status=open,pending', 'tickets', 2, w.ownerKey);
    expect(openOrPending).toContain(pending);
    expect(openOrPending).not.toContain(solved);
    expect(await walk('/v1/tickets?status=solved', 'tickets', 1, w.ownerKey)).toEqual([solved]);
  });

  test('a cursor given out under one sort is refused under another', async () => {
    const cursor = (await tickets('?limit=1&sort=updated_at', w)).body.next_cursor as string;
    expect(cursor).toEqual(expect.any(String));
    const res = await tickets(`?limit=1&after=${cursor}`, w);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ path: 'query.after' })]));
    expect((await tickets(`?limit=1&sort=updated_at&after=${cursor}`, w)).status).toBe(200);
  });

  const forged = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  test.each([
    ['not base64 JSON', 'AAAA'],
    ['an impossible date', forged({ s: '-created_at', k: '2025-02-30T09:26:53.412345Z', i: randomUUID() })],
    ['an hour 25', forged({ s: '-created_at', k: '2025-03-14T25:26:53.412345Z', i: randomUUID() })],
    ['a sequence key on a timestamp sort', forged({ s: '-created_at', k: '1042', i: randomUUID() })],
    ['an id that is no uuid', forged({ s: '-created_at', k: '2025-03-14T09:26:53.412345Z', i: "x' or 1=1" })],
    ['an unknown sort', forged({ s: 'subject', k: '2025-03-14T09:26:53.412345Z', i: randomUUID() })],
    ['an extra field', forged({ s: '-created_at', k: '2025-03-14T09:26:53.412345Z', i: randomUUID(), x: 1 })],
    ['a prototype key', forged({ s: '__proto__', k: '2025-03-14T09:26:53.412345Z', i: randomUUID() })],
    ['a long one', 'A'.repeat(2000)],
  ])('a forged cursor (%s) is 400 on after, never a 500', async (_what, cursor) => {
    const res = await tickets(`?after=${cursor}`, w);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
  });

  test('a well-formed cursor from another workspace only names a position: it shows nothing of theirs', async () => {
    const other = await createWorkspace(ctx);
    await createTicket(ctx, other);
    await createTicket(ctx, other);
    const theirs = (await tickets('?limit=1', other)).body.next_cursor as string;
    const res = await tickets(`?after=${theirs}`, w);
    expect(res.status).toBe(200);
    const mine = new Set(await onePage('/v1/tickets', 'tickets', w.ownerKey));
    for (const t of res.body.tickets as { id: string }[]) expect(mine.has(t.id)).toBe(true);
  });
});

describe('every other list that can grow pages the same way', () => {
  test('the audit log: newest first, every entry once', async () => {
    const w = await createWorkspace(ctx);
    for (let i = 0; i < 5; i += 1) await mintKey(ctx, w.ownerKey, { name: `key ${i}` });
    const all = await onePage('/v1/audit-log', 'audit_entries', w.ownerKey);
    expect(all.length).toBeGreaterThanOrEqual(5);
    expect(await walk('/v1/audit-log', 'audit_entries', 2, w.ownerKey)).toEqual(all);
  });

  test('members: oldest membership first, every member once', async () => {
    const w = await createWorkspace(ctx);
    for (const role of ['viewer', 'editor', 'admin', 'viewer'] as const) await addMember(ctx, w, role);
    const all = await onePage('/v1/members', 'members', w.ownerKey);
    expect(all).toHaveLength(5);
    expect(all[0]).toBe(w.ownerId);
    expect(await walk('/v1/members', 'members', 2, w.ownerKey)).toEqual(all);
  });

  test('a ticket\'s time entries: oldest first, every entry once', async () => {
    const w = await createWorkspace(ctx);
    const t = (await createTicket(ctx, w)) as { id: string };
    for (let i = 1; i <= 5; i += 1) await ctx.http.post(`/v1/tickets/${t.id}/time-entries`).set(bearer(w.ownerKey)).send({ minutes: i }).expect(201);
    const all = await onePage(`/v1/tickets/${t.id}/time-entries`, 'time_entries', w.ownerKey);
    expect(all).toHaveLength(5);
    expect(await walk(`/v1/tickets/${t.id}/time-entries`, 'time_entries', 2, w.ownerKey)).toEqual(all);
  });

  test('notifications: the caller\'s own, newest first, every one once (unread_only too)', async () => {
    const w = await createWorkspace(ctx);
    for (let i = 0; i < 5; i += 1) {
      await sql`insert into notifications (id, tenant_id, user_id, kind, body, read_at)
                values (${randomUUID()}, ${w.tenantId}, ${w.ownerId}, 'assigned', ${`n${i}`}, ${i % 2 === 0 ? null : sql`now()`})`.execute(ctx.db);
    }
    const all = await onePage('/v1/notifications', 'notifications', w.ownerKey);
    expect(all).toHaveLength(5);
    expect(await walk('/v1/notifications', 'notifications', 2, w.ownerKey)).toEqual(all);
    expect(await walk('/v1/notifications?unread_only=true', 'notifications', 1, w.ownerKey)).toHaveLength(3);
  });

  test('ingest deliveries: newest arrival first, every delivery once, per channel too', async () => {
    const w = await createWorkspace(ctx);
    for (let i = 0; i < 5; i += 1) {
      await sql`insert into ingest_deliveries (tenant_id, channel, provider_message_id, first_correlation_id)
                values (${w.tenantId}, ${i < 3 ? 'sms' : 'telegram'}, ${`m${i}`}, ${randomUUID()})`.execute(ctx.db);
    }
    const all = await onePage('/v1/ingest/deliveries', 'deliveries', w.ownerKey);
    expect(all).toEqual(['m4', 'm3', 'm2', 'm1', 'm0']);
    expect(await walk('/v1/ingest/deliveries', 'deliveries', 2, w.ownerKey)).toEqual(all);
    expect(await walk('/v1/ingest/deliveries?channel=sms', 'deliveries', 2, w.ownerKey)).toEqual(['m2', 'm1', 'm0']);
  });

  test('the OpenAPI document shows limit, after and next_cursor on every cursor list, and offset on none of them', async () => {
    const doc = inlineShared((await ctx.http.get('/v1/openapi.json')).body);
    const lists = ['/v1/tickets', '/v1/audit-log', '/v1/members', '/v1/notifications', '/v1/ingest/deliveries', '/v1/tickets/{ticket_id}/time-entries', '/v1/integrations/{integration_id}/transcripts'];
    for (const path of lists) {
      const op = doc.paths[path].get;
      const names = (op.parameters as { name: string }[]).map((p) => p.name);
      expect(names).toEqual(expect.arrayContaining(['limit', 'after']));
      expect(names).not.toContain('offset');
      expect(JSON.stringify(op.responses['200'].content['application/json'].schema)).toContain('next_cursor');
    }
    const status = (doc.paths['/v1/tickets'].get.parameters as { name: string; style?: string; explode?: boolean; schema: { type: string } }[]).find((p) => p.name === 'status')!;
    // Repeated (`status=a&status=b`, what openapi-fetch sends); the comma form is accepted too (issue 35).
    expect(status).toMatchObject({ style: 'form', explode: true, schema: { type: 'array' } });
    const sort = (doc.paths['/v1/tickets'].get.parameters as { name: string; schema: { enum: string[] } }[]).find((p) => p.name === 'sort')!;
    expect(sort.schema.enum.sort()).toEqual(['-created_at', '-updated_at', 'created_at', 'relevance', 'updated_at']);
  });
});
