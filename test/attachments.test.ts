/**
 * Attachments (issue 34): agents upload files (POST /v1/uploads, multipart, streamed into the file store) and
 * name their tokens in replies and notes; the timeline lists each event's files; downloads stream the bytes as
 * attachments (never rendered: sniffed types, nosniff, sandbox), with ranges, within the workspace and the
 * ticket's reach. Names are sanitised, types sniffed, sizes and the workspace quota enforced (the quota's event
 * once), unused uploads swept, and the orphan sweep repairs objects without rows and rows without bytes. A
 * customer's file arrives through `storeInbound` (the intake worker's call) and shows its state on its event.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { sanitizeFileName } from '../src/domains/files/names';
import { sniffContentType } from '../src/domains/files/sniff';
import { startTestApp, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { connect } from './helpers/ingest';
import { createTicket } from './helpers/tickets';
import { eventually } from './helpers/wait';
import { startS3, type TestS3 } from './helpers/s3';
import { useTestApp } from './helpers/use-test-app';

const MAX = 1024 * 1024;

let ctx: TestContext;
let ws: Workspace;
let other: Workspace;

beforeAll(async () => {
  ctx = await startTestApp({ env: { FILES_MAX_BYTES: String(MAX) } });
  ws = await createWorkspace(ctx);
  other = await createWorkspace(ctx);
}, 60_000);
afterAll(async () => {
  await ctx?.close();
});

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const PDF = Buffer.concat([Buffer.from('%PDF-1.7\n%âãÏÓ\n1 0 obj\n<< /Type /Catalog >>\nendobj\n'), randomBytes(20_000), Buffer.from('\n%%EOF\n')]);
/** A 1×1 PNG. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');

interface Uploaded {
  upload_token: string;
  attachment: { id: string; name: string; content_type: string; size: number; sha256: string; state: string; reason: string | null; content_id: string | null; created_at: string };
  expires_at: string;
}

function upload(key: string, bytes: Buffer, filename: string, contentType = 'application/octet-stream') {
  return ctx.http.post('/v1/uploads').set(bearer(key)).attach('file', bytes, { filename, contentType });
}
async function uploaded(key: string, bytes: Buffer, filename: string, contentType?: string): Promise<Uploaded> {
  const res = await upload(key, bytes, filename, contentType);
  if (res.status !== 201) throw new Error(`upload: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Uploaded;
}
const reply = (key: string, ticketId: string, body: Record<string, unknown>) => ctx.http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(key)).send(body);
const note = (key: string, ticketId: string, body: Record<string, unknown>) => ctx.http.post(`/v1/tickets/${ticketId}/notes`).set(bearer(key)).send(body);
const content = (key: string, id: string) => ctx.http.get(`/v1/attachments/${id}/content`).set(bearer(key)).buffer(true).parse(binary as never);
const timeline = async (key: string, ticketId: string) => (await ctx.http.get(`/v1/tickets/${ticketId}`).set(bearer(key)).expect(200)).body.events as { id: string; kind: string; attachments?: unknown[] }[];

/** supertest's parser for any body as bytes. */
function binary(res: NodeJS.ReadableStream & { setEncoding?: unknown }, done: (err: Error | null, body: Buffer) => void) {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => done(null, Buffer.concat(chunks)));
}

