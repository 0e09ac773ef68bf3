/**
 * Retention (issue 38): a workspace's `retention_days` erases the conversation of solved and closed tickets resolved
 * longer ago than that (src/domains/retention/, docs/decisions/retention.md). Time is moved by shifting a ticket's
 * timestamps (and its events') back in SQL, never by sleeping. The runs are called directly
 * (`workerServices.retention.run`, what the retention.run job calls); the sweep's queued jobs are read from the queue.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { diskBlobStore } from '../src/domains/files/blobs';
import { claimStatement, countStatement } from '../src/domains/retention/store';
import { verifyWorkspace } from '../src/domains/reports/verify';
import { addMember, bearer, createWorkspace, type Workspace } from './helpers/factories';
import { createTicket, setStatus } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp();

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A word no other ticket holds: letters only, one lexeme for the search. */
const marker = () => `zq${randomBytes(5).toString('hex').replace(/[0-9]/g, (d) => 'ghijklmnop'[Number(d)]!)}`;
const PDF = Buffer.concat([Buffer.from('%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\n'), randomBytes(5_000), Buffer.from('\n%%EOF\n')]);

const run = (w: Workspace, opts?: Parameters<typeof ctx.workerServices.retention.run>[1]) => ctx.workerServices.retention.run(w.tenantId, opts);
const preview = (w: Workspace, days?: number | string) => ctx.http.get('/v1/tenants/me/retention').query(days === undefined ? {} : { retention_days: days }).set(bearer(w.ownerKey));
const setRetention = async (w: Workspace, days: number | null) => {
  const res = await ctx.http.patch('/v1/tenants/me').set(bearer(w.ownerKey)).send({ retention_days: days });
  if (res.status !== 200) throw new Error(`set retention: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Json;
};

/** Moves a ticket and its timeline `days` into the past (every timestamp of the row that is set, and its events'). */
async function age(ticketId: string, days: number) {
  const back = sql`make_interval(days => ${days})`;
  await sql`
    UPDATE tickets SET created_at = created_at - ${back}, updated_at = updated_at - ${back}, solved_at = solved_at - ${back},
      first_responded_at = first_responded_at - ${back}, status_entered_at = status_entered_at - ${back},
      last_agent_reply_at = last_agent_reply_at - ${back}, last_customer_message_at = last_customer_message_at - ${back},
      first_response_due = first_response_due - ${back}, resolution_due = resolution_due - ${back}
    WHERE id = ${ticketId}`.execute(ctx.db);
  await sql`UPDATE ticket_events SET created_at = created_at - ${back} WHERE ticket_id = ${ticketId}`.execute(ctx.db);
}

async function upload(w: Workspace): Promise<{ token: string; id: string }> {
  const res = await ctx.http.post('/v1/uploads').set(bearer(w.ownerKey)).attach('file', PDF, { filename: 'invoice.pdf', contentType: 'application/pdf' });
  if (res.status !== 201) throw new Error(`upload: ${res.status} ${JSON.stringify(res.body)}`);
  return { token: res.body.upload_token, id: res.body.attachment.id };
}

/**
 * A conversation carrying `word` everywhere its text can be: subject, description, a reply with a file, an internal
 * note, a todo, a satisfaction comment and the notification of its assignment; then `status` (solved or closed).
 */
async function conversation(w: Workspace, word: string, status: 'solved' | 'closed' | 'open', assignee?: string) {
  const t = await createTicket(ctx, w, { subject: `${word} refund`, description: `My order ${word} never came.` });
  const file = await upload(w);
  await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(w.ownerKey)).send({ body: `Sorry about ${word}, refunded.`, attachments: [file.token] }).expect(201);
  await ctx.http.post(`/v1/tickets/${t.id}/notes`).set(bearer(w.ownerKey)).send({ body: `Internal: ${word} was lost in transit.` }).expect(201);
  await ctx.http.post(`/v1/tickets/${t.id}/todos`).set(bearer(w.ownerKey)).send({ title: `Check ${word} with the courier` }).expect(201);
  if (assignee) await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(w.ownerKey)).send({ assignee_id: assignee }).expect(200);
  await ctx.http.post(`/v1/tickets/${t.id}/csat`).set(bearer(w.ownerKey)).send({ score: 4, comment: `Quick about ${word}` }).expect(201);
  if (status !== 'open') await setStatus(ctx, w, t.id, status);
  const key = (await sql<{ storage_key: string }>`SELECT storage_key FROM attachments WHERE id = ${file.id}`.execute(ctx.db)).rows[0]!.storage_key;
  return { id: t.id as string, fileId: file.id, storageKey: key };
}

const ticketRow = async (id: string) => (await sql<Json>`SELECT * FROM tickets WHERE id = ${id}`.execute(ctx.db)).rows[0]!;
const eventsOf = async (id: string) =>
  (await sql<{ id: string; kind: string; body: string; meta: Json; redacted_at: Date | null }>`
    SELECT id, kind, body, meta, redacted_at FROM ticket_events WHERE ticket_id = ${id} ORDER BY created_at, seq`.execute(ctx.db)).rows;
/** Every text column of every table that keeps a copy of the ticket's words, as one string. */
async function textOf(id: string): Promise<string> {
  const { rows } = await sql<{ text: string }>`
    SELECT concat_ws(' | ',
      (SELECT subject || ' ' || description FROM tickets WHERE id = ${id}),
      (SELECT string_agg(body || ' ' || meta::text, ' ') FROM ticket_events WHERE ticket_id = ${id}),
      (SELECT string_agg(body, ' ') FROM notifications WHERE ticket_id = ${id}),
      (SELECT string_agg(title, ' ') FROM todos WHERE ticket_id = ${id}),
      (SELECT string_agg(comment, ' ') FROM csat_responses WHERE ticket_id = ${id}),
      (SELECT doc::text FROM ticket_search WHERE ticket_id = ${id})) AS text`.execute(ctx.db);
  return rows[0]!.text;
}
const found = async (w: Workspace, q: string) => ((await ctx.http.get('/v1/tickets').query({ q }).set(bearer(w.ownerKey)).expect(200)).body.tickets as { id: string }[]).map((t) => t.id);
const usage = async (tenantId: string) => Number((await sql<{ bytes: string }>`SELECT coalesce((SELECT bytes FROM file_usage WHERE tenant_id = ${tenantId}), 0)::text AS bytes`.execute(ctx.db)).rows[0]!.bytes);
const blobExists = async (key: string) => (await diskBlobStore(ctx.config.FILES_DIR).get(key)) !== undefined;

describe('the setting', () => {
  test('retention is off by default: the workspace reads null, the dry run counts nothing, and a run erases nothing however old', async () => {
    const ws = await createWorkspace(ctx);
    const w = marker();
    const t = await conversation(ws, w, 'solved');
    await age(t.id, 10_000);
    expect((await ctx.http.get('/v1/tenants/me').set(bearer(ws.ownerKey)).expect(200)).body.retention_days).toBeNull();
    const dry = await preview(ws).expect(200);
    expect(dry.body).toEqual({ retention_days: null, counted_days: null, cutoff: null, due: { tickets: 0, events: 0, attachments: 0, bytes: 0 }, capped: false, last_run: null });
    expect(await run(ws)).toMatchObject({ tickets: 0, events: 0, attachments: 0, batches: 0, done: true });
    expect((await ticketRow(t.id)).subject).toBe(`${w} refund`);
    expect(await blobExists(t.storageKey)).toBe(true);
    // The sweep queues nothing for a workspace without the setting.
    await ctx.workerServices.retention.sweep();
    expect(await ctx.runtime.queues.queue('maintenance').getJob(`retention-${ws.tenantId}`)).toBeUndefined();
  });

  test.each([0, 36_501, 'x', 1.5, -3])('retention_days %p is refused 400 validation_failed, and nothing is written', async (bad) => {
    const ws = await createWorkspace(ctx);
    await setRetention(ws, 90);
    const before = await sql<{ retention_days: number; version: string }>`SELECT retention_days, version::text FROM tenants WHERE id = ${ws.tenantId}`.execute(ctx.db);
    const res = await ctx.http.patch('/v1/tenants/me').set(bearer(ws.ownerKey)).send({ retention_days: bad, name: 'Not saved either' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    const after = await sql<{ retention_days: number; version: string; name: string }>`SELECT retention_days, version::text, name FROM tenants WHERE id = ${ws.tenantId}`.execute(ctx.db);
    expect(after.rows[0]).toMatchObject(before.rows[0]!);
    expect(after.rows[0]!.name).not.toBe('Not saved either');
    // The dry run refuses the same values as a proposal.
    expect((await preview(ws, String(bad))).status).toBe(400);
  });

  test('retention_days is written on its own: set, read back, turned off with null, and the other settings kept', async () => {
    const ws = await createWorkspace(ctx);
    await ctx.http.patch('/v1/tenants/me').set(bearer(ws.ownerKey)).send({ name: 'Kept', time_zone: 'Europe/Berlin' }).expect(200);
    expect(await setRetention(ws, 36_500)).toMatchObject({ retention_days: 36_500, name: 'Kept', time_zone: 'Europe/Berlin' });
    expect((await ctx.http.get('/v1/tenants/me').set(bearer(ws.ownerKey))).body.retention_days).toBe(36_500);
    expect(await setRetention(ws, 1)).toMatchObject({ retention_days: 1 });
    expect(await setRetention(ws, null)).toMatchObject({ retention_days: null, name: 'Kept' });
  });

  test('the dry run is an admin\'s: an editor gets 403', async () => {
    const ws = await createWorkspace(ctx);
    const editor = await addMember(ctx, ws, 'editor');
    expect((await ctx.http.get('/v1/tenants/me/retention').set(bearer(editor.token))).status).toBe(403);
  });
});

describe('a run', () => {
  let ws: Workspace;
  let other: Workspace;
  let agent: string;
  const words = { solved: marker(), closed: marker(), open: marker(), recent: marker(), other: marker() };
  const t: Record<keyof typeof words, { id: string; fileId: string; storageKey: string }> = {} as never;
  const range = () => {
    const day = (d: number) => new Date(Date.now() - d * 86_400_000).toISOString().slice(0, 10);
    return { from: day(120), to: day(0) };
  };
  const reports = async (w: Workspace) => {
    const out: Json = {};
    for (const name of ['volume', 'first_response_time', 'resolution_time', 'replies_per_ticket', 'agent_activity', 'backlog']) {
      out[name] = (await ctx.http.get(`/v1/reports/${name}`).query(range()).set(bearer(w.ownerKey)).expect(200)).body;
    }
    return out;
  };
  let before: { rows: Record<string, Json>; reports: Json; usage: number; dry: Json };
  let erased: Awaited<ReturnType<typeof run>>;

  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    other = await createWorkspace(ctx);
    agent = (await addMember(ctx, ws, 'editor')).userId;
    t.solved = await conversation(ws, words.solved, 'solved', agent);
    t.closed = await conversation(ws, words.closed, 'closed');
    t.open = await conversation(ws, words.open, 'open');
    t.recent = await conversation(ws, words.recent, 'solved');
    t.other = await conversation(other, words.other, 'solved');
    for (const k of ['solved', 'closed', 'open', 'other'] as const) await age(t[k].id, 100);
    await age(t.recent.id, 10);
    // The reports as raw rows now make them (the ages were written straight in SQL).
    await ctx.workerServices.reports.rebuildAll(ws.tenantId);
    const rows: Record<string, Json> = {};
    for (const k of Object.keys(t)) rows[k] = await ticketRow(t[k as keyof typeof t].id);
    // Counted for a proposal first: nothing is written by it.
    const version = (await sql<{ v: string }>`SELECT version::text AS v FROM tenants WHERE id = ${ws.tenantId}`.execute(ctx.db)).rows[0]!.v;
    const dry = (await preview(ws, 30).expect(200)).body;
    expect((await sql<{ v: string; d: number | null }>`SELECT version::text AS v, retention_days AS d FROM tenants WHERE id = ${ws.tenantId}`.execute(ctx.db)).rows[0]).toEqual({ v: version, d: null });
    before = { rows, reports: await reports(ws), usage: await usage(ws.tenantId), dry };
    await setRetention(ws, 30);
    await setRetention(other, 3650);
    erased = await run(ws);
  }, 60_000);

  test('the dry run of a proposal counts exactly what the run then erased, and writes nothing', async () => {
    expect(before.dry).toMatchObject({ retention_days: null, counted_days: 30, capped: false, last_run: null });
    // Two tickets; per ticket its opening message, the reply and the note; one file each.
    expect(before.dry.due).toEqual({ tickets: 2, events: 6, attachments: 2, bytes: 2 * PDF.length });
    expect(Date.parse(before.dry.cutoff)).toBeGreaterThan(Date.now() - 30 * 86_400_000 - 120_000);
    expect(erased).toMatchObject({ ...before.dry.due, merged: { tickets: 0, events: 0 }, batches: 1, done: true });
    // Now the setting's own dry run: nothing left, and the last run's figures.
    const now = (await preview(ws).expect(200)).body;
    expect(now).toMatchObject({ retention_days: 30, counted_days: 30, due: { tickets: 0, events: 0, attachments: 0, bytes: 0 }, last_run: { tickets: 2, events: 6, attachments: 2, done: true } });
  });

  test('only solved and closed tickets past the cutoff are erased: an open old one, a recent solved one and another workspace\'s stay whole', async () => {
    for (const k of ['solved', 'closed'] as const) {
      const text = await textOf(t[k].id);
      expect([k, text.includes(words[k])]).toEqual([k, false]);
      const row = await ticketRow(t[k].id);
      expect(row).toMatchObject({ subject: '[erased]', description: '[erased]' });
      expect(row.content_erased_at).toBeInstanceOf(Date);
      const messages = (await eventsOf(t[k].id)).filter((e) => ['ticket_created', 'reply', 'internal_note'].includes(e.kind));
      expect(messages).toHaveLength(3);
      for (const e of messages) {
        expect(e.body).toBe('[erased]');
        expect(e.redacted_at).toBeInstanceOf(Date);
      }
      // The reply keeps what it was (its first response), not what it said.
      expect(messages.find((e) => e.kind === 'reply')!.meta).toEqual({ first_response: true });
    }
    // The assignment's notification and the satisfaction comment went too.
    expect((await sql<{ body: string }>`SELECT body FROM notifications WHERE ticket_id = ${t.solved.id}`.execute(ctx.db)).rows).toEqual([{ body: '[erased]' }]);
    expect((await sql<{ comment: string; score: number }>`SELECT comment, score FROM csat_responses WHERE ticket_id = ${t.solved.id}`.execute(ctx.db)).rows).toEqual([{ comment: '', score: 4 }]);
    for (const k of ['open', 'recent'] as const) {
      expect([k, (await textOf(t[k].id)).includes(words[k])]).toEqual([k, true]);
      expect((await ticketRow(t[k].id)).content_erased_at).toBeNull();
      expect((await eventsOf(t[k].id)).every((e) => e.redacted_at === null)).toBe(true);
      expect(await blobExists(t[k].storageKey)).toBe(true);
    }
    expect((await textOf(t.other.id)).includes(words.other)).toBe(true);
    expect(await blobExists(t.other.storageKey)).toBe(true);
  });

  test('the erased tickets\' files are gone: rows, bytes in the store, and the workspace\'s usage', async () => {
    for (const k of ['solved', 'closed'] as const) {
      expect(await blobExists(t[k].storageKey)).toBe(false);
      expect((await sql`SELECT 1 FROM attachments WHERE id = ${t[k].fileId}`.execute(ctx.db)).rows).toHaveLength(0);
      expect((await ctx.http.get(`/v1/attachments/${t[k].fileId}`).set(bearer(ws.ownerKey))).status).toBe(404);
    }
    expect(await usage(ws.tenantId)).toBe(before.usage - 2 * PDF.length);
  });

  test('an erased ticket keeps its status, timestamps and counts, and every report answers as before (also rebuilt from raw rows)', async () => {
    for (const k of ['solved', 'closed'] as const) {
      const was = before.rows[k]!;
      const now = await ticketRow(t[k].id);
      for (const column of ['status', 'priority', 'assignee_id', 'team_id', 'tags', 'created_at', 'updated_at', 'solved_at', 'first_responded_at', 'status_entered_at', 'last_agent_reply_at', 'first_response_due', 'resolution_due', 'resolution_elapsed_minutes', 'customer_id', 'source']) {
        expect([k, column, now[column]]).toEqual([k, column, was[column]]);
      }
      // The version moves on (the ETag of what a read shows).
      expect(Number(now.version)).toBe(Number(was.version) + 1);
      // System events (status changes, assignments) are as they were: the reports read them.
      const status = (await eventsOf(t[k].id)).filter((e) => e.kind === 'status_changed');
      expect(status.length).toBeGreaterThan(0);
      for (const e of status) expect(e).toMatchObject({ body: '', redacted_at: null, meta: { to: expect.any(String), from: expect.any(String) } });
    }
    // The reports counted these tickets (solved 100 days ago, first replies, notes): there is something to keep.
    expect(JSON.stringify(before.reports.volume)).toMatch(/"solved":[1-9]/);
    expect(JSON.stringify(before.reports.first_response_time)).toMatch(/"tickets":[1-9]/);
    expect(JSON.stringify(before.reports.agent_activity)).toMatch(/"notes":[1-9]/);
    expect(await reports(ws)).toEqual(before.reports);
    await ctx.workerServices.reports.rebuildAll(ws.tenantId);
    expect(await reports(ws)).toEqual(before.reports);
    expect((await verifyWorkspace(ctx.db, ws.tenantId)).differences).toEqual([]);
    // The ticket reads as erased through the API, its files gone from its timeline.
    const read = (await ctx.http.get(`/v1/tickets/${t.solved.id}`).set(bearer(ws.ownerKey)).expect(200)).body as Json;
    expect(read).toMatchObject({ subject: '[erased]', description: '[erased]', status: 'solved' });
    expect(JSON.stringify(read)).not.toContain(words.solved);
    expect(JSON.stringify(read)).not.toContain('invoice.pdf');
  });

  test('the search no longer finds the erased words; the tickets kept are still found', async () => {
    expect(await found(ws, words.solved)).toEqual([]);
    expect(await found(ws, words.closed)).toEqual([]);
    expect(await found(ws, words.recent)).toEqual([t.recent.id]);
    expect(await found(other, words.other)).toEqual([t.other.id]);
  });

  test('a second run erases nothing more, and leaves the first run\'s marks as they were', async () => {
    const marks = async () => (await sql<{ at: string }>`SELECT redacted_at::text AS at FROM ticket_events WHERE ticket_id IN (${t.solved.id}, ${t.closed.id}) ORDER BY id`.execute(ctx.db)).rows;
    const first = await marks();
    const erasedAt = (await ticketRow(t.solved.id)).content_erased_at;
    expect(await run(ws)).toMatchObject({ tickets: 0, events: 0, attachments: 0, batches: 0, done: true });
    expect(await marks()).toEqual(first);
    expect((await ticketRow(t.solved.id)).content_erased_at).toEqual(erasedAt);
  });

  test('each batch is in the audit log with its figures, never the words', async () => {
    const { rows } = await sql<{ action: string; actor_user_id: string | null; details: Json }>`
      SELECT action, actor_user_id, details FROM audit_log WHERE tenant_id = ${ws.tenantId} AND action = 'retention.erased'`.execute(ctx.db);
    expect(rows).toEqual([{ action: 'retention.erased', actor_user_id: null, details: expect.objectContaining({ retention_days: 30, tickets: 2, events: 6, attachments: 2, bytes: 2 * PDF.length }) }]);
  });
});

describe('merged and reopened tickets', () => {
  test('a ticket reopened after its erasure keeps its new messages while live, and loses them once resolved past the cutoff again', async () => {
    const ws = await createWorkspace(ctx);
    await setRetention(ws, 30);
    const first = marker();
    const t = await createTicket(ctx, ws, { subject: `${first} login`, description: `Cannot log in, ${first}.` });
    await setStatus(ctx, ws, t.id, 'solved');
    await age(t.id, 40);
    expect(await run(ws)).toMatchObject({ tickets: 1 });
    // The customer writes again: the ticket is reopened, live, and no longer marked erased.
    const second = marker();
    await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(ws.ownerKey)).expect(200);
    await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: `Back again about ${second}` }).expect(201);
    expect((await ticketRow(t.id)).content_erased_at).toBeNull();
    expect(await run(ws)).toMatchObject({ tickets: 0 });
    await setStatus(ctx, ws, t.id, 'solved');
    expect(await run(ws)).toMatchObject({ tickets: 0 });
    expect(await textOf(t.id)).toContain(second);
    // Resolved past the cutoff again: only what came after the first erasure is left to take.
    await age(t.id, 40);
    expect(await run(ws)).toMatchObject({ tickets: 1, events: 1 });
    expect(await textOf(t.id)).not.toContain(second);
  });

  test('a merged-away ticket\'s conversation is erased with its winner\'s (a merge copies it), and stays merged', async () => {
    const ws = await createWorkspace(ctx);
    const w = marker();
    const source = await createTicket(ctx, ws, { subject: `${w} duplicate`, description: `Second mail about ${w}.` });
    await ctx.http.post(`/v1/tickets/${source.id}/notes`).set(bearer(ws.ownerKey)).send({ body: `Merging ${w}` }).expect(201);
    const target = await createTicket(ctx, ws, { subject: 'Original', description: 'First mail.' });
    await ctx.http.post(`/v1/tickets/${source.id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: target.id }).expect(200);
    await setStatus(ctx, ws, target.id, 'solved');
    await age(target.id, 50);
    await setRetention(ws, 30);
    const result = await run(ws);
    expect(result).toMatchObject({ tickets: 1, merged: { tickets: 1, events: 2 } });
    expect(await textOf(target.id)).not.toContain(w);
    expect(await textOf(source.id)).not.toContain(w);
    expect(await ticketRow(source.id)).toMatchObject({ status: 'merged', merged_into_id: target.id, subject: '[erased]' });
    // The merge's copies on the winner keep their mark: the reports still leave them out.
    const copies = (await eventsOf(target.id)).filter((e) => e.meta.via_merge === source.id);
    expect(copies.length).toBeGreaterThan(0);
    expect(copies.filter((e) => e.kind !== 'merged' && e.kind !== 'status_changed').every((e) => e.body === '[erased]')).toBe(true);
  });
});

