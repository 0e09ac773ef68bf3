/**
 * Customer export (issue 38, access request): POST /v1/customers/{id}/export queues a job that writes one JSON
 * document of everything held on the person to the file store; GET /v1/customers/{id}/exports/{export_id} answers
 * the job with a signed link once it is done. docs/decisions/customers-export.md has the decisions these check.
 *
 * One person is seeded across everything the export reads: an email ticket (their first message and a reply, an
 * agent's reply, an internal note), an SMS through channel intake threading to the same customer by their phone
 * handle, a CSAT answer, a file on their reply (and one on the note), and a Help Scout transcript naming them. Beside
 * them, another customer of the workspace and a customer with the same address in another workspace, neither of
 * whom may show up.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { existsSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { addMember, bearer, type Workspace } from './helpers/factories';
import { ingest } from './helpers/ingest';
import { emailPayload, newEmailMessageId, smsPayload } from './helpers/payloads';
import { useTestApp } from './helpers/use-test-app';
import { eventually } from './helpers/wait';
import { createIntegration, delivery, newSecret, recorded } from './helpers/webhook-intake';
import { helpscoutConversation } from './helpers/webhooks';

const { ctx, workspaces } = useTestApp({ workers: true, workspaces: 2 });

const hex = (n: number) => randomBytes(n).toString('hex');
const PDF = Buffer.concat([Buffer.from('%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\n'), randomBytes(4_000), Buffer.from('\n%%EOF\n')]);

interface ExportView {
  id: string;
  customer_id: string;
  kind: string;
  state: string;
  created_at: string;
  completed_at: string | null;
  expires_at: string | null;
  download_url: string | null;
  error: string | null;
}

interface ExportDocument {
  format: string;
  export_id: string;
  customer: { id: string; email: string };
  handles: { kind: string; handle: string; unreachable_at: string | null }[];
  tickets: { id: string; events: { id: string; kind: string; body: string; attachments: { id: string; name: string; download_url: string }[] }[] }[];
  csat: { id: string; ticket_id: string; score: number; comment: string; created_at: string }[];
  intake: { channel: string; provider_message_id: string; ticket_id: string | null; duplicate_count: number }[];
  transcripts: { id: string; transcript_id: string; external_ticket_id: string; requester: string }[];
}

/** What was seeded, by id, for the assertions. */
const seeded = {
  email: '',
  customerId: '',
  emailTicketId: '',
  smsTicketId: '',
  firstMessageId: '',
  replyMessageId: '',
  emailProviderIds: [] as string[],
  smsSid: '',
  phone: '',
  customerEventIds: [] as string[],
  agentReplyId: '',
  noteId: '',
  noteText: '',
  fileId: '',
  noteFileId: '',
  csatId: '',
  transcriptEventId: '',
  externalTicketId: '',
  // Someone else, in the same workspace and in another one.
  otherEmail: '',
  otherCustomerId: '',
  otherTicketId: '',
  otherCsatId: '',
  otherTranscriptEventId: '',
  foreignTicketId: '',
  foreignCustomerId: '',
};

const exportOf = (w: Workspace, customerId: string, exportId: string) => ctx.http.get(`/v1/customers/${customerId}/exports/${exportId}`).set(bearer(w.ownerKey));

