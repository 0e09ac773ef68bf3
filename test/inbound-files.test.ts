/**
 * Every file a customer sends is fetched at intake time, by the worker, streaming (issue 34, part 2): Postmark's
 * base64 parts (inline images with their Content-ID), Twilio's MediaUrl{N} (with the account's basic auth, only
 * from Twilio's hosts), WhatsApp media ids (Graph media endpoint, then the download, with the bearer token) and
 * Telegram files (getFile, then the file path), all served by the provider doubles. Each file ends `stored` with
 * the sha-256 of its source, `skipped` (over FILES_MAX_BYTES with the limit, or past FILES_MAX_PER_MESSAGE) or
 * `failed` with the reason (a 404, a hang cut by FILES_FETCH_TIMEOUT_MS, a MediaUrl off Twilio's hosts); the
 * ticket is written either way, a redelivery fetches nothing again, and the event lists its files with their
 * states on the timeline.
 */
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { emailAdapter } from '../src/domains/channels/adapters/email';
import { base64Decoder } from '../src/domains/inbound-files/download';
import { twilioMediaAllowed } from '../src/domains/inbound-files/sources';
import { startTestApp, type TestContext } from './helpers/context';
import { attachmentRows, settledAttachments } from './helpers/attachment-rows';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { connect, ingest, ticketDetail } from './helpers/ingest';
import { emailPayload, smsPayload, telegramUpdate, whatsappMessage, whatsappPayload } from './helpers/payloads';
import { generated, startProviderDoubles, type ProviderDoubles } from './helpers/provider-doubles';
import { eventually } from './helpers/wait';

const AC = `AC${'7f'.repeat(16)}`;
const TWILIO_TOKEN = 'twilio-inbound-media-token-0001';
const WA_NUMBER = '106540352242922';
const WA_KEY = 'EAAG-inbound-media-system-user-token';
const TG_TOKEN = '123456789:AAInboundMediaBotTokenForTheDouble';
/** Small limits, so the "too large" and "too many" cases need only a little data. */
const MAX_BYTES = 1024 * 1024;
const MAX_PER_MESSAGE = 4;
const FETCH_TIMEOUT_MS = 1500;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const bytes = (n: number) => randomBytes(n);
/** A tiny valid PNG (1×1), so the sniffed type is image/png. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
const PDF = Buffer.concat([Buffer.from('%PDF-1.4\n'), bytes(20_000), Buffer.from('\n%%EOF\n')]);
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), bytes(30_000), Buffer.from([0xff, 0xd9])]);
const newPhone = () => `+1555${String(randomInt(0, 1e7)).padStart(7, '0')}`;
const newWaId = () => `1650${String(randomInt(0, 1e7)).padStart(7, '0')}`;

let doubles: ProviderDoubles;
let ctx: TestContext;
let filesDir: string;

beforeAll(async () => {
  doubles = await startProviderDoubles();
  doubles.addTwilioAccount(AC, TWILIO_TOKEN);
  doubles.addWhatsappNumber(WA_NUMBER, WA_KEY);
  doubles.addTelegramBot(TG_TOKEN);
  filesDir = mkdtempSync(join(tmpdir(), 'hd-inbound-files-'));
  ctx = await startTestApp({
    env: {
      TWILIO_API_URL: doubles.urls.twilio,
      WHATSAPP_API_URL: doubles.urls.whatsapp,
      TELEGRAM_API_URL: doubles.urls.telegram,
      FILES_DIR: filesDir,
      FILES_MAX_BYTES: String(MAX_BYTES),
      FILES_MAX_PER_MESSAGE: String(MAX_PER_MESSAGE),
      FILES_FETCH_TIMEOUT_MS: String(FETCH_TIMEOUT_MS),
      FILES_FETCH_CONCURRENCY: '4',
      BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
    },
  });
  await ctx.startWorkers();
});
afterAll(async () => {
  await ctx?.close();
  await doubles?.close();
  if (filesDir) rmSync(filesDir, { recursive: true, force: true });
});
beforeEach(() => doubles.reset());

const rowsOf = (tenantId: string, ticketId: string) => attachmentRows(ctx.db, tenantId, ticketId);
/** Waits until the ticket has `count` inbound files, none pending; returns them. */
const settled = (tenantId: string, ticketId: string, count: number, timeoutMs = 15_000) => settledAttachments(ctx.db, tenantId, ticketId, count, timeoutMs);