async function uploadRows(tenantId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from attachments where tenant_id = ${tenantId}`.execute(ctx.db);
  return rows[0]!.n;
}

// ------------------------------------------------------------------------------------------------ uploads

describe('uploads', () => {
  test('a file streams in: 201 with its token, the file as stored (sniffed type, size, sha256) and the hour it is good for', async () => {
    const res = await upload(ws.ownerKey, PDF, 'Rechnung 10482.pdf', 'image/jpeg');
    expect(res.status).toBe(201);
    const body = res.body as Uploaded;
    expect(body.upload_token).toMatch(/^upl_[A-Za-z0-9_-]{43}$/);
    expect(body.attachment).toMatchObject({ name: 'Rechnung 10482.pdf', content_type: 'application/pdf', size: PDF.length, sha256: sha(PDF), state: 'stored', reason: null, content_id: null });
    const ttl = new Date(body.expires_at).getTime() - Date.now();
    expect(ttl).toBeGreaterThan(3600_000 - 60_000);
    expect(ttl).toBeLessThanOrEqual(3600_000);
    // Only the token's hash is kept.
    const { rows } = await sql<{ upload_token_hash: string }>`select upload_token_hash from attachments where tenant_id = ${ws.tenantId} and id = ${body.attachment.id}`.execute(ctx.db);
    expect(rows[0]!.upload_token_hash).toBe(sha(Buffer.from(body.upload_token)));
    expect(JSON.stringify(rows)).not.toContain(body.upload_token);
  });

  test('an upload not yet used is its uploader\'s alone: another member and another workspace get 404', async () => {
    const up = await uploaded(ws.ownerKey, PNG, 'screenshot.png');
    const meta = await ctx.http.get(`/v1/attachments/${up.attachment.id}`).set(bearer(ws.ownerKey)).expect(200);
    expect(meta.body).toMatchObject({ id: up.attachment.id, ticket_id: null, event_id: null, internal: false, content_type: 'image/png' });
    const editor = await addMember(ctx, ws, 'editor');
    expect((await ctx.http.get(`/v1/attachments/${up.attachment.id}`).set(bearer(editor.token))).status).toBe(404);
    expect((await ctx.http.get(`/v1/attachments/${up.attachment.id}`).set(bearer(other.ownerKey))).status).toBe(404);
    expect((await content(other.ownerKey, up.attachment.id)).status).toBe(404);
  });

  test('what an upload must be: multipart with a part named file, no Content-Encoding, an editor with tickets:write', async () => {
    const json = await ctx.http.post('/v1/uploads').set(bearer(ws.ownerKey)).send({ file: 'x' });
    expect(json.status).toBe(415);
    expect(json.body.code).toBe('unsupported_media_type');
    const noFile = await ctx.http.post('/v1/uploads').set(bearer(ws.ownerKey)).field('name', 'x');
    expect(noFile.status).toBe(400);
    expect(noFile.body.errors).toEqual([expect.objectContaining({ path: 'body.file' })]);
    const noBoundary = await ctx.http.post('/v1/uploads').set(bearer(ws.ownerKey)).set('Content-Type', 'multipart/form-data').send('--x\r\n');
    expect(noBoundary.status).toBe(400);
    expect(noBoundary.headers['content-type']).toMatch(/^application\/problem\+json/);
    const gz = await ctx.http.post('/v1/uploads').set(bearer(ws.ownerKey)).set('Content-Encoding', 'gzip').attach('file', PDF, 'a.pdf');
    expect(gz.status).toBe(415);
    const viewer = await addMember(ctx, ws, 'viewer');
    expect((await ctx.http.post('/v1/uploads').set(bearer(viewer.token)).attach('file', PDF, 'a.pdf')).body.code).toBe('insufficient_role');
    const readOnly = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:read'] });
    expect((await ctx.http.post('/v1/uploads').set(bearer(readOnly.secret)).attach('file', PDF, 'a.pdf')).body.code).toBe('insufficient_scope');
    expect((await ctx.http.post('/v1/uploads').attach('file', PDF, 'a.pdf')).status).toBe(401);
  });

  test('an empty file and other parts beside it are fine', async () => {
    const res = await ctx.http.post('/v1/uploads').set(bearer(ws.ownerKey)).field('note', 'the log').attach('file', Buffer.alloc(0), 'empty.log').field('after', 'x');
    expect(res.status).toBe(201);
    expect(res.body.attachment).toMatchObject({ name: 'empty.log', size: 0, content_type: 'application/octet-stream', state: 'stored' });
  });
});

// ------------------------------------------------------------------------------------------------ replies and notes

describe('replies and notes name their uploads', () => {
  test('a reply binds its uploads in its transaction: the event lists them, the timeline too, the event log with it', async () => {
    const t = await createTicket(ctx, ws);
    const a = await uploaded(ws.ownerKey, PDF, 'invoice.pdf');
    const b = await uploaded(ws.ownerKey, PNG, 'photo.png');
    const res = await reply(ws.ownerKey, t.id, { body: 'Here is the corrected invoice.', attachments: [a.upload_token, b.upload_token] });
    expect(res.status).toBe(201);
    const event = res.body.new_events.find((e: { kind: string }) => e.kind === 'reply');
    const summary = (u: Uploaded) => ({ id: u.attachment.id, name: u.attachment.name, content_type: u.attachment.content_type, size: u.attachment.size, sha256: u.attachment.sha256, state: 'stored' });
    expect(event.attachments).toEqual([summary(a), summary(b)]);

    const events = await timeline(ws.ownerKey, t.id);
    expect(events.find((e) => e.id === event.id)!.attachments).toEqual([summary(a), summary(b)]);
    // Events without files carry no attachments field at all.
    expect(events.filter((e) => e.id !== event.id).every((e) => !('attachments' in e))).toBe(true);

    const meta = await ctx.http.get(`/v1/attachments/${a.attachment.id}`).set(bearer(ws.ownerKey)).expect(200);
    expect(meta.body).toMatchObject({ ticket_id: t.id, event_id: event.id, internal: false });
    // Bound to a ticket, the file is every member's to read, as the ticket is.
    const viewer = await addMember(ctx, ws, 'viewer');
    expect((await content(viewer.token, a.attachment.id)).status).toBe(200);

    const log = await ctx.http.get('/v1/events?types=message.created').set(bearer(ws.ownerKey)).expect(200);
    const created = (log.body.events as { data: { event: { id: string; attachments?: unknown[] } } }[]).find((e) => e.data.event.id === event.id);
    expect(created!.data.event.attachments).toEqual([summary(a), summary(b)]);
  });

  test('a note\'s files are internal', async () => {
    const t = await createTicket(ctx, ws);
    const a = await uploaded(ws.ownerKey, PNG, 'internal-screenshot.png');
    const res = await note(ws.ownerKey, t.id, { body: 'What the customer sees on their side.', attachments: [a.upload_token] });
    expect(res.status).toBe(201);
    expect(res.body.new_events[0].attachments).toEqual([expect.objectContaining({ id: a.attachment.id })]);
    expect((await ctx.http.get(`/v1/attachments/${a.attachment.id}`).set(bearer(ws.ownerKey))).body.internal).toBe(true);
  });

  test('merging keeps the files: they follow their events to the winner, whose timeline lists them, and they still download', async () => {
    const source = await createTicket(ctx, ws);
    const target = await createTicket(ctx, ws);
    const up = await uploaded(ws.ownerKey, PNG, 'receipt.png');
    expect((await reply(ws.ownerKey, source.id, { body: 'Your receipt.', attachments: [up.upload_token] })).status).toBe(201);
    const merged = await ctx.http.post(`/v1/tickets/${source.id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: target.id });
    expect(merged.status).toBe(200);
    const copied = (await timeline(ws.ownerKey, target.id)).find((e) => e.kind === 'reply');
    expect(copied?.attachments).toEqual([expect.objectContaining({ id: up.attachment.id, name: 'receipt.png', state: 'stored' })]);
    const meta = await ctx.http.get(`/v1/attachments/${up.attachment.id}`).set(bearer(ws.ownerKey)).expect(200);
    expect(meta.body).toMatchObject({ ticket_id: target.id, event_id: copied!.id });
    const dl = await content(ws.ownerKey, up.attachment.id);
    expect(dl.status).toBe(200);
    expect(dl.body).toEqual(PNG);
  });

  test('a token used, another user\'s, another workspace\'s, expired or unknown: 422 naming each, and nothing is written', async () => {
    const t = await createTicket(ctx, ws);
    const used = await uploaded(ws.ownerKey, PNG, 'a.png');
    await reply(ws.ownerKey, t.id, { body: 'first', attachments: [used.upload_token] }).expect(201);
    const editor = await addMember(ctx, ws, 'editor');
    const theirs = await uploaded(editor.token, PNG, 'theirs.png');
    const elsewhere = await uploaded(other.ownerKey, PNG, 'elsewhere.png');
    const expired = await uploaded(ws.ownerKey, PNG, 'old.png');
    await sql`update attachments set expires_at = now() - interval '1 minute' where tenant_id = ${ws.tenantId} and id = ${expired.attachment.id}`.execute(ctx.db);
    const good = await uploaded(ws.ownerKey, PDF, 'good.pdf');

    const before = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey));
    for (const [bad, why] of [
      [used.upload_token, /already used/],
      [theirs.upload_token, /another user/],
      [elsewhere.upload_token, /unknown/],
      [expired.upload_token, /expired/],
      ['upl_not-a-token', /unknown/],
    ] as const) {
      const res = await reply(ws.ownerKey, t.id, { body: 'second', attachments: [good.upload_token, bad] });
      expect(res.status).toBe(422);
      expect(res.body.code).toBe('upload_token_invalid');
      expect(res.body.detail).toContain('attachments[1]');
      expect(res.body.errors).toEqual([{ path: 'body.attachments.1', message: expect.stringMatching(why) }]);
    }
    const note422 = await note(ws.ownerKey, t.id, { body: 'n', attachments: [used.upload_token] });
    expect(note422.status).toBe(422);
    // Nothing was written: the same version, the same timeline, the good upload still unused.
    const after = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey));
    expect(after.headers.etag).toBe(before.headers.etag);
    expect(after.body.events).toHaveLength(before.body.events.length);
    expect((await ctx.http.get(`/v1/attachments/${good.attachment.id}`).set(bearer(ws.ownerKey))).body.ticket_id).toBeNull();
    // The editor's own token works for the editor.
    expect((await reply(editor.token, t.id, { body: 'mine', attachments: [theirs.upload_token, good.upload_token].slice(0, 1) })).status).toBe(201);
  });

  test('at most 20 tokens; the same token twice is one file', async () => {
    const t = await createTicket(ctx, ws);
    const many = Array.from({ length: 21 }, (_, i) => `upl_${i}`);
    const res = await reply(ws.ownerKey, t.id, { body: 'too many', attachments: many });
    expect(res.status).toBe(400);
    expect(res.body.errors[0].path).toBe('body.attachments');
    const a = await uploaded(ws.ownerKey, PNG, 'once.png');
    const twice = await reply(ws.ownerKey, t.id, { body: 'twice', attachments: [a.upload_token, a.upload_token] });
    expect(twice.status).toBe(201);
    expect(twice.body.new_events.find((e: { kind: string }) => e.kind === 'reply').attachments).toHaveLength(1);
  });
});

