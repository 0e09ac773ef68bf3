/**
 * Web chat files (issue 34): a visitor uploads files with their visitor token (POST /v1/web-chat/uploads, the
 * agents' upload machinery), names the tokens in their message (bound to its event exactly once, by the ingest
 * worker), sees each message's files in their conversation (pages and the stream) and downloads the files of
 * the messages they read (their own, agents' replies), never a note's, another visitor's or another
 * workspace's. Agents see the visitor's files on the timeline like any other message's.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { bearer, type Workspace } from './helpers/factories';
import { connect } from './helpers/ingest';
import { useTestApp } from './helpers/use-test-app';
import { connectSse } from './helpers/sse';
import { eventually } from './helpers/wait';

const MAX = 256 * 1024;

const { ctx, workspaces: [a, b] } = useTestApp({ env: { FILES_MAX_BYTES: String(MAX), EVENT_STREAM_POLL_MS: '50' }, workers: true, workspaces: 2, timeout: 60_000 });
let tokenA: string;
let tokenB: string;

beforeAll(async () => {
  tokenA = (await connect(ctx, a, 'web_chat')).details.inbound_token!;
  tokenB = (await connect(ctx, b, 'web_chat')).details.inbound_token!;
}, 60_000);

// ------------------------------------------------------------------------------------------------ helpers

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const PDF = Buffer.concat([Buffer.from('%PDF-1.7\n%âãÏÓ\n1 0 obj\n<< /Type /Catalog >>\nendobj\n'), randomBytes(30_000), Buffer.from('\n%%EOF\n')]);
/** A 1×1 PNG. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');
const q = encodeURIComponent;

interface Session {
  visitor_id: string;
  visitor_token: string;
}
interface VisitorFile {
  id: string;
  name: string;
  content_type: string;
  size: number;
  state: string;
}
interface Upload {
  upload_token: string;
  attachment: VisitorFile;
  expires_at: string;
}
interface Message {
  id: string;
  author: 'visitor' | 'agent';
  text: string;
  message_id?: string;
  attachments?: VisitorFile[];
}

async function openSession(inboundToken: string): Promise<Session> {
  const res = await ctx.http.post(`/v1/web-chat/sessions?token=${q(inboundToken)}`).send({});
  if (res.status !== 201) throw new Error(`session: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Session;
}

const upload = (s: Session, bytes: Buffer, filename: string) =>
  ctx.http.post('/v1/web-chat/uploads').set(bearer(s.visitor_token)).attach('file', bytes, { filename, contentType: 'application/octet-stream' });

async function uploaded(s: Session, bytes: Buffer, filename: string): Promise<Upload> {
  const res = await upload(s, bytes, filename);
  if (res.status !== 201) throw new Error(`upload: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Upload;
}

const post = (s: Session, body: Record<string, unknown>) => ctx.http.post('/v1/web-chat/messages').set(bearer(s.visitor_token)).send({ message_id: `m_${randomBytes(5).toString('hex')}`, ...body });

async function conversation(s: Session): Promise<Message[]> {
  const res = await ctx.http.get('/v1/web-chat/messages').set(bearer(s.visitor_token));
  if (res.status !== 200) throw new Error(`read: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.messages as Message[];
}

/** supertest's parser for any body as bytes. */
function binary(res: NodeJS.ReadableStream, done: (err: Error | null, body: Buffer) => void) {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => done(null, Buffer.concat(chunks)));
}

const visitorDownload = (s: Session | null, id: string, o: { range?: string; query?: string } = {}) => {
  let req = ctx.http.get(`/v1/web-chat/attachments/${id}/content${o.query ?? ''}`);
  if (s) req = req.set(bearer(s.visitor_token));
  if (o.range) req = req.set('Range', o.range);
  return req.buffer(true).parse(binary as never);
};
const agentDownload = (ws: Workspace, id: string) => ctx.http.get(`/v1/attachments/${id}/content`).set(bearer(ws.ownerKey)).buffer(true).parse(binary as never);

async function ticketOf(ws: Workspace, visitorId: string): Promise<string> {
  const { rows } = await sql<{ id: string }>`select id from tickets where tenant_id = ${ws.tenantId} and conversation_key = ${visitorId} order by created_at desc limit 1`.execute(ctx.db);
  return rows[0]!.id;
}