async function ingestOk(w: Workspace, channel: string, payload: unknown): Promise<{ ticket_id: string }> {
  const res = await ingest(ctx, channel, payload, w.tenantId);
  if (res.status !== 200) throw new Error(`ingest ${channel}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { ticket_id: string };
}

const customerOf = async (tenantId: string, ticketId: string) =>
  (await ctx.db.selectFrom('tickets').select('customer_id').where('tenant_id', '=', tenantId).where('id', '=', ticketId).executeTakeFirstOrThrow()).customer_id;

const eventIds = async (tenantId: string, ticketId: string, kind: string) =>
  (await ctx.db.selectFrom('ticket_events').select('id').where('tenant_id', '=', tenantId).where('ticket_id', '=', ticketId).where('kind', '=', kind).orderBy('seq').execute()).map((r) => r.id);

/** Asks for an export and waits for its job to finish; answers the finished view. */
async function exported(w: Workspace, customerId: string, key = `exp-${hex(6)}`): Promise<ExportView> {
  const res = await ctx.http.post(`/v1/customers/${customerId}/export`).set(bearer(w.ownerKey)).set('Idempotency-Key', key).send({});
  if (res.status !== 202) throw new Error(`export: ${res.status} ${JSON.stringify(res.body)}`);
  return eventually(
    async () => {
      const got = await exportOf(w, customerId, res.body.id).expect(200);
      return got.body.state === 'queued' ? undefined : (got.body as ExportView);
    },
    20_000,
    `export ${res.body.id} finished`,
  );
}

async function download(url: string): Promise<{ text: string; doc: ExportDocument }> {
  const res = await ctx.http.get(url).buffer(true).parse((r, cb) => {
    const chunks: Buffer[] = [];
    r.on('data', (c: Buffer) => chunks.push(c));
    r.on('end', () => cb(null, Buffer.concat(chunks)));
  });
  if (res.status !== 200) throw new Error(`download: ${res.status} ${JSON.stringify(res.body)}`);
  const text = (res.body as Buffer).toString('utf8');
  return { text, doc: JSON.parse(text) as ExportDocument };
}

const occurrences = (text: string, needle: string) => text.split(needle).length - 1;

beforeAll(async () => {
  const [ws, other] = workspaces;
  await ctx.http.put('/v1/channels/email').set(bearer(ws.ownerKey)).send({ config: { inbound_address: 'support@acme.test' } }).expect(200);
  await ctx.http.put('/v1/channels/sms').set(bearer(ws.ownerKey)).send({ config: { phone_number: '+15550001111' } }).expect(200);
  await ctx.http.put('/v1/channels/email').set(bearer(other.ownerKey)).send({ config: { inbound_address: 'help@other.test' } }).expect(200);

  // The person's email conversation: their first message, their reply (threaded), an agent's reply, a note.
  seeded.email = `maya.${hex(4)}@fischer-logistik.test`;
  const first = newEmailMessageId();
  const reply = newEmailMessageId();
  seeded.emailProviderIds = [first, reply];
  const opened = await ingestOk(ws, 'email', emailPayload({ from: seeded.email, fromName: 'Maya Fischer', messageId: first, text: 'My pallet delivery #1042 has not arrived.' }));
  seeded.emailTicketId = opened.ticket_id;
  seeded.customerId = await customerOf(ws.tenantId, opened.ticket_id);
  const threaded = await ingestOk(ws, 'email', emailPayload({ from: seeded.email, fromName: 'Maya Fischer', messageId: reply, inReplyTo: first, references: [first], text: 'Here is the receipt.' }));
  expect(threaded.ticket_id).toBe(seeded.emailTicketId);
  await ctx.http.post(`/v1/tickets/${seeded.emailTicketId}/replies`).set(bearer(ws.ownerKey)).send({ body: 'We are tracing the pallet now.' }).expect(201);
  seeded.noteText = `NOTE-${hex(6)}: customer sounded upset, check credit limit`;
  await ctx.http.post(`/v1/tickets/${seeded.emailTicketId}/notes`).set(bearer(ws.ownerKey)).send({ body: seeded.noteText }).expect(201);
  const inbound = await eventIds(ws.tenantId, seeded.emailTicketId, 'inbound_email');
  expect(inbound).toHaveLength(2);
  [seeded.firstMessageId, seeded.replyMessageId] = inbound as [string, string];
  seeded.agentReplyId = (await eventIds(ws.tenantId, seeded.emailTicketId, 'reply'))[0]!;
  seeded.noteId = (await eventIds(ws.tenantId, seeded.emailTicketId, 'internal_note'))[0]!;

  // A file on their reply, and one on the note (never exported: its event is not).
  const files = ctx.services.files;
  const stored = await files.storeInbound(ws.tenantId, { ticketId: seeded.emailTicketId, eventId: seeded.replyMessageId, file: { name: 'receipt.pdf', open: async () => Readable.from([PDF]) } }, { maxBytes: 1_000_000 });
  expect(stored.state).toBe('stored');
  seeded.fileId = stored.id;
  const onNote = await files.storeInbound(ws.tenantId, { ticketId: seeded.emailTicketId, eventId: seeded.noteId, file: { name: 'credit-check.pdf', open: async () => Readable.from([PDF]) } }, { maxBytes: 1_000_000 });
  seeded.noteFileId = onNote.id;

  // Their phone, given to the customer, then an SMS from it through channel intake: it threads to them.
  seeded.phone = `+1555${randomInt(1_000_000, 9_999_999)}`;
  await ctx.db.insertInto('customer_handles').values({ tenant_id: ws.tenantId, kind: 'phone', handle: seeded.phone, customer_id: seeded.customerId }).execute();
  const sms = smsPayload({ from: seeded.phone, body: 'Any news on the pallet?' });
  seeded.smsSid = sms.MessageSid!;
  seeded.smsTicketId = (await ingestOk(ws, 'sms', sms)).ticket_id;
  expect(await customerOf(ws.tenantId, seeded.smsTicketId)).toBe(seeded.customerId);
  seeded.customerEventIds = [seeded.firstMessageId, seeded.replyMessageId, ...(await eventIds(ws.tenantId, seeded.smsTicketId, 'inbound_sms'))];
  expect(seeded.customerEventIds).toHaveLength(3);

  // A CSAT answer on their ticket.
  const csat = await ctx.http.post(`/v1/tickets/${seeded.emailTicketId}/csat`).set(bearer(ws.ownerKey)).send({ score: 4, comment: 'Found in the end' }).expect(201);
  seeded.csatId = csat.body.id;

  // A Help Scout transcript naming them (the address in another case).
  const helpscout = await createIntegration(ctx, ws, 'helpscout', newSecret());
  const hsId = randomInt(100_000_000, 2_000_000_000);
  const mine = await recorded(ctx, helpscout, delivery(helpscoutConversation({ id: hsId, customerEmail: seeded.email.toUpperCase() }), { event: 'convo.created' }));
  seeded.externalTicketId = mine.external_ticket_id;
  seeded.transcriptEventId = (await ctx.db.selectFrom('transcript_events').select('id').where('tenant_id', '=', ws.tenantId).where('transcript_id', '=', mine.transcript_id).executeTakeFirstOrThrow()).id;

  // Someone else in the workspace: a ticket, a CSAT answer, a transcript.
  seeded.otherEmail = `jonas.${hex(4)}@elsewhere.test`;
  seeded.otherTicketId = (await ingestOk(ws, 'email', emailPayload({ from: seeded.otherEmail, fromName: 'Jonas Weber', text: 'Invoice question' }))).ticket_id;
  seeded.otherCustomerId = await customerOf(ws.tenantId, seeded.otherTicketId);
  seeded.otherCsatId = (await ctx.http.post(`/v1/tickets/${seeded.otherTicketId}/csat`).set(bearer(ws.ownerKey)).send({ score: 2, comment: 'Slow' }).expect(201)).body.id;
  const theirs = await recorded(ctx, helpscout, delivery(helpscoutConversation({ customerEmail: seeded.otherEmail }), { event: 'convo.created' }));
  seeded.otherTranscriptEventId = (await ctx.db.selectFrom('transcript_events').select('id').where('transcript_id', '=', theirs.transcript_id).executeTakeFirstOrThrow()).id;

  // The same address in another workspace.
  seeded.foreignTicketId = (await ingestOk(other, 'email', emailPayload({ from: seeded.email, fromName: 'Maya Fischer', text: 'Other shop' }))).ticket_id;
  seeded.foreignCustomerId = await customerOf(other.tenantId, seeded.foreignTicketId);
}, 60_000);

describe('an admin exports a customer', () => {
  let view: ExportView;
  let text: string;
  let doc: ExportDocument;

  beforeAll(async () => {
    const [ws] = workspaces;
    view = await exported(ws, seeded.customerId);
    expect(view).toMatchObject({ state: 'done', kind: 'export', customer_id: seeded.customerId, error: null });
    ({ text, doc } = await download(view.download_url!));
  }, 60_000);

  test('the request is answered 202 with the queued job, and the job finishes with a link that expires with it', async () => {
    const [ws] = workspaces;
    const res = await ctx.http.post(`/v1/customers/${seeded.customerId}/export`).set(bearer(ws.ownerKey)).send({ reason: 'DSAR-2025-031' });
    expect(res.status).toBe(202);
    expect(Object.keys(res.body).sort()).toEqual(['completed_at', 'created_at', 'customer_id', 'download_url', 'error', 'expires_at', 'id', 'kind', 'state']);
    expect(res.body).toMatchObject({ customer_id: seeded.customerId, kind: 'export', state: 'queued', download_url: null, completed_at: null, expires_at: null, error: null });
    const row = await ctx.db.selectFrom('customer_jobs').selectAll().where('tenant_id', '=', ws.tenantId).where('id', '=', res.body.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ kind: 'export', reason: 'DSAR-2025-031', requested_by_user_id: ws.ownerId, requested_by_api_key_id: ws.ownerKeyId });

    expect(view.download_url).toMatch(/^\/v1\/customer-exports\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const ttlMs = ctx.config.CUSTOMER_EXPORT_TTL_HOURS * 3600_000;
    expect(Math.abs(Date.parse(view.expires_at!) - Date.parse(view.completed_at!) - ttlMs)).toBeLessThan(60_000);
    const done = await ctx.db.selectFrom('customer_jobs').selectAll().where('tenant_id', '=', ws.tenantId).where('id', '=', view.id).executeTakeFirstOrThrow();
    expect(done.file_key).toMatch(new RegExp(`^t/${ws.tenantId}/[0-9a-f]{32}$`));
    expect(Number(done.file_bytes)).toBe(Buffer.byteLength(text));
  });

  test('the document holds the customer, their handles and each of their tickets exactly once', () => {
    expect(doc).toMatchObject({ format: 'helpdesk.customer_export.v1', export_id: view.id, customer: { id: seeded.customerId, email: seeded.email } });
    expect(doc.handles).toContainEqual({ kind: 'phone', handle: seeded.phone, unreachable_at: null });
    expect(doc.tickets.map((t) => t.id).sort()).toEqual([seeded.emailTicketId, seeded.smsTicketId].sort());
  });

  test('every message the customer can see is there once: theirs on both channels and the agent\'s reply; the internal note is not', () => {
    const events = doc.tickets.flatMap((t) => t.events);
    for (const id of [...seeded.customerEventIds, seeded.agentReplyId]) expect([id, events.filter((e) => e.id === id).length]).toEqual([id, 1]);
    expect(events.some((e) => e.kind === 'internal_note')).toBe(false);
    expect(occurrences(text, seeded.noteId)).toBe(0);
    expect(occurrences(text, seeded.noteText)).toBe(0);
    const email = doc.tickets.find((t) => t.id === seeded.emailTicketId)!;
    expect(email.events.find((e) => e.id === seeded.agentReplyId)!.body).toBe('We are tracing the pallet now.');
  });

  test('the customer\'s file is listed once on its message with a link that serves its bytes; the note\'s file is not listed', async () => {
    const files = doc.tickets.flatMap((t) => t.events.flatMap((e) => e.attachments.map((a) => ({ ...a, event: e.id }))));
    expect(files.filter((f) => f.id === seeded.fileId)).toEqual([expect.objectContaining({ name: 'receipt.pdf', event: seeded.replyMessageId })]);
    expect(occurrences(text, seeded.noteFileId)).toBe(0);
    const link = files.find((f) => f.id === seeded.fileId)!.download_url;
    expect(link).toMatch(/^\/v1\/files\//);
    const got = await ctx.http.get(link).buffer(true).parse((r, cb) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => cb(null, Buffer.concat(chunks)));
    });
    expect(got.status).toBe(200);
    expect(Buffer.compare(got.body as Buffer, PDF)).toBe(0);
  });

  test('the CSAT answer, the channel deliveries and the transcript naming them are each there once', () => {
    expect(doc.csat.filter((c) => c.id === seeded.csatId)).toEqual([expect.objectContaining({ ticket_id: seeded.emailTicketId, score: 4, comment: 'Found in the end' })]);
    expect(doc.csat).toHaveLength(1);
    const ids = doc.intake.map((d) => d.provider_message_id);
    expect(doc.intake).toHaveLength(3);
    expect(ids.filter((id) => id === seeded.smsSid)).toHaveLength(1);
    // The email ledger keeps the Message-ID as normalised (no brackets, lower case).
    for (const m of seeded.emailProviderIds) expect(ids.filter((id) => id.toLowerCase().includes(m.toLowerCase().replace(/[<>]/g, '')))).toHaveLength(1);
    expect(doc.transcripts.filter((e) => e.id === seeded.transcriptEventId)).toEqual([expect.objectContaining({ external_ticket_id: seeded.externalTicketId, requester: seeded.email.toUpperCase() })]);
    expect(doc.transcripts).toHaveLength(1);
  });

  test('nothing of another customer of the workspace, or of the same address in another workspace, is in it', () => {
    const [, other] = workspaces;
    for (const id of [seeded.otherCustomerId, seeded.otherTicketId, seeded.otherCsatId, seeded.otherTranscriptEventId, seeded.otherEmail, seeded.foreignTicketId, seeded.foreignCustomerId, other.tenantId]) {
      expect([id, occurrences(text, id)]).toEqual([id, 0]);
    }
  });

  test('the request, each link issued, each download and the completion are in the audit log', async () => {
    const [ws] = workspaces;
    const rows = await ctx.db.selectFrom('audit_log').selectAll().where('tenant_id', '=', ws.tenantId).where(sql<boolean>`details->>'export_id' = ${view.id}`).execute();
    const count = (action: string) => rows.filter((r) => r.action === action).length;
    expect(count('customer.export_requested')).toBe(1);
    expect(count('customer.export_completed')).toBe(1);
    expect(count('customer.export_link_issued')).toBeGreaterThanOrEqual(1);
    expect(count('customer.export_downloaded')).toBe(1);
    const requested = rows.find((r) => r.action === 'customer.export_requested')!;
    expect(requested).toMatchObject({ actor_user_id: ws.ownerId, actor_api_key_id: ws.ownerKeyId, target_type: 'customer', target_id: seeded.customerId });

    const issued = count('customer.export_link_issued');
    await exportOf(ws, seeded.customerId, view.id).expect(200);
    await download((await exportOf(ws, seeded.customerId, view.id).expect(200)).body.download_url);
    const after = await ctx.db.selectFrom('audit_log').select('action').where('tenant_id', '=', ws.tenantId).where(sql<boolean>`details->>'export_id' = ${view.id}`).execute();
    expect(after.filter((r) => r.action === 'customer.export_link_issued')).toHaveLength(issued + 2);
    expect(after.filter((r) => r.action === 'customer.export_downloaded')).toHaveLength(2);
  });

  test('a second run of a done export does nothing', async () => {
    const [ws] = workspaces;
    const before = await ctx.db.selectFrom('customer_jobs').selectAll().where('tenant_id', '=', ws.tenantId).where('id', '=', view.id).executeTakeFirstOrThrow();
    const again = await ctx.workerServices.customerExports.run(ws.tenantId, view.id, { attempt: 1, last: true });
    expect(again).toEqual({ skipped: 'done' });
    const after = await ctx.db.selectFrom('customer_jobs').selectAll().where('tenant_id', '=', ws.tenantId).where('id', '=', view.id).executeTakeFirstOrThrow();
    expect(after).toEqual(before);
  });

  test('the files orphan sweep keeps an export\'s file however old it is', async () => {
    const [ws] = workspaces;
    const row = await ctx.db.selectFrom('customer_jobs').select('file_key').where('tenant_id', '=', ws.tenantId).where('id', '=', view.id).executeTakeFirstOrThrow();
    const path = join(ctx.config.FILES_DIR, ...row.file_key!.split('/'));
    const twoHoursAgo = (Date.now() - 2 * 3600_000) / 1000;
    utimesSync(path, twoHoursAgo, twoHoursAgo);
    await ctx.runtime.redis.del(`${ctx.config.REDIS_PREFIX}:files:orphan-cursor`);
    const swept = await ctx.services.files.sweepOrphans();
    expect(swept.wrapped).toBe(true);
    expect(existsSync(path)).toBe(true);
    await download((await exportOf(ws, seeded.customerId, view.id).expect(200)).body.download_url);
  });

  test('a link is refused once it expires, and after the export expires every link is refused and the sweep deletes the file', async () => {
    const [ws] = workspaces;
    // A link signed with an expiry already past (as one issued before would be by then).
    const stale = ctx.services.customerExports.signDownload(ws.tenantId, view.id, new Date(Date.now() - 1000));
    const refused = await ctx.http.get(`/v1/customer-exports/${stale}`);
    expect(refused.status).toBe(404);
    expect(refused.body.code).toBe('file_link_invalid');
    // An altered link.
    const live = (await exportOf(ws, seeded.customerId, view.id).expect(200)).body.download_url as string;
    expect((await ctx.http.get(`${live.slice(0, -2)}AA`)).status).toBe(404);

    // The export expires: the link issued while it was live is refused, a read shows no link, the sweep deletes the file.
    await ctx.db.updateTable('customer_jobs').set({ expires_at: new Date(Date.now() - 1000) }).where('tenant_id', '=', ws.tenantId).where('id', '=', view.id).execute();
    expect((await ctx.http.get(live)).status).toBe(404);
    expect((await exportOf(ws, seeded.customerId, view.id).expect(200)).body).toMatchObject({ state: 'done', download_url: null });
    const key = (await ctx.db.selectFrom('customer_jobs').select('file_key').where('id', '=', view.id).executeTakeFirstOrThrow()).file_key!;
    const swept = await ctx.workerServices.customerExports.sweep();
    expect(swept.expired).toBeGreaterThanOrEqual(1);
    expect((await ctx.db.selectFrom('customer_jobs').select('file_key').where('id', '=', view.id).executeTakeFirstOrThrow()).file_key).toBeNull();
    expect(await ctx.services.files.blobs.get(key)).toBeUndefined();
  });
});

describe('who may ask, and for whom', () => {
  test('a member below admin is refused 403, and nothing is queued', async () => {
    const [ws] = workspaces;
    const exports = async () => (await ctx.db.selectFrom('customer_jobs').select('id').where('tenant_id', '=', ws.tenantId).execute()).length;
    const before = await exports();
    for (const role of ['editor', 'viewer'] as const) {
      const m = await addMember(ctx, ws, role);
      const res = await ctx.http.post(`/v1/customers/${seeded.customerId}/export`).set(bearer(m.token)).send({});
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('insufficient_role');
    }
    expect(await exports()).toBe(before);
    const admin = await addMember(ctx, ws, 'admin');
    const res = await ctx.http.post(`/v1/customers/${seeded.customerId}/export`).set(bearer(admin.token)).send({});
    expect(res.status).toBe(202);
    const editor = await addMember(ctx, ws, 'editor');
    expect((await ctx.http.get(`/v1/customers/${seeded.customerId}/exports/${res.body.id}`).set(bearer(editor.token))).status).toBe(403);
  });

  test('a repeat POST with the same Idempotency-Key answers the first export and queues no second job', async () => {
    const [ws] = workspaces;
    const key = `dsar-${hex(6)}`;
    const first = await ctx.http.post(`/v1/customers/${seeded.customerId}/export`).set(bearer(ws.ownerKey)).set('Idempotency-Key', key).send({ reason: 'twice' });
    expect(first.status).toBe(202);
    const second = await ctx.http.post(`/v1/customers/${seeded.customerId}/export`).set(bearer(ws.ownerKey)).set('Idempotency-Key', key).send({ reason: 'twice' });
    expect(second.status).toBe(202);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body.id).toBe(first.body.id);
    const rows = await ctx.db.selectFrom('customer_jobs').select('id').where('tenant_id', '=', ws.tenantId).where('reason', '=', 'twice').execute();
    expect(rows).toHaveLength(1);
    const jobs = await ctx.runtime.queues.queue('maintenance').getJobs(['waiting', 'active', 'delayed', 'completed', 'failed']);
    expect(jobs.filter((j) => j.name === 'customers.export' && (j.data as { export_id: string }).export_id === first.body.id)).toHaveLength(1);
    // Queued again by id (what the sweep does for a lost enqueue), it is still one job.
    await ctx.runtime.queues.enqueue('customers.export', { tenant_id: ws.tenantId, export_id: first.body.id });
    const again = await ctx.runtime.queues.queue('maintenance').getJobs(['waiting', 'active', 'delayed', 'completed', 'failed']);
    expect(again.filter((j) => j.name === 'customers.export' && (j.data as { export_id: string }).export_id === first.body.id)).toHaveLength(1);
  });

  test('an unknown customer and another workspace\'s customer are 404; a merged-away customer is 409 customer_merged naming the survivor', async () => {
    const [ws, other] = workspaces;
    const unknown = await ctx.http.post(`/v1/customers/0195a1c4-7d2e-7b31-9f0a-6c2d8e4b1a57/export`).set(bearer(ws.ownerKey)).send({});
    expect(unknown.status).toBe(404);
    expect(unknown.body.detail).toBe('No such customer.');
    expect((await ctx.http.post(`/v1/customers/${seeded.foreignCustomerId}/export`).set(bearer(ws.ownerKey)).send({})).status).toBe(404);
    const goneId = '0195a1c4-7d2e-7b31-9f0a-6c2d8e4b1a58';
    await ctx.db.insertInto('customer_merges').values({ tenant_id: ws.tenantId, id: goneId, merged_into_id: seeded.customerId }).execute();
    const merged = await ctx.http.post(`/v1/customers/${goneId}/export`).set(bearer(ws.ownerKey)).send({});
    expect(merged.status).toBe(409);
    expect(merged.body.code).toBe('customer_merged');
    expect(merged.body.detail).toContain(`merged into ${seeded.customerId}`);
    // Another workspace cannot read this workspace's export.
    const mine = await ctx.db.selectFrom('customer_jobs').select('id').where('tenant_id', '=', ws.tenantId).where('kind', '=', 'export').executeTakeFirstOrThrow();
    expect((await ctx.http.get(`/v1/customers/${seeded.customerId}/exports/${mine.id}`).set(bearer(other.ownerKey))).status).toBe(404);
  });

  test('an export whose customer is gone by the time the job runs fails, saying why, and its next run does nothing', async () => {
    const [ws] = workspaces;
    // A request whose customer was merged away (deleted) before its job ran.
    const id = '0195a1c4-7d2e-7b31-9f0a-6c2d8e4b1a59';
    await ctx.db.insertInto('customer_jobs').values({ tenant_id: ws.tenantId, id, customer_id: '0195a1c4-7d2e-7b31-9f0a-6c2d8e4b1a60', kind: 'export' }).execute();
    const run = await ctx.workerServices.customerExports.run(ws.tenantId, id, { attempt: 1, last: false });
    expect(run).toEqual({ state: 'failed', error: 'the customer no longer exists (deleted or merged away since the request)' });
    const row = await ctx.db.selectFrom('customer_jobs').selectAll().where('tenant_id', '=', ws.tenantId).where('id', '=', id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ state: 'failed', file_key: null, error: run.error });
    expect(row.completed_at).not.toBeNull();
    expect(await ctx.workerServices.customerExports.run(ws.tenantId, id, { attempt: 2, last: true })).toEqual({ skipped: 'failed' });
  });
});