describe('many tickets', () => {
  /** `n` solved tickets resolved long ago, each with its opening message, written in one statement each. */
  async function bulkSolved(w: Workspace, n: number, word: string): Promise<string[]> {
    const seed = (await createTicket(ctx, w)) as { customer_id: string; sla_policy_id: string };
    const { rows } = await sql<{ id: string }>`
      INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id,
                           first_response_due, resolution_due, solved_at, status_entered_at, created_at, updated_at)
      SELECT gen_random_uuid(), ${w.tenantId}, ${word} || ' ' || g, 'About ' || ${word}, 'solved', 'normal', 'api', ${seed.customer_id}, ${seed.sla_policy_id},
             now() - interval '99 days', now() - interval '98 days', now() - interval '90 days' + g * interval '1 second',
             now() - interval '90 days', now() - interval '100 days', now() - interval '90 days'
      FROM generate_series(1, ${n}) g
      RETURNING id`.execute(ctx.db);
    const ids = rows.map((r) => r.id);
    await sql`
      INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, created_at)
      SELECT gen_random_uuid(), ${w.tenantId}, t.id, 'ticket_created', 'About ' || ${word}, '{}', 'customer', now() - interval '100 days'
      FROM unnest(${ids}::uuid[]) AS t(id)`.execute(ctx.db);
    return ids;
  }

  test('the dry run and each batch read the due tickets as a range of the partial index tickets_retention_due', async () => {
    const ws = await createWorkspace(ctx);
    await bulkSolved(ws, 50, marker());
    await sql`ANALYZE tickets`.execute(ctx.db);
    const cutoff = new Date(Date.now() - 30 * 86_400_000);
    const explain = (statement: { compile(db: typeof ctx.db): { sql: string; parameters: readonly unknown[] } }) =>
      ctx.db.transaction().execute(async (tx) => {
        await sql`SET LOCAL enable_seqscan = off`.execute(tx);
        const { sql: text, parameters } = statement.compile(ctx.db);
        const { rows } = await sql<{ 'QUERY PLAN': string }>`EXPLAIN ${sql.raw(text.replace(/\$(\d+)/g, (_, i) => literal(parameters[Number(i) - 1])))}`.execute(tx);
        return rows.map((r) => r['QUERY PLAN']).join('\n');
      });
    const literal = (v: unknown) => (typeof v === 'number' ? String(v) : `'${(v instanceof Date ? v.toISOString() : String(v)).replace(/'/g, "''")}'`);
    const count = await explain(countStatement(ws.tenantId, cutoff, 100_000));
    expect(count).toMatch(/(Bitmap Index Scan on|Index (Only )?Scan using) tickets_retention_due/);
    expect(count).not.toMatch(/Seq Scan on tickets/);
    const first = await explain(claimStatement(ws.tenantId, { cutoff, after: null, limit: 500 }));
    expect(first).toMatch(/(Bitmap Index Scan on|Index Scan using) tickets_retention_due/);
    expect(first).not.toMatch(/Seq Scan on tickets/);
    const next = await explain(claimStatement(ws.tenantId, { cutoff, after: { due_at: cutoff.toISOString(), id: '00000000-0000-4000-8000-000000000000' }, limit: 500 }));
    expect(next).toMatch(/(Bitmap Index Scan on|Index Scan using) tickets_retention_due/);
  });

  test('two runs at once erase each ticket once: their figures add up to the tickets, every mark set by one of them', async () => {
    const ws = await createWorkspace(ctx);
    const w = marker();
    const ids = await bulkSolved(ws, 240, w);
    await setRetention(ws, 30);
    const dry = (await preview(ws).expect(200)).body;
    expect(dry.due).toEqual({ tickets: 240, events: 240, attachments: 0, bytes: 0 });
    const [a, b] = await Promise.all([run(ws, { batch: 20 }), run(ws, { batch: 20 })]);
    expect(a!.tickets + b!.tickets).toBe(240);
    expect(a!.events + b!.events).toBe(240);
    const { rows } = await sql<{ erased: number; marked: number; audited: number }>`
      SELECT (SELECT count(*) FROM tickets WHERE id = ANY(${ids}::uuid[]) AND content_erased_at IS NOT NULL AND subject = '[erased]')::int AS erased,
             (SELECT count(*) FROM ticket_events WHERE ticket_id = ANY(${ids}::uuid[]) AND redacted_at IS NOT NULL AND body = '[erased]')::int AS marked,
             (SELECT sum((details->>'tickets')::int) FROM audit_log WHERE tenant_id = ${ws.tenantId} AND action = 'retention.erased')::int AS audited`.execute(ctx.db);
    expect(rows[0]).toEqual({ erased: 240, marked: 240, audited: 240 });
    expect(await found(ws, w)).toEqual([]);
  });

  test('a run stops at its budget and queues its continuation, which takes the rest', async () => {
    const ws = await createWorkspace(ctx);
    await bulkSolved(ws, 30, marker());
    await setRetention(ws, 30);
    const first = await run(ws, { batch: 10, budgetMs: 0 });
    expect(first).toMatchObject({ tickets: 10, batches: 1, done: false });
    const job = await ctx.runtime.queues.queue('maintenance').getJob(`retention-${ws.tenantId}-1`);
    expect(job?.data).toEqual({ tenant_id: ws.tenantId, continued: 1 });
    await job!.remove();
    expect(await run(ws, { batch: 10 })).toMatchObject({ tickets: 20, done: true });
    expect((await preview(ws).expect(200)).body.due.tickets).toBe(0);
  });

  test('the sweep queues one retention.run per workspace with something due, once however often it runs', async () => {
    const due = await createWorkspace(ctx);
    const nothingDue = await createWorkspace(ctx);
    await bulkSolved(due, 3, marker());
    await bulkSolved(nothingDue, 3, marker());
    await setRetention(due, 30);
    await setRetention(nothingDue, 365);
    await ctx.workerServices.retention.sweep();
    await ctx.workerServices.retention.sweep();
    const queue = ctx.runtime.queues.queue('maintenance');
    const jobs = (await queue.getJobs(['wait', 'waiting', 'prioritized', 'delayed'])).filter((j) => j.name === 'retention.run');
    expect(jobs.filter((j) => j.data.tenant_id === due.tenantId).map((j) => j.id)).toEqual([`retention-${due.tenantId}`]);
    expect(jobs.filter((j) => j.data.tenant_id === nothingDue.tenantId)).toEqual([]);
    for (const j of jobs) await j.remove();
  });
});