const stagedLeft = () => {
  try {
    return readdirSync(join(filesDir, 'staged'), { recursive: true }).filter((p) => String(p).split('/').length >= 2 && /[0-9a-f]{32}$/.test(String(p)));
  } catch {
    return [];
  }
};

async function ingestOk(ws: Workspace, channel: string, payload: unknown) {
  const res = await ingest(ctx, channel, payload, ws.tenantId);
  if (res.status !== 200 && res.status !== 201) throw new Error(`ingest ${channel}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { ticket_id: string; was_duplicate: boolean; was_created: boolean };
}

describe('email (Postmark): base64 parts, inline images with their Content-ID', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    await connect(ctx, ws, 'email');
  });

  test('3 attachments (one inline) give 3 stored files whose sha256 match the source; the staged parts are gone', async () => {
    const txt = Buffer.from('line one\r\nline two\r\n'.repeat(500));
    const payload = emailPayload({
      html: '<p>See the screenshot: <img src="cid:shot.png@01D9"></p>',
      attachments: [
        { Name: 'invoice.pdf', Content: PDF.toString('base64'), ContentType: 'application/pdf', ContentLength: PDF.length },
        { Name: 'shot.png', Content: PNG.toString('base64'), ContentType: 'image/png', ContentLength: PNG.length, ContentID: 'shot.png@01D9' },
        // Line-wrapped base64, as some relays write it.
        { Name: 'notes.txt', Content: txt.toString('base64').replace(/(.{76})/g, '$1\r\n'), ContentType: 'text/plain', ContentLength: txt.length },
      ] as never,
    });
    const r = await ingestOk(ws, 'email', payload);
    const rows = await settled(ws.tenantId, r.ticket_id, 3);
    const byName = new Map(rows.map((x) => [x.name, x]));
    expect(rows.map((x) => x.state)).toEqual(['stored', 'stored', 'stored']);
    expect(byName.get('invoice.pdf')).toMatchObject({ sha256: sha(PDF), size: PDF.length, content_type: 'application/pdf', content_id: null });
    expect(byName.get('shot.png')).toMatchObject({ sha256: sha(PNG), size: PNG.length, content_type: 'image/png', content_id: 'shot.png@01D9' });
    expect(byName.get('notes.txt')).toMatchObject({ sha256: sha(txt), size: txt.length });
    // The body keeps its marker; every file is on the message's own event.
    const t = await ticketDetail(ctx, ws, r.ticket_id);
    const event = t.events.find((e) => e.kind === 'inbound_email')!;
    expect(event.body).toContain('[3 attachments: invoice.pdf, shot.png, notes.txt]');
    expect(event.meta).toMatchObject({ files_expected: 3 });
    expect(new Set(rows.map((x) => x.event_id))).toEqual(new Set([event.id]));
    await eventually(async () => (stagedLeft().length === 0 ? true : undefined), 5000, 'staged parts removed');

    // The bytes read back through the API are the sender's.
    const got = await ctx.http.get(`/v1/attachments/${byName.get('invoice.pdf')!.id}/content`).set(bearer(ws.ownerKey)).buffer(true).parse((res, cb) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => cb(null, Buffer.concat(chunks)));
    });
    expect(got.status).toBe(200);
    expect(sha(got.body as Buffer)).toBe(sha(PDF));
  });

  test('a part over FILES_MAX_BYTES is skipped with the limit (far over: never staged; just over: cut by the worker); past FILES_MAX_PER_MESSAGE the rest are listed as skipped', async () => {
    const justOver = bytes(MAX_BYTES + 10_000);
    const farOver = bytes(2 * MAX_BYTES);
    const small = (i: number) => Buffer.from(`file number ${i}\n`.repeat(50));
    const attachments = [
      { Name: 'huge.bin', Content: justOver.toString('base64'), ContentType: 'application/octet-stream' },
      { Name: 'giant.bin', Content: farOver.toString('base64'), ContentType: 'application/octet-stream' },
      ...[1, 2, 3, 4, 5].map((i) => ({ Name: `part-${i}.txt`, Content: small(i).toString('base64'), ContentType: 'text/plain' })),
    ];
    const r = await ingestOk(ws, 'email', emailPayload({ attachments: attachments as never }));
    const rows = await settled(ws.tenantId, r.ticket_id, 7);
    const byName = new Map(rows.map((x) => [x.name, x]));
    for (const name of ['huge.bin', 'giant.bin']) {
      expect(byName.get(name)).toMatchObject({ state: 'skipped', sha256: null });
      expect(byName.get(name)!.reason).toBe(`too large: the limit is ${MAX_BYTES} bytes`);
    }
    // In the message's order on the event.
    expect(rows.map((x) => x.name)).toEqual(['huge.bin', 'giant.bin', 'part-1.txt', 'part-2.txt', 'part-3.txt', 'part-4.txt', 'part-5.txt']);
    for (const i of [1, 2]) expect(byName.get(`part-${i}.txt`)).toMatchObject({ state: 'stored', sha256: sha(small(i)) });
    for (const i of [3, 4, 5]) {
      expect(byName.get(`part-${i}.txt`)).toMatchObject({ state: 'skipped', sha256: null });
      expect(byName.get(`part-${i}.txt`)!.reason).toContain(`at most ${MAX_PER_MESSAGE}`);
    }
  });

  test('the ingest job carries staged keys, never the parts: megabytes of base64 stay out of Redis', async () => {
    const part = bytes(600_000);
    const name = `photo-${randomBytes(6).toString('hex')}.raw`;
    const payload = emailPayload({ attachments: [{ Name: name, Content: part.toString('base64'), ContentType: 'application/octet-stream' }] as never });
    const r = await ingestOk(ws, 'email', payload);
    const [row] = await settled(ws.tenantId, r.ticket_id, 1);
    expect(row).toMatchObject({ state: 'stored', sha256: sha(part) });
    const jobs = await ctx.runtime.queues.queue('ingest').getCompleted(0, 200);
    const mine = jobs.find((j) => JSON.stringify(j.data).includes(name));
    expect(mine).toBeDefined();
    expect(JSON.stringify(mine!.data).length).toBeLessThan(10_000);
    expect(JSON.stringify(mine!.data)).toMatch(/"staged":"staged\/[0-9a-f-]+\/[0-9a-f]{32}"/);
  });

  test('Postmark posting straight to the hook URL: the same files', async () => {
    const hookWs = await createWorkspace(ctx);
    const conn = await connect(ctx, hookWs, 'email');
    const payload = emailPayload({ attachments: [{ Name: 'hooked.pdf', Content: PDF.toString('base64'), ContentType: 'application/pdf', ContentID: '' }] as never });
    const res = await ctx.http.post(`/v1/hooks/email/${conn.details.inbound_token!}`).send(payload);
    expect(res.status).toBe(200);
    const [row] = await settled(hookWs.tenantId, res.body.ticket_id as string, 1);
    expect(row).toMatchObject({ name: 'hooked.pdf', state: 'stored', sha256: sha(PDF), content_id: null });
  });

  test('an ingest job that committed but died before queueing the fetch queues it when it runs again (a rerun)', async () => {
    const part = Buffer.from('rerun me');
    const parsed = emailAdapter.parse(
      emailPayload({ attachments: [{ Name: 'rerun.txt', Content: part.toString('base64'), ContentType: 'text/plain' }] as never }),
    );
    if (!parsed.ok) throw new Error(parsed.reason);
    // Staged at the edge (the API's part), queued by the ingest writer (the workers' part).
    const prepared = await ctx.services.inboundFiles.prepare(ws.tenantId, parsed.messages, {
      Attachments: [{ Name: 'rerun.txt', Content: part.toString('base64') }],
    });
    const item = { id: `rerun-${randomBytes(6).toString('hex')}`, tenant_id: ws.tenantId, channel: 'email', message: prepared.messages[0]! };
    const files = ctx.workerServices.inboundFiles;
    const queueFetch = files.queueFetch;
    files.queueFetch = async () => {
      throw new Error('the worker died here');
    };
    try {
      await expect(ctx.workerServices.ingestProcessor.processBatch([item])).rejects.toThrow('the worker died here');
    } finally {
      files.queueFetch = queueFetch;
    }
    const [answer] = await ctx.workerServices.ingestProcessor.processBatch([item]);
    expect(answer).toMatchObject({ ok: true, value: { was_duplicate: false } });
    const ticketId = (answer as { value: { ticket_id: string } }).value.ticket_id;
    const [row] = await settled(ws.tenantId, ticketId, 1);
    expect(row).toMatchObject({ name: 'rerun.txt', state: 'stored', sha256: sha(part) });
  });

  test('a redelivered email (ledger duplicate) fetches nothing again; its staged parts are dropped', async () => {
    const payload = emailPayload({ attachments: [{ Name: 'once.txt', Content: Buffer.from('only once').toString('base64'), ContentType: 'text/plain' }] as never });
    const first = await ingestOk(ws, 'email', payload);
    await settled(ws.tenantId, first.ticket_id, 1);
    const again = await ingestOk(ws, 'email', payload);
    expect(again).toMatchObject({ ticket_id: first.ticket_id, was_duplicate: true });
    await new Promise((r) => setTimeout(r, 500));
    expect((await rowsOf(ws.tenantId, first.ticket_id)).map((x) => x.name)).toEqual(['once.txt']);
    await eventually(async () => (stagedLeft().length === 0 ? true : undefined), 5000, 'staged parts removed');
  });
});

describe('WhatsApp: media ids through the Graph media endpoint, with the bearer token', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    await connect(ctx, ws, 'whatsapp', { config: { phone_number_id: WA_NUMBER, api_key: WA_KEY } });
  });

  test('an image and a document give 2 stored files whose sha256 match the source', async () => {
    const imageId = doubles.addWhatsappMedia(WA_KEY, { bytes: JPEG, mimeType: 'image/jpeg' });
    const docId = doubles.addWhatsappMedia(WA_KEY, { bytes: PDF, mimeType: 'application/pdf' });
    const from = newWaId();
    const payload = whatsappPayload({
      messages: [
        whatsappMessage({ from, type: 'image', content: { id: imageId, mime_type: 'image/jpeg', sha256: 'x', caption: 'The broken lid' } }),
        whatsappMessage({ from, type: 'document', content: { id: docId, mime_type: 'application/pdf', filename: 'receipt.pdf' } }),
      ],
    });
    const r = await ingestOk(ws, 'whatsapp', payload);
    const rows = await settled(ws.tenantId, r.ticket_id, 2);
    const byName = new Map(rows.map((x) => [x.name, x]));
    expect(byName.get('image.jpg')).toMatchObject({ state: 'stored', sha256: sha(JPEG), size: JPEG.length, content_type: 'image/jpeg' });
    expect(byName.get('receipt.pdf')).toMatchObject({ state: 'stored', sha256: sha(PDF), content_type: 'application/pdf' });
    // Each message's event holds its own file.
    expect(new Set(rows.map((x) => x.event_id)).size).toBe(2);
    const asked = doubles.mediaRequests('whatsapp');
    expect(asked.length).toBe(4);
    for (const m of asked) expect(m.headers.authorization).toBe(`Bearer ${WA_KEY}`);
    const t = await ticketDetail(ctx, ws, r.ticket_id);
    expect(t.events.map((e) => e.body)).toEqual(expect.arrayContaining(['[image] The broken lid', '[document: receipt.pdf]']));
  });

  test('a file over FILES_MAX_BYTES is cut at the limit and skipped, with the limit', async () => {
    const id = doubles.addWhatsappMedia(WA_KEY, { size: MAX_BYTES * 3, mimeType: 'video/mp4' });
    const r = await ingestOk(ws, 'whatsapp', whatsappPayload({ from: newWaId(), type: 'video', content: { id, mime_type: 'video/mp4' } }));
    const [row] = await settled(ws.tenantId, r.ticket_id, 1);
    expect(row).toMatchObject({ name: 'video.mp4', state: 'skipped', sha256: null });
    expect(row!.reason).toContain(String(MAX_BYTES));
  });
});

describe('Telegram: getFile, then the file path', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    await connect(ctx, ws, 'telegram', { config: { bot_token: TG_TOKEN } });
  });

  test('a document and a photo (its largest size) are stored with the source sha256', async () => {
    const docId = doubles.addTelegramFile(TG_TOKEN, { bytes: PDF, mimeType: 'application/pdf' });
    const thumb = bytes(900);
    const medium = bytes(9_000);
    const sizes = [
      { file_id: doubles.addTelegramFile(TG_TOKEN, { bytes: thumb, mimeType: 'image/jpeg' }), file_unique_id: 'a', width: 90, height: 67, file_size: thumb.length },
      { file_id: doubles.addTelegramFile(TG_TOKEN, { bytes: JPEG, mimeType: 'image/jpeg' }), file_unique_id: 'c', width: 1280, height: 960, file_size: JPEG.length },
      { file_id: doubles.addTelegramFile(TG_TOKEN, { bytes: medium, mimeType: 'image/jpeg' }), file_unique_id: 'b', width: 320, height: 240, file_size: medium.length },
    ];
    const fromId = randomInt(1, 900_000) * 1000 + 7_300_000_000;
    const doc = await ingestOk(ws, 'telegram', telegramUpdate({ fromId, text: null, extra: { document: { file_id: docId, file_unique_id: 'd', file_name: 'Testfile.pdf', mime_type: 'application/pdf', file_size: PDF.length } } }));
    const photo = await ingestOk(ws, 'telegram', telegramUpdate({ fromId, text: null, extra: { photo: sizes, caption: 'Screenshot of the error' } }));
    expect(photo.ticket_id).toBe(doc.ticket_id);
    const rows = await settled(ws.tenantId, doc.ticket_id, 2);
    const byName = new Map(rows.map((x) => [x.name, x]));
    expect(byName.get('Testfile.pdf')).toMatchObject({ state: 'stored', sha256: sha(PDF) });
    expect(byName.get('photo.jpg')).toMatchObject({ state: 'stored', sha256: sha(JPEG), size: JPEG.length });
    // getFile and the download each, and the token never leaves the configured base URL.
    expect(doubles.mediaRequests('telegram').map((m) => m.path.replace(TG_TOKEN, '<token>'))).toEqual(
      expect.arrayContaining(['/telegram/bot<token>/getFile', expect.stringMatching(/^\/telegram\/file\/bot<token>\/photos\//)]),
    );
  });

  test('a download that hangs fails after FILES_FETCH_TIMEOUT_MS with the reason; the ticket exists', async () => {
    const fileId = doubles.addTelegramFile(TG_TOKEN, { size: 50_000, mimeType: 'application/pdf', fail: 'hang' });
    const r = await ingestOk(ws, 'telegram', telegramUpdate({ text: null, extra: { document: { file_id: fileId, file_unique_id: 'h', file_name: 'slow.pdf' } } }));
    expect(r.was_created).toBe(true);
    const [row] = await settled(ws.tenantId, r.ticket_id, 1, FETCH_TIMEOUT_MS + 10_000);
    expect(row).toMatchObject({ name: 'slow.pdf', state: 'failed', sha256: null });
    expect(row!.reason).toContain(`within ${FETCH_TIMEOUT_MS} ms`);
    expect(row!.reason).not.toContain(TG_TOKEN);
  });
});

describe('SMS (Twilio): MediaUrl{N} with the account\'s basic auth', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    await connect(ctx, ws, 'sms', { config: { account_sid: AC, auth_token: TWILIO_TOKEN, phone_number: '+15550001111' } });
  });

  test('MediaUrl0/1 are fetched with basic auth (not sent on to the CDN) and stored with the source sha256', async () => {
    const url0 = doubles.addTwilioMedia(AC, { bytes: JPEG, mimeType: 'image/jpeg' });
    const url1 = doubles.addTwilioMedia(AC, { bytes: PNG, mimeType: 'image/png', redirect: true });
    const r = await ingestOk(ws, 'sms', smsPayload({ from: newPhone(), body: 'Photos of the damage', media: [url0, url1] }));
    const rows = await settled(ws.tenantId, r.ticket_id, 2);
    expect(rows.map((x) => [x.name, x.state, x.sha256])).toEqual(
      expect.arrayContaining([
        ['media-1.jpg', 'stored', sha(JPEG)],
        ['media-2.jpg', 'stored', sha(PNG)],
      ]),
    );
    const basic = `Basic ${Buffer.from(`${AC}:${TWILIO_TOKEN}`).toString('base64')}`;
    const asked = doubles.mediaRequests('twilio');
    const direct = asked.filter((m) => m.path.includes('/Media/'));
    expect(direct).toHaveLength(2);
    for (const m of direct) expect(m.headers.authorization).toBe(basic);
    const cdn = asked.filter((m) => m.path.startsWith('/twilio/cdn/'));
    expect(cdn).toHaveLength(1);
    expect(cdn[0]!.headers.authorization).toBeUndefined();
    // The links are not written into the text: the files are on the event.
    const t = await ticketDetail(ctx, ws, r.ticket_id);
    expect(t.events[0]!.body).toBe('Photos of the damage\n[2 media attachments: image/jpeg]');
  });

  test('a MediaUrl that answers 404 fails with the reason; one off Twilio\'s hosts is never asked', async () => {
    const gone = doubles.addTwilioMedia(AC, { bytes: JPEG, fail: 'missing' });
    const elsewhere = 'http://169.254.169.254/latest/meta-data/iam/security-credentials/';
    const r = await ingestOk(ws, 'sms', smsPayload({ from: newPhone(), media: [gone, elsewhere] }));
    const rows = await settled(ws.tenantId, r.ticket_id, 2);
    expect(rows.every((x) => x.state === 'failed')).toBe(true);
    const reasons = rows.map((x) => x.reason ?? '').sort();
    expect(reasons.some((x) => x.includes('HTTP 404'))).toBe(true);
    expect(reasons.some((x) => x.includes('not on a Twilio host'))).toBe(true);
    expect(doubles.mediaRequests('twilio')).toHaveLength(1);
    expect(reasons.join(' ')).not.toContain(TWILIO_TOKEN);
  });
});

describe('the timeline, a job run again, and the sweep', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    await connect(ctx, ws, 'sms', { config: { account_sid: AC, auth_token: TWILIO_TOKEN, phone_number: '+15550001111' } });
  });

  test('the event lists its attachments with their states; the fetch job run again adds nothing; a stale pending row is failed by the sweep', async () => {
    const ok = doubles.addTwilioMedia(AC, { bytes: JPEG, mimeType: 'image/jpeg' });
    const bad = doubles.addTwilioMedia(AC, { bytes: JPEG, fail: 'missing' });
    const big = doubles.addTwilioMedia(AC, { size: MAX_BYTES + 1, mimeType: 'image/jpeg' });
    const r = await ingestOk(ws, 'sms', smsPayload({ from: newPhone(), media: [ok, bad, big] }));
    const rows = await settled(ws.tenantId, r.ticket_id, 3);
    const t = await ticketDetail(ctx, ws, r.ticket_id);
    const event = t.events.find((e) => e.kind === 'inbound_sms') as unknown as { id: string; attachments?: { id: string; name: string; state: string; sha256: string | null }[] };
    expect(event.attachments?.map((a) => [a.name, a.state])).toEqual([
      ['media-1.jpg', 'stored'],
      ['media-2.jpg', 'failed'],
      ['media-3.jpg', 'skipped'],
    ]);
    expect(event.attachments?.[0]?.sha256).toBe(sha(JPEG));

    // The same job again (a worker died after the fetch, an ingest rerun queued it anew): nothing is fetched twice.
    doubles.reset();
    const again = await ctx.services.inboundFiles.fetch({
      tenant_id: ws.tenantId,
      ticket_id: r.ticket_id,
      event_id: event.id,
      channel: 'sms',
      files: [ok, bad, big].map((url, i) => ({ name: `media-${i + 1}.jpg`, declaredType: 'image/jpeg', source: { kind: 'twilio' as const, url } })),
    });
    expect(again).toEqual({ fetched: 0, already: 3 });
    expect(doubles.mediaRequests()).toHaveLength(0);
    expect(await rowsOf(ws.tenantId, r.ticket_id)).toHaveLength(rows.length);

    // A worker killed mid-fetch leaves a row pending: the sweep fails it once no fetch can still be running.
    await sql`UPDATE attachments SET state = 'pending', created_at = now() - interval '1 hour' WHERE tenant_id = ${ws.tenantId} AND id = ${rows[0]!.id}`.execute(ctx.db);
    const swept = await ctx.services.inboundFiles.sweep();
    expect(swept.failed).toBeGreaterThanOrEqual(1);
    const after = (await rowsOf(ws.tenantId, r.ticket_id)).find((x) => x.id === rows[0]!.id)!;
    expect(after).toMatchObject({ state: 'failed' });
    expect(after.reason).toContain('interrupted');
  });

  test('files of a ticket deleted before its fetch have nowhere to go: the job ends without failing', async () => {
    const url = doubles.addTwilioMedia(AC, { bytes: JPEG, mimeType: 'image/jpeg' });
    const ghost = { tenant_id: ws.tenantId, ticket_id: crypto.randomUUID(), event_id: crypto.randomUUID(), channel: 'sms' };
    await expect(ctx.services.inboundFiles.fetch({ ...ghost, files: [{ name: 'x.jpg', source: { kind: 'twilio', url } }] })).resolves.toEqual({ fetched: 0, already: 0 });
  });
});

describe('streaming pieces', () => {
  test('the base64 decoder reads across chunk boundaries and line breaks, and refuses garbage', async () => {
    const source = Buffer.concat([...generated(200_003)]);
    const text = source.toString('base64').replace(/(.{76})/g, '$1\r\n');
    const chunks: string[] = [];
    for (let at = 0; at < text.length; ) {
      const n = 1 + randomInt(0, 5000);
      chunks.push(text.slice(at, at + n));
      at += n;
    }
    const out: Buffer[] = [];
    for await (const c of Readable.from(chunks.map((c) => Buffer.from(c, 'latin1'))).pipe(base64Decoder())) out.push(c as Buffer);
    expect(sha(Buffer.concat(out))).toBe(sha(source));
    await expect(
      (async () => {
        for await (const _ of Readable.from([Buffer.from('QUJD<script>')]).pipe(base64Decoder())) void _;
      })(),
    ).rejects.toThrow('not valid base64');
  });

  test('twilioMediaAllowed: the configured origin and Twilio hosts over https only', async () => {
    const config = { TWILIO_API_URL: 'https://api.twilio.com', TWILIO_MEDIA_HOSTS: 'api.twilio.com,*.twilio.com' };
    const ok = (u: string) => twilioMediaAllowed(new URL(u), config);
    expect(ok('https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1')).toBe(true);
    expect(ok('https://media.twiliocdn.twilio.com/x')).toBe(true);
    expect(ok('http://api.twilio.com/x')).toBe(false);
    expect(ok('https://api.twilio.com:8443/x')).toBe(false);
    expect(ok('https://evil.test/api.twilio.com')).toBe(false);
    expect(ok('https://twilio.com.evil.test/x')).toBe(false);
    expect(ok('https://eviltwilio.com/x')).toBe(false);
    expect(ok('https://user:pw@api.twilio.com/x')).toBe(false);
    expect(ok('http://169.254.169.254/latest/meta-data/')).toBe(false);
  });
});