// ------------------------------------------------------------------------------------------------ downloads

describe('downloads', () => {
  let file: Uploaded;
  let ticketId: string;
  beforeAll(async () => {
    const t = await createTicket(ctx, ws);
    ticketId = t.id;
    file = await uploaded(ws.ownerKey, PDF, 'Rechnung März: final?.pdf');
    await reply(ws.ownerKey, t.id, { body: 'attached', attachments: [file.upload_token] }).expect(201);
  });

  test('the bytes, with the stored type, as an attachment, never sniffed or run', async () => {
    const res = await content(ws.ownerKey, file.attachment.id);
    expect(res.status).toBe(200);
    expect(sha(res.body)).toBe(sha(PDF));
    expect(res.headers['content-type']).toBe('application/pdf');
    expect(res.headers['content-length']).toBe(String(PDF.length));
    expect(res.headers['content-disposition']).toBe(`attachment; filename="Rechnung M_rz_ final_.pdf"; filename*=UTF-8''Rechnung%20M%C3%A4rz_%20final_.pdf`);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-security-policy']).toMatch(/^sandbox/);
    expect(res.headers['accept-ranges']).toBe('bytes');
    expect(res.headers.etag).toBe(`"${sha(PDF)}"`);
  });

  test('one range: 206 with Content-Range (first bytes, an open end, the last bytes); past the end 416', async () => {
    const id = file.attachment.id;
    const first = await content(ws.ownerKey, id).set('Range', 'bytes=0-9');
    expect(first.status).toBe(206);
    expect(first.headers['content-range']).toBe(`bytes 0-9/${PDF.length}`);
    expect(first.body.equals(PDF.subarray(0, 10))).toBe(true);
    const open = await content(ws.ownerKey, id).set('Range', `bytes=${PDF.length - 100}-`);
    expect(open.status).toBe(206);
    expect(open.body.equals(PDF.subarray(-100))).toBe(true);
    const suffix = await content(ws.ownerKey, id).set('Range', 'bytes=-7');
    expect(suffix.headers['content-range']).toBe(`bytes ${PDF.length - 7}-${PDF.length - 1}/${PDF.length}`);
    expect(suffix.body.equals(PDF.subarray(-7))).toBe(true);
    const clipped = await content(ws.ownerKey, id).set('Range', `bytes=10-${PDF.length * 2}`);
    expect(clipped.headers['content-range']).toBe(`bytes 10-${PDF.length - 1}/${PDF.length}`);

    const past = await ctx.http.get(`/v1/attachments/${id}/content`).set(bearer(ws.ownerKey)).set('Range', `bytes=${PDF.length}-`);
    expect(past.status).toBe(416);
    expect(past.body.code).toBe('range_not_satisfiable');
    expect(past.headers['content-range']).toBe(`bytes */${PDF.length}`);
    // Several ranges, an unreadable one, or an If-Range that is not the file's: the whole file.
    for (const [h, v] of [['Range', 'bytes=0-1,5-6'], ['Range', 'lines=1-2'], ['Range', 'bytes=9-2']] as const) {
      const whole = await content(ws.ownerKey, id).set(h, v);
      expect(whole.status).toBe(200);
      expect(whole.body.length).toBe(PDF.length);
    }
    const stale = await content(ws.ownerKey, id).set('Range', 'bytes=0-9').set('If-Range', '"not-it"');
    expect(stale.status).toBe(200);
    const current = await content(ws.ownerKey, id).set('Range', 'bytes=0-9').set('If-Range', `"${sha(PDF)}"`);
    expect(current.status).toBe(206);
  });

  test('another workspace\'s id, an unknown id and a malformed one: 404', async () => {
    for (const path of [`/v1/attachments/${file.attachment.id}`, `/v1/attachments/${file.attachment.id}/content`]) {
      const res = await ctx.http.get(path).set(bearer(other.ownerKey));
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect((await ctx.http.get('/v1/attachments/0195a3c1-7e42-7b8d-9c1f-5a2e4d6b8f01').set(bearer(ws.ownerKey))).status).toBe(404);
    expect((await ctx.http.get('/v1/attachments/nope/content').set(bearer(ws.ownerKey))).status).toBe(404);
    expect(ticketId).toBeDefined();
  });
});

// ------------------------------------------------------------------------------------------------ hostile files

describe('hostile files', () => {
  test('names are sanitised: paths, control characters, bidi overrides, leading dots, 255 bytes with the extension kept', async () => {
    expect(sanitizeFileName('../../etc/passwd')).toBe('passwd');
    expect(sanitizeFileName('C:\\Users\\x\\report.docx')).toBe('report.docx');
    expect(sanitizeFileName('invoice\u202Efdp.exe')).toBe('invoicefdp.exe');
    expect(sanitizeFileName('a\u2066b\u2069c\u200F.txt')).toBe('abc.txt');
    expect(sanitizeFileName('line\r\nbreak\u0000.txt')).toBe('linebreak.txt');
    expect(sanitizeFileName('..\u0007.htaccess')).toBe('htaccess');
    expect(sanitizeFileName('what?<>:|*.txt')).toBe('what______.txt');
    expect(sanitizeFileName('trailing dots...  ')).toBe('trailing dots');
    expect(sanitizeFileName('')).toBe('file');
    expect(sanitizeFileName('../')).toBe('file');
    const long = sanitizeFileName(`${'é'.repeat(300)}.pdf`);
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(255);
    expect(long.endsWith('.pdf')).toBe(true);
    const emoji = sanitizeFileName(`${'😀'.repeat(100)}.png`);
    expect(Buffer.byteLength(emoji)).toBeLessThanOrEqual(255);
    expect(emoji).toMatch(/^(😀)+\.png$/u);

    const res = await uploaded(ws.ownerKey, PNG, '../../\u202Egnp.exe');
    expect(res.attachment.name).toBe('gnp.exe');
    const dl = await content(ws.ownerKey, res.attachment.id);
    expect(dl.headers['content-disposition']).toBe(`attachment; filename="gnp.exe"; filename*=UTF-8''gnp.exe`);
  });

  test('types come from the bytes: HTML named .png is text/html and downloads as an opaque attachment with nosniff', async () => {
    const html = Buffer.from('<!DOCTYPE html><html><body><script>fetch("/v1/api-keys")</script></body></html>');
    const up = await uploaded(ws.ownerKey, html, 'invoice.png', 'image/png');
    expect(up.attachment.content_type).toBe('text/html');
    const dl = await content(ws.ownerKey, up.attachment.id);
    expect(dl.status).toBe(200);
    expect(dl.headers['content-type']).toBe('application/octet-stream');
    expect(dl.headers['content-disposition']).toMatch(/^attachment; filename="invoice.png"/);
    expect(dl.headers['x-content-type-options']).toBe('nosniff');
    expect(dl.headers['content-security-policy']).toMatch(/^sandbox/);
    expect(dl.body.equals(html)).toBe(true);

    const svg = await uploaded(ws.ownerKey, Buffer.from('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'), 'logo.jpg', 'image/jpeg');
    expect(svg.attachment.content_type).toBe('image/svg+xml');
    expect((await content(ws.ownerKey, svg.attachment.id)).headers['content-type']).toBe('application/octet-stream');

    const png = await uploaded(ws.ownerKey, PNG, 'notes.txt', 'text/plain');
    expect(png.attachment.content_type).toBe('image/png');
    const text = await uploaded(ws.ownerKey, Buffer.from('order,amount\n10482,99.00\n'), 'orders.csv', 'application/x-msdownload');
    expect(text.attachment.content_type).toBe('text/plain');
    expect((await content(ws.ownerKey, text.attachment.id)).headers['content-type']).toBe('text/plain; charset=utf-8');
    const noise = await uploaded(ws.ownerKey, Buffer.from([0, 1, 2, 3, 250, 251, 252, 0, 9]), 'x.pdf', 'application/pdf');
    expect(noise.attachment.content_type).toBe('application/octet-stream');
  });

  test('the sniffer: common binary formats by magic number, text and markup told apart', async () => {
    expect(await sniffContentType(Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1'))).toBe('image/gif');
    expect(await sniffContentType(Buffer.from('ffd8ffe000104a464946000101', 'hex'))).toBe('image/jpeg');
    expect(await sniffContentType(Buffer.from('504b0304140000000800', 'hex'))).toBe('application/zip');
    expect(await sniffContentType(Buffer.from('   <html lang="en">'))).toBe('text/html');
    expect(await sniffContentType(Buffer.from('Hello <b>there</b>, see <script>x</script>'))).toBe('text/html');
    expect(await sniffContentType(Buffer.from('\ufeffPlain text, ünïcödé.'))).toBe('text/plain');
    expect(await sniffContentType(Buffer.alloc(0))).toBe('application/octet-stream');
  });

  test(`a file over FILES_MAX_BYTES is refused with 413 file_too_large and nothing is kept`, async () => {
    const before = await uploadRows(ws.tenantId);
    const exact = await upload(ws.ownerKey, Buffer.alloc(MAX, 1), 'exact.bin');
    expect(exact.status).toBe(201);
    expect(exact.body.attachment.size).toBe(MAX);
    const over = await upload(ws.ownerKey, Buffer.alloc(MAX + 1, 1), 'over.bin');
    expect(over.status).toBe(413);
    expect(over.body.code).toBe('file_too_large');
    expect(over.body.detail).toContain(String(MAX));
    expect(await uploadRows(ws.tenantId)).toBe(before + 1);
  });

  test('a body streamed far past the limit is answered 413 while it is still being sent, without reading it all', async () => {
    const { port } = ctx.server.address() as AddressInfo;
    const before = await uploadRows(ws.tenantId);
    const boundary = 'hd-boundary-7e42';
    const total = 64 * MAX;
    let sent = 0;
    const result = await new Promise<{ status: number; body: string; sentWhenAnswered: number }>((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/uploads',
        headers: { Authorization: `Bearer ${ws.ownerKey}`, 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Transfer-Encoding': 'chunked' },
      });
      req.on('response', (res) => {
        const sentWhenAnswered = sent;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, body, sentWhenAnswered }));
        res.on('error', () => resolve({ status: res.statusCode!, body, sentWhenAnswered }));
      });
      // The server may close the connection while this side is still writing: that is the point.
      req.on('error', (err) => (sent < total ? undefined : reject(err)));
      const chunk = Buffer.alloc(64 * 1024, 0x62);
      const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="huge.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
      const source = Readable.from(
        (function* () {
          yield head;
          while (sent < total) {
            sent += chunk.length;
            yield chunk;
          }
          yield Buffer.from(`\r\n--${boundary}--\r\n`);
        })(),
      );
      source.pipe(req);
      source.on('error', () => undefined);
    });
    expect(result.status).toBe(413);
    expect(JSON.parse(result.body).code).toBe('file_too_large');
    // Answered with most of the 64 MiB still unsent (socket buffers hold a few MiB at most).
    expect(result.sentWhenAnswered).toBeLessThan(total / 2);
    expect(await uploadRows(ws.tenantId)).toBe(before);
  });

  test('a declared Content-Length past the limit is refused before any of the body is read', async () => {
    const { port } = ctx.server.address() as AddressInfo;
    const status = await new Promise<number>((resolve) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/uploads',
        headers: { Authorization: `Bearer ${ws.ownerKey}`, 'Content-Type': 'multipart/form-data; boundary=x', 'Content-Length': String(100 * MAX) },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', () => undefined);
      req.write('--x\r\n');
    });
    expect(status).toBe(413);
  });

  test('a scanner\'s finding quarantines the file: infected with the signature, never downloadable, never attachable', async () => {
    ctx.services.files.setScanner({
      scan: async (body) => {
        let bytes = 0;
        for await (const c of body) bytes += (c as Buffer).length;
        return bytes > 0 ? { clean: false, signature: 'Helpdesk.Test.EICAR' } : { clean: true };
      },
    });
    try {
      const eicar = Buffer.from('X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*');
      const up = await uploaded(ws.ownerKey, eicar, 'eicar.com');
      expect(up.attachment).toMatchObject({ state: 'infected', reason: 'Helpdesk.Test.EICAR' });
      const dl = await content(ws.ownerKey, up.attachment.id);
      expect(dl.status).toBe(409);
      expect(JSON.parse(dl.body.toString()).code).toBe('attachment_unavailable');
      const t = await createTicket(ctx, ws);
      const res = await reply(ws.ownerKey, t.id, { body: 'x', attachments: [up.upload_token] });
      expect(res.status).toBe(422);
      expect(res.body.errors[0].message).toMatch(/infected/);
    } finally {
      ctx.services.files.setScanner(undefined);
    }
  });
});