async function timeline(ws: Workspace, ticketId: string) {
  return (await ctx.http.get(`/v1/tickets/${ticketId}`).set(bearer(ws.ownerKey)).expect(200)).body.events as { id: string; kind: string; body: string; attachments?: (VisitorFile & { sha256: string })[] }[];
}

/** An agent's upload named in a reply (or a note) on the ticket: the file's id. */
async function agentFile(ws: Workspace, ticketId: string, kind: 'replies' | 'notes', bytes: Buffer, filename: string): Promise<string> {
  const up = await ctx.http.post('/v1/uploads').set(bearer(ws.ownerKey)).attach('file', bytes, filename).expect(201);
  await ctx.http.post(`/v1/tickets/${ticketId}/${kind}`).set(bearer(ws.ownerKey)).send({ body: `See ${filename}`, attachments: [up.body.upload_token] }).expect(201);
  return up.body.attachment.id as string;
}

async function counts(ws: Workspace) {
  const { rows } = await sql<{ events: number; deliveries: number; bound: number; tickets: number }>`
    select (select count(*)::int from ticket_events where tenant_id = ${ws.tenantId}) as events,
           (select count(*)::int from ingest_deliveries where tenant_id = ${ws.tenantId}) as deliveries,
           (select count(*)::int from attachments where tenant_id = ${ws.tenantId} and event_id is not null) as bound,
           (select count(*)::int from tickets where tenant_id = ${ws.tenantId}) as tickets`.execute(ctx.db);
  return rows[0]!;
}

async function uploadRow(ws: Workspace, id: string) {
  const { rows } = await sql<{ event_id: string | null; ticket_id: string | null; uploaded_by: string | null; uploaded_by_visitor: string | null; upload_token_hash: string | null }>`
    select event_id, ticket_id, uploaded_by, uploaded_by_visitor, upload_token_hash from attachments where tenant_id = ${ws.tenantId} and id = ${id}`.execute(ctx.db);
  return rows[0];
}

/** The objects the disk store holds for a workspace. */
function objectsOf(ws: Workspace): number {
  try {
    return readdirSync(join(ctx.config.FILES_DIR, 't', ws.tenantId)).length;
  } catch {
    return 0;
  }
}

// ------------------------------------------------------------------------------------------------ tests

describe('a visitor sends files', () => {
  test('a visitor uploads two files and sends them: agents see them on the message event and download the same bytes', async () => {
    const s = await openSession(tokenA);
    const pdf = await uploaded(s, PDF, 'receipt 1234.pdf');
    const png = await uploaded(s, PNG, '../../photo.png');
    expect(pdf.upload_token).toMatch(/^upl_[A-Za-z0-9_-]{43}$/);
    expect(pdf.attachment).toEqual({ id: expect.any(String), name: 'receipt 1234.pdf', content_type: 'application/pdf', size: PDF.length, state: 'stored' });
    expect(png.attachment).toMatchObject({ name: 'photo.png', content_type: 'image/png', size: PNG.length });
    // The upload is the visitor's: no member is its uploader.
    expect(await uploadRow(a, pdf.attachment.id)).toMatchObject({ uploaded_by: null, uploaded_by_visitor: s.visitor_id, event_id: null });

    const res = await post(s, { message_id: 'm_files', text: 'My receipt and the damage', attachments: [pdf.upload_token, png.upload_token] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ was_created: true, was_duplicate: false });

    const ticketId = await ticketOf(a, s.visitor_id);
    const event = (await timeline(a, ticketId)).find((e) => e.kind === 'inbound_web_chat')!;
    expect(event.body).toBe('My receipt and the damage');
    expect(event.attachments!.map((f) => [f.id, f.name, f.sha256, f.state])).toEqual([
      [pdf.attachment.id, 'receipt 1234.pdf', sha(PDF), 'stored'],
      [png.attachment.id, 'photo.png', sha(PNG), 'stored'],
    ]);
    const got = await agentDownload(a, pdf.attachment.id);
    expect(got.status).toBe(200);
    expect(sha(got.body as Buffer)).toBe(sha(PDF));
    // The token is spent: binding cleared its hash.
    expect((await uploadRow(a, pdf.attachment.id))!.upload_token_hash).toBeNull();

    // The visitor's own view lists the files on their message.
    const [mine] = await conversation(s);
    expect(mine).toMatchObject({ author: 'visitor', message_id: 'm_files' });
    expect(mine!.attachments).toEqual([pdf.attachment, png.attachment]);
  });

  test('a message of files alone: text may be left out, the ticket is named by the files', async () => {
    const s = await openSession(tokenA);
    const up = await uploaded(s, PNG, 'screenshot.png');
    expect((await post(s, { attachments: [] })).status).toBe(400);
    const res = await post(s, { attachments: [up.upload_token] });
    expect(res.status).toBe(200);
    const ticketId = await ticketOf(a, s.visitor_id);
    const detail = (await ctx.http.get(`/v1/tickets/${ticketId}`).set(bearer(a.ownerKey)).expect(200)).body;
    expect(detail.subject).toBe('[file: screenshot.png]');
    expect((await conversation(s))[0]).toMatchObject({ text: '', attachments: [up.attachment] });
  });

  test('the live conversation lists each message\'s files in its frame', async () => {
    const s = await openSession(tokenA);
    const up = await uploaded(s, PDF, 'invoice.pdf');
    const { port } = ctx.server.address() as AddressInfo;
    const c = connectSse(`http://127.0.0.1:${port}`, s.visitor_token, { path: '/v1/web-chat/messages' });
    try {
      await eventually(async () => (c.status() === 200 ? true : undefined), 5000, 'the stream opened');
      await post(s, { text: 'the invoice', attachments: [up.upload_token] }).expect(200);
      const frame = await eventually(async () => c.events().find((e) => e.event === 'message'), 10_000, 'the message frame');
      expect((JSON.parse(frame.data!) as Message).attachments).toEqual([up.attachment]);
    } finally {
      c.close();
    }
  });
});