// ------------------------------------------------------------------------------------------------ customers' files

describe('inbound files (storeInbound, the intake worker\'s call)', () => {
  test('stored, skipped (too large, with the limit) and failed (with the reason) all show on their event; the ticket\'s version moves', async () => {
    const t = await createTicket(ctx, ws);
    const eventId = t.events[0].id as string;
    const first = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).expect(200);
    const files = ctx.services.files;
    const stored = await files.storeInbound(ws.tenantId, { ticketId: t.id, eventId, file: { name: 'scan.pdf', declaredType: 'image/png', contentId: '<part1@mail>', open: async () => Readable.from([PDF]) } }, { maxBytes: MAX });
    expect(stored).toMatchObject({ name: 'scan.pdf', content_type: 'application/pdf', state: 'stored', sha256: sha(PDF), size: PDF.length, content_id: '<part1@mail>' });
    const big = await files.storeInbound(ws.tenantId, { ticketId: t.id, eventId, file: { name: 'video.mp4', open: async () => Readable.from([Buffer.alloc(2048)]) } }, { maxBytes: 1024 });
    expect(big).toMatchObject({ state: 'skipped', reason: 'too large: the limit is 1024 bytes', sha256: null });
    const gone = await files.storeInbound(ws.tenantId, { ticketId: t.id, eventId, file: { name: 'expired.jpg', open: async () => { throw new Error('media URL answered 404'); } } }, { maxBytes: MAX });
    expect(gone.state).toBe('failed');
    expect(gone.reason).toContain('media URL answered 404');
    // A provider's error may carry credentials in its URL: the reason shown keeps none of them.
    const leaky = await files.storeInbound(ws.tenantId, { ticketId: t.id, eventId, file: { name: 'photo.jpg', open: async () => { throw new Error('GET https://user:pw@api.telegram.org/file/bot123456:AAH-secret_token/photos/p.jpg?sig=abc answered 404'); } } }, { maxBytes: MAX });
    expect(leaky.reason).toContain('https://api.telegram.org/file/bot…/photos/p.jpg?…');
    for (const secret of ['user:pw', 'AAH-secret_token', 'sig=abc']) expect(leaky.reason).not.toContain(secret);

    const after = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).set('If-None-Match', String(first.headers.etag)).expect(200);
    expect(after.headers.etag).not.toBe(first.headers.etag);
    const listed = after.body.events.find((e: { id: string }) => e.id === eventId).attachments;
    expect(listed.map((f: { name: string; state: string }) => [f.name, f.state])).toEqual([['scan.pdf', 'stored'], ['video.mp4', 'skipped'], ['expired.jpg', 'failed'], ['photo.jpg', 'failed']]);
    expect((await content(ws.ownerKey, stored.id)).body.equals(PDF)).toBe(true);
    expect(JSON.parse((await content(ws.ownerKey, big.id)).body.toString()).code).toBe('attachment_unavailable');

    const byEvent = await files.forEvents(ctx.db, ws.tenantId, [eventId, t.id]);
    expect(byEvent.get(eventId)!.map((f) => f.id)).toEqual([stored.id, big.id, gone.id, leaky.id]);
    expect(byEvent.has(t.id)).toBe(false);
  });
});

// ------------------------------------------------------------------------------------------------ web chat

describe('web chat visitors', () => {
  test("a note's file never shows in the visitor's conversation (nor does the note)", async () => {
    await ctx.startWorkers();
    const token = (await connect(ctx, ws, 'web_chat')).details.inbound_token!;
    const session = (await ctx.http.post(`/v1/web-chat/sessions?token=${encodeURIComponent(token)}`).send({}).expect(201)).body as { visitor_id: string; visitor_token: string };
    await ctx.http.post('/v1/web-chat/messages').set(bearer(session.visitor_token)).send({ message_id: 'm_1', text: 'My order arrived broken' }).expect(200);
    const ticketId = await eventually(async () => {
      const { rows } = await sql<{ id: string }>`select id from tickets where tenant_id = ${ws.tenantId} and conversation_key = ${session.visitor_id}`.execute(ctx.db);
      return rows[0]?.id;
    }, 10_000, 'the web chat ticket');
    const secret = await uploaded(ws.ownerKey, PNG, 'internal-refund-calc.png');
    await note(ws.ownerKey, ticketId, { body: 'Refund approved internally', attachments: [secret.upload_token] }).expect(201);
    await reply(ws.ownerKey, ticketId, { body: 'Sorry! A replacement is on its way.' }).expect(201);
    const read = await ctx.http.get('/v1/web-chat/messages').set(bearer(session.visitor_token)).expect(200);
    expect(read.body.messages.map((m: { text: string }) => m.text)).toEqual(['My order arrived broken', 'Sorry! A replacement is on its way.']);
    expect(read.text).not.toContain(secret.attachment.id);
    expect(read.text).not.toContain('internal-refund-calc');
    // The visitor's token is no credential for the attachment routes.
    expect((await ctx.http.get(`/v1/attachments/${secret.attachment.id}/content`).set(bearer(session.visitor_token))).status).toBe(401);
  }, 30_000);
});