describe('exactly once', () => {
  test('a redelivery of the same message_id binds nothing twice and is not refused for the tokens the first delivery spent', async () => {
    const s = await openSession(tokenA);
    const one = await uploaded(s, PDF, 'one.pdf');
    const two = await uploaded(s, PNG, 'two.png');
    const body = { message_id: 'm_retry', text: 'two files', attachments: [one.upload_token, two.upload_token] };
    // Two copies at once (a widget retrying while the first is still on its way), then a late retry.
    const [x, y] = await Promise.all([post(s, body), post(s, body)]);
    expect([x.status, y.status]).toEqual([200, 200]);
    expect([x.body.was_duplicate, y.body.was_duplicate].sort()).toEqual([false, true]);
    const before = await counts(a);
    const again = await post(s, body);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ was_duplicate: true });
    // A retry naming a fresh upload binds that one to nothing either: the message was written once.
    const fresh = await uploaded(s, PNG, 'three.png');
    expect((await post(s, { ...body, attachments: [fresh.upload_token] })).body).toMatchObject({ was_duplicate: true });
    expect(await uploadRow(a, fresh.attachment.id)).toMatchObject({ event_id: null, ticket_id: null });

    expect(await counts(a)).toMatchObject({ events: before.events, bound: before.bound });
    const ticketId = await ticketOf(a, s.visitor_id);
    const events = (await timeline(a, ticketId)).filter((e) => e.kind === 'inbound_web_chat');
    expect(events).toHaveLength(1);
    expect(events[0]!.attachments!.map((f) => f.id)).toEqual([one.attachment.id, two.attachment.id]);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from attachments where tenant_id = ${a.tenantId} and event_id = ${events[0]!.id}`.execute(ctx.db);
    expect(rows[0]!.n).toBe(2);
  });
});

describe('one upload, one message', () => {
  test('two different messages naming the same upload at once: one binds it, the other is 422 with nothing written', async () => {
    const s = await openSession(tokenA);
    const up = await uploaded(s, PDF, 'contested.pdf');
    const before = await counts(a);
    const [x, y] = await Promise.all([post(s, { text: 'first', attachments: [up.upload_token] }), post(s, { text: 'second', attachments: [up.upload_token] })]);
    expect([x.status, y.status].sort()).toEqual([200, 422]);
    expect([x, y].find((r) => r.status === 422)!.body.code).toBe('upload_token_invalid');
    const after = await counts(a);
    expect(after.bound - before.bound).toBe(1);
    expect(after.deliveries - before.deliveries).toBe(1);
    const messages = await conversation(s);
    expect(messages).toHaveLength(1);
    expect(messages[0]!.attachments!.map((f) => f.id)).toEqual([up.attachment.id]);
  });
});

describe('whose files', () => {
  test('visitor A\'s token used by visitor B is 422 naming the position, and nothing is written', async () => {
    const visitorA = await openSession(tokenA);
    const visitorB = await openSession(tokenA);
    const mine = await uploaded(visitorB, PNG, 'mine.png');
    const theirs = await uploaded(visitorA, PDF, 'theirs.pdf');
    const before = await counts(a);
    const res = await post(visitorB, { text: 'look', attachments: [mine.upload_token, theirs.upload_token] });
    expect(res.status).toBe(422);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('upload_token_invalid');
    expect(res.body.detail).toContain('attachments[1]');
    expect(res.body.errors).toEqual([{ path: 'body.attachments.1', message: expect.stringContaining("not this visitor's upload") }]);
    expect(await counts(a)).toEqual(before);
    // Both uploads are still unused, and still their own uploader's to send.
    expect(await uploadRow(a, mine.attachment.id)).toMatchObject({ event_id: null });
    expect(await uploadRow(a, theirs.attachment.id)).toMatchObject({ event_id: null });
    expect((await post(visitorA, { text: 'mine after all', attachments: [theirs.upload_token] })).status).toBe(200);
    // A token already used, or one that never was, is the same refusal.
    expect((await post(visitorB, { text: 'again', attachments: [theirs.upload_token] })).body.code).toBe('upload_token_invalid');
    expect((await post(visitorB, { text: 'made up', attachments: ['upl_not-a-token'] })).status).toBe(422);
    // Neither can an agent name a visitor's upload, nor a visitor an agent's.
    const agentUpload = await ctx.http.post('/v1/uploads').set(bearer(a.ownerKey)).attach('file', PNG, 'agent.png').expect(201);
    expect((await post(visitorB, { text: 'agent file', attachments: [agentUpload.body.upload_token] })).status).toBe(422);
    const ticketId = await ticketOf(a, visitorA.visitor_id);
    const spare = await uploaded(visitorB, PNG, 'spare.png');
    const reply = await ctx.http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(a.ownerKey)).send({ body: 'x', attachments: [spare.upload_token] });
    expect(reply.status).toBe(422);
    expect(reply.body.code).toBe('upload_token_invalid');
  });

  test('another visitor cannot read a visitor\'s file: 404, as an unknown id', async () => {
    const owner = await openSession(tokenA);
    const other = await openSession(tokenA);
    const up = await uploaded(owner, PDF, 'private.pdf');
    // Before it is sent, an upload is downloadable by nobody through the visitor route.
    expect((await visitorDownload(owner, up.attachment.id)).status).toBe(404);
    await post(owner, { text: 'private', attachments: [up.upload_token] }).expect(200);
    expect((await visitorDownload(owner, up.attachment.id)).status).toBe(200);
    const res = await visitorDownload(other, up.attachment.id);
    expect(res.status).toBe(404);
    expect(res.body.toString()).toContain('not_found');
    expect((await visitorDownload(other, randomUUID())).status).toBe(404);
    expect((await conversation(other))).toEqual([]);
  });

  test('another workspace\'s visitor, and another workspace\'s agent, get 404', async () => {
    const s = await openSession(tokenA);
    const up = await uploaded(s, PNG, 'a.png');
    await post(s, { text: 'in workspace A', attachments: [up.upload_token] }).expect(200);
    const elsewhere = await openSession(tokenB);
    expect((await visitorDownload(elsewhere, up.attachment.id)).status).toBe(404);
    expect((await agentDownload(b, up.attachment.id)).status).toBe(404);
    // Nor can a visitor of B send A's visitor's token.
    const unused = await uploaded(s, PNG, 'b.png');
    expect((await post(elsewhere, { text: 'x', attachments: [unused.upload_token] })).status).toBe(422);
  });
});

describe('the visitor downloads', () => {
  test('the visitor downloads their own file and an agent reply\'s file, with Range, headers as agents\' downloads', async () => {
    const s = await openSession(tokenA);
    const up = await uploaded(s, PDF, 'order.pdf');
    await post(s, { text: 'my order', attachments: [up.upload_token] }).expect(200);
    const ticketId = await ticketOf(a, s.visitor_id);
    const replyBytes = Buffer.concat([Buffer.from('%PDF-1.4\n'), randomBytes(5000)]);
    const replyFile = await agentFile(a, ticketId, 'replies', replyBytes, 'label.pdf');

    const whole = await visitorDownload(s, up.attachment.id);
    expect(whole.status).toBe(200);
    expect(sha(whole.body as Buffer)).toBe(sha(PDF));
    expect(whole.headers).toMatchObject({
      'content-type': 'application/pdf',
      'x-content-type-options': 'nosniff',
      'accept-ranges': 'bytes',
      'content-length': String(PDF.length),
    });
    expect(whole.headers['content-disposition']).toMatch(/^attachment; filename="order\.pdf"/);
    expect(whole.headers['content-security-policy']).toMatch(/^sandbox/);

    const part = await visitorDownload(s, replyFile, { range: 'bytes=100-199' });
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 100-199/${replyBytes.length}`);
    expect((part.body as Buffer).equals(replyBytes.subarray(100, 200))).toBe(true);
    expect((await visitorDownload(s, replyFile, { range: `bytes=${replyBytes.length + 10}-` })).status).toBe(416);

    // The reply lists its file in the visitor's conversation.
    const messages = await conversation(s);
    expect(messages.find((m) => m.author === 'agent')!.attachments).toEqual([{ id: replyFile, name: 'label.pdf', content_type: 'application/pdf', size: replyBytes.length, state: 'stored' }]);

    // A link works: the token in the URL, and it is not logged.
    ctx.logs.clear();
    const linked = await visitorDownload(null, replyFile, { query: `?visitor_token=${q(s.visitor_token)}` });
    expect(linked.status).toBe(200);
    expect(sha(linked.body as Buffer)).toBe(sha(replyBytes));
    expect(ctx.logs.text).not.toContain(s.visitor_token);
    expect((await visitorDownload(null, replyFile)).status).toBe(401);
  });

  test('an internal note\'s file is 404 to the visitor, and the note is not listed', async () => {
    const s = await openSession(tokenA);
    await post(s, { text: 'hello' }).expect(200);
    const ticketId = await ticketOf(a, s.visitor_id);
    const noteFile = await agentFile(a, ticketId, 'notes', PNG, 'internal.png');
    expect((await agentDownload(a, noteFile)).status).toBe(200);
    expect((await visitorDownload(s, noteFile)).status).toBe(404);
    expect((await visitorDownload(null, noteFile, { query: `?visitor_token=${q(s.visitor_token)}` })).status).toBe(404);
    expect(JSON.stringify(await conversation(s))).not.toContain(noteFile);
  });
});