// ------------------------------------------------------------------------------------------------ sweeps

describe('sweeps', () => {
  test('unused uploads past their hour are removed, rows and bytes; used ones stay', async () => {
    const w = await createWorkspace(ctx);
    const unused = await uploaded(w.ownerKey, PNG, 'forgotten.png');
    const fresh = await uploaded(w.ownerKey, PNG, 'fresh.png');
    const used = await uploaded(w.ownerKey, PNG, 'used.png');
    const t = await createTicket(ctx, w);
    await reply(w.ownerKey, t.id, { body: 'x', attachments: [used.upload_token] }).expect(201);
    await sql`update attachments set expires_at = now() - interval '1 second' where tenant_id = ${w.tenantId} and id = ${unused.attachment.id}`.execute(ctx.db);
    await sql`update attachments set created_at = now() - interval '2 hours' where tenant_id = ${w.tenantId} and id = ${used.attachment.id}`.execute(ctx.db);
    const keyOf = async (id: string) => (await sql<{ storage_key: string }>`select storage_key from attachments where tenant_id = ${w.tenantId} and id = ${id}`.execute(ctx.db)).rows[0]?.storage_key;
    const unusedKey = (await keyOf(unused.attachment.id))!;
    expect(unusedKey).toMatch(new RegExp(`^t/${w.tenantId}/[0-9a-f]{32}$`));

    const swept = await ctx.services.files.sweepUploads();
    expect(swept.deleted).toBeGreaterThanOrEqual(1);
    expect(await keyOf(unused.attachment.id)).toBeUndefined();
    expect(await ctx.services.files.blobs.get(unusedKey)).toBeUndefined();
    expect(await keyOf(fresh.attachment.id)).toBeDefined();
    expect(await keyOf(used.attachment.id)).toBeDefined();
    // The swept bytes no longer count against the workspace.
    const { rows } = await sql<{ bytes: number }>`select bytes from file_usage where tenant_id = ${w.tenantId}`.execute(ctx.db);
    expect(Number(rows[0]!.bytes)).toBe(2 * PNG.length);
  });

  test('the orphan sweep deletes old objects no row holds, keeps young ones, and marks rows whose bytes are gone failed', async () => {
    const w = await createWorkspace(ctx);
    const blobs = ctx.services.files.blobs;
    await ctx.runtime.redis.del(`${ctx.config.REDIS_PREFIX}:files:orphan-cursor`);
    // An object with no row, an hour old (a crash between the bytes and the row), and a young one.
    const oldOrphan = `t/${w.tenantId}/${randomBytes(16).toString('hex')}`;
    const youngOrphan = `t/${w.tenantId}/${randomBytes(16).toString('hex')}`;
    await blobs.put(oldOrphan, Readable.from([Buffer.from('lost')]), { maxBytes: 10, contentType: 'text/plain' });
    await blobs.put(youngOrphan, Readable.from([Buffer.from('writing')]), { maxBytes: 10, contentType: 'text/plain' });
    const { utimesSync } = await import('node:fs');
    const { join } = await import('node:path');
    const twoHoursAgo = (Date.now() - 2 * 3600_000) / 1000;
    utimesSync(join(ctx.config.FILES_DIR, ...oldOrphan.split('/')), twoHoursAgo, twoHoursAgo);
    // A stored file whose bytes vanished.
    const t = await createTicket(ctx, w);
    const lost = await uploaded(w.ownerKey, PDF, 'lost.pdf');
    await reply(w.ownerKey, t.id, { body: 'x', attachments: [lost.upload_token] }).expect(201);
    const { rows } = await sql<{ storage_key: string }>`update attachments set stored_at = now() - interval '5 minutes' where tenant_id = ${w.tenantId} and id = ${lost.attachment.id} returning storage_key`.execute(ctx.db);
    await blobs.delete(rows[0]!.storage_key);
    const before = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(w.ownerKey)).expect(200);

    const result = await ctx.services.files.sweepOrphans();
    expect(result).toMatchObject({ wrapped: true });
    expect(result.orphan_objects).toBeGreaterThanOrEqual(2);
    expect(result.orphan_objects_deleted).toBeGreaterThanOrEqual(1);
    expect(result.rows_missing_bytes).toBeGreaterThanOrEqual(1);
    expect(await blobs.get(oldOrphan)).toBeUndefined();
    expect(await blobs.get(youngOrphan)).toBeDefined();

    const meta = await ctx.http.get(`/v1/attachments/${lost.attachment.id}`).set(bearer(w.ownerKey)).expect(200);
    expect(meta.body).toMatchObject({ state: 'failed', reason: expect.stringMatching(/missing/) });
    const after = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(w.ownerKey)).expect(200);
    expect(after.headers.etag).not.toBe(before.headers.etag);
    expect(after.body.events.find((e: { kind: string }) => e.kind === 'reply').attachments[0].state).toBe('failed');
    expect((await content(w.ownerKey, lost.attachment.id)).status).toBe(409);

    // Every other file is untouched: a second run finds nothing new to repair.
    const again = await ctx.services.files.sweepOrphans();
    expect(again.rows_missing_bytes).toBe(0);
    expect(again.orphan_objects_deleted).toBe(0);
  });
});

// ------------------------------------------------------------------------------------------------ quota

describe('the workspace quota', () => {
  const { ctx: qctx } = useTestApp({ env: { FILES_WORKSPACE_QUOTA_BYTES: '100000', FILES_MAX_BYTES: '80000' } });

  test('an upload past the quota is 413 files_quota_exceeded; files.quota_reached goes to the event log once', async () => {
    const w = await createWorkspace(qctx);
    const send = (bytes: number, name: string) => qctx.http.post('/v1/uploads').set(bearer(w.ownerKey)).attach('file', randomBytes(bytes), name);
    expect((await send(60_000, 'a.bin')).status).toBe(201);
    const refused = await send(50_000, 'b.bin');
    expect(refused.status).toBe(413);
    expect(refused.body.code).toBe('files_quota_exceeded');
    expect(refused.body.detail).toContain('100000');
    expect((await send(30_000, 'c.bin')).status).toBe(201);
    // Now at 90,000 of 100,000: refused again, and again, without another event.
    expect((await send(20_000, 'd.bin')).status).toBe(413);
    expect((await send(20_000, 'e.bin')).status).toBe(413);
    const log = await qctx.http.get('/v1/events?types=files.quota_reached').set(bearer(w.ownerKey)).expect(200);
    expect(log.body.events).toHaveLength(1);
    expect(log.body.events[0].data).toMatchObject({ quota_bytes: 100000, used_bytes: 60000, refused: { name: 'b.bin', size: 50000, source: 'upload' } });
    // Nothing refused was kept.
    const { rows } = await sql<{ n: number; bytes: number }>`select count(*)::int as n, coalesce(sum(size), 0)::int as bytes from attachments where tenant_id = ${w.tenantId}`.execute(qctx.db);
    expect(rows[0]).toEqual({ n: 2, bytes: 90_000 });
    // A customer's file over the quota is skipped, saying so.
    const t = await createTicket(qctx, w);
    const inbound = await qctx.services.files.storeInbound(w.tenantId, { ticketId: t.id, eventId: t.events[0].id, file: { name: 'big.pdf', open: async () => Readable.from([randomBytes(20_000)]) } }, { maxBytes: 80_000 });
    expect(inbound).toMatchObject({ state: 'skipped', reason: expect.stringMatching(/quota/) });
  });
});