describe('what an upload must be', () => {
  test('a file over FILES_MAX_BYTES is 413 and nothing is stored', async () => {
    const s = await openSession(tokenA);
    const rows = async () => (await sql<{ n: number }>`select count(*)::int as n from attachments where tenant_id = ${a.tenantId}`.execute(ctx.db)).rows[0]!.n;
    const beforeRows = await rows();
    const beforeObjects = objectsOf(a);
    const res = await upload(s, randomBytes(MAX + 1), 'big.bin');
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('file_too_large');
    expect(await rows()).toBe(beforeRows);
    expect(objectsOf(a)).toBe(beforeObjects);
  });

  test('the visitor token is checked as for messages; a compressed body and a form without file are refused', async () => {
    const s = await openSession(tokenA);
    const none = await ctx.http.post('/v1/web-chat/uploads').attach('file', PNG, 'x.png');
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('visitor_token_invalid');
    expect(none.headers['www-authenticate']).toMatch(/realm="web-chat"/);
    expect((await ctx.http.post('/v1/web-chat/uploads').set(bearer(`${s.visitor_token}x`)).attach('file', PNG, 'x.png')).body.code).toBe('visitor_token_invalid');
    const gz = await ctx.http.post('/v1/web-chat/uploads').set(bearer(s.visitor_token)).set('Content-Encoding', 'gzip').attach('file', PNG, 'x.png');
    expect(gz.status).toBe(415);
    const json = await ctx.http.post('/v1/web-chat/uploads').set(bearer(s.visitor_token)).send({ file: 'x' });
    expect(json.status).toBe(415);
    const noFile = await ctx.http.post('/v1/web-chat/uploads').set(bearer(s.visitor_token)).field('name', 'x');
    expect(noFile.status).toBe(400);
    expect(noFile.body.errors).toEqual([expect.objectContaining({ path: 'body.file' })]);
    // ?token= of another connection is the visitor token's refusal, as on the message routes.
    expect((await ctx.http.post(`/v1/web-chat/uploads?token=${q(tokenB)}`).set(bearer(s.visitor_token)).attach('file', PNG, 'x.png')).status).toBe(401);
  });
});