// ------------------------------------------------------------------------------------------------ S3

describe('on the S3 store', () => {
  let s3: TestS3;
  let sctx: TestContext;
  let w: Workspace;
  beforeAll(async () => {
    s3 = await startS3();
    sctx = await startTestApp({ env: { ...s3.env, FILES_S3_PRESIGN_SECONDS: '60' } });
    w = await createWorkspace(sctx);
  });
  afterAll(async () => {
    await sctx?.close();
    await s3?.close();
  });

  test('an upload goes to the bucket; the download is a 302 to a short-lived presigned URL serving the bytes as an attachment', async () => {
    const up = await sctx.http.post('/v1/uploads').set(bearer(w.ownerKey)).attach('file', PDF, 'offer.pdf');
    expect(up.status).toBe(201);
    expect(up.body.attachment).toMatchObject({ content_type: 'application/pdf', sha256: sha(PDF), state: 'stored' });
    const res = await sctx.http.get(`/v1/attachments/${up.body.attachment.id}/content`).set(bearer(w.ownerKey)).redirects(0);
    expect(res.status).toBe(302);
    expect(res.headers['cache-control']).toBe('no-store');
    const url = new URL(res.headers.location!);
    expect(url.origin).toBe(s3.endpoint);
    expect(url.searchParams.get('X-Amz-Expires')).toBe('60');
    const fetched = await fetch(url);
    expect(fetched.status).toBe(200);
    expect(sha(Buffer.from(await fetched.arrayBuffer()))).toBe(sha(PDF));
    expect(fetched.headers.get('content-disposition')).toBe(`attachment; filename="offer.pdf"; filename*=UTF-8''offer.pdf`);
  });
});
