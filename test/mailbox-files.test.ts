/**
 * Files of mail polled from the connected mailbox are stored (issue 34): Gmail parts with a filename (served by
 * users.messages.attachments.get as base64url JSON, or inline in `format=full` for small parts) and Graph
 * fileAttachments (listed, then streamed from `$value`) are fetched by the files worker with the mailbox's own
 * token, which the job never carries. Graph item and reference attachments are listed as skipped with the reason,
 * a declared size over FILES_MAX_BYTES is skipped without a request, and a provider failing the download leaves
 * the ticket in place with the file `failed` and the reason. Everything runs against the mail-provider double.
 */
import { createHash, randomBytes } from 'node:crypto';
import { gmailAttachmentBody } from '../src/domains/inbound-files/gmail-body';
import { type TestContext } from './helpers/context';
import { settledAttachments } from './helpers/attachment-rows';
import { createWorkspace, type Workspace } from './helpers/factories';
import { ticketDetail } from './helpers/ingest';
import { startMailProviderDouble, type DeliverAttachment, type MailProviderDouble } from './helpers/mail-provider-double';
import { PROVIDERS, appWithWorkers, helpers, providerEnv, suite, tag, type Provider } from './helpers/mailbox';

const MAX_BYTES = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** A tiny valid PNG (1×1), so the sniffed type is image/png. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
const pdf = () => Buffer.concat([Buffer.from('%PDF-1.4\n'), randomBytes(200_000), Buffer.from('\n%%EOF\n')]);
const csv = () => Buffer.from(`order,amount\n${randomBytes(8).toString('hex')},12.50\n`);

let double: MailProviderDouble;
let ctx: TestContext;
const h = helpers(() => ctx);

beforeAll(async () => {
  double = suite.double = await startMailProviderDouble();
  ctx = await appWithWorkers(providerEnv({ FILES_MAX_BYTES: String(MAX_BYTES), FILES_FETCH_TIMEOUT_MS: '5000' }));
});
afterAll(async () => {
  await ctx?.close();
  await double?.close();
});
afterEach(() => {
  double.failAttachments('google', null);
  double.failAttachments('microsoft', null);
});

/** Waits until the ticket has `count` inbound files, none pending; returns them. */
const settled = (tenantId: string, ticketId: string, count: number, timeoutMs = 15_000) => settledAttachments(ctx.db, tenantId, ticketId, count, timeoutMs);

/** A connected mailbox with its cursor set, in a workspace of its own. */
async function mailboxFor(p: Provider): Promise<{ ws: Workspace; mailbox: string }> {
  const ws = await createWorkspace(ctx);
  const { email } = await h.connect(ws, p);
  await h.poll(ws.tenantId);
  return { ws, mailbox: email };
}

/** Delivers one customer message with these files and polls it into a ticket. */
async function pollMessage(p: Provider, ws: Workspace, mailbox: string, attachments: DeliverAttachment[], html?: string) {
  const before = new Set((await h.tickets(ws.tenantId)).map((t) => t.id));
  const providerId = double.deliver(p, mailbox, {
    from: `cust.${tag()}@customer.test`,
    subject: `Order ${tag()}`,
    text: 'Please see the attached files.',
    ...(html ? { html } : {}),
    messageId: `${tag()}.${Date.now()}@mail.customer.test`,
    attachments,
  });
  const r = await h.poll(ws.tenantId);
  expect(r).toMatchObject({ fetched: 1, ingested: 1 });
  const ticket = (await h.tickets(ws.tenantId)).find((t) => !before.has(t.id));
  if (!ticket) throw new Error('the polled message made no ticket');
  return { ticketId: ticket.id, providerId };
}

const attachmentRequests = (p: Provider) => double.requests.filter((r) => r.provider === p && r.path.includes('/attachments/'));

describe.each(PROVIDERS)('%s: files of polled mail', (p) => {
  test('a message with three files (one inline image with its Content-ID) is polled into a ticket whose three files are stored with the sender\'s bytes', async () => {
    const { ws, mailbox } = await mailboxFor(p);
    const invoice = pdf();
    const orders = csv();
    const since = double.requests.length;
    const { ticketId } = await pollMessage(
      p,
      ws,
      mailbox,
      [
        { name: 'shot.png', contentType: 'image/png', content: PNG, contentId: 'shot.png@01D9' },
        { name: 'invoice.pdf', contentType: 'application/pdf', content: invoice },
        // Gmail: a small part whose data comes inline in format=full (fetched again by its partId).
        { name: 'orders.csv', contentType: 'text/csv', content: orders, gmailInlineData: true },
      ],
      '<p>See the screenshot: <img src="cid:shot.png@01D9"></p>',
    );
    const rows = await settled(ws.tenantId, ticketId, 3);
    expect(rows.map((r) => [r.name, r.state, r.reason])).toEqual([
      ['shot.png', 'stored', null],
      ['invoice.pdf', 'stored', null],
      ['orders.csv', 'stored', null],
    ]);
    const byName = new Map(rows.map((r) => [r.name, r]));
    expect(byName.get('shot.png')).toMatchObject({ sha256: sha(PNG), size: PNG.length, content_type: 'image/png', content_id: 'shot.png@01D9' });
    expect(byName.get('invoice.pdf')).toMatchObject({ sha256: sha(invoice), size: invoice.length, content_type: 'application/pdf', content_id: null });
    expect(byName.get('orders.csv')).toMatchObject({ sha256: sha(orders), size: orders.length });
    // Gmail: two attachments.get calls (the small part's data came with the message); Graph: three $value reads.
    expect(attachmentRequests(p).filter((r) => double.requests.indexOf(r) >= since)).toHaveLength(p === 'google' ? 2 : 3);

    // The body names the files, and all three are on the message's own event, in the message's order.
    const t = await ticketDetail(ctx, ws, ticketId);
    const event = t.events.find((e) => e.kind === 'inbound_email')!;
    expect(event.body).toContain('[3 attachments: shot.png, invoice.pdf, orders.csv]');
    expect(event.meta).toMatchObject({ files_expected: 3 });
    expect(new Set(rows.map((r) => r.event_id))).toEqual(new Set([event.id]));
  });

  test('a file whose declared size is over FILES_MAX_BYTES is skipped with the limit, and the provider is never asked for its bytes', async () => {
    const { ws, mailbox } = await mailboxFor(p);
    const since = double.requests.length;
    const small = csv();
    const { ticketId } = await pollMessage(p, ws, mailbox, [
      { name: 'huge.bin', contentType: 'application/octet-stream', content: randomBytes(MAX_BYTES + 200_000) },
      { name: 'small.csv', contentType: 'text/csv', content: small },
    ]);
    const rows = await settled(ws.tenantId, ticketId, 2);
    expect(rows[0]).toMatchObject({ name: 'huge.bin', state: 'skipped', sha256: null, reason: `too large: the limit is ${MAX_BYTES} bytes` });
    expect(rows[1]).toMatchObject({ name: 'small.csv', state: 'stored', sha256: sha(small) });
    // One download: the small file's. Nothing was asked for the large one.
    const downloads = attachmentRequests(p).filter((r) => double.requests.indexOf(r) >= since);
    expect(downloads).toHaveLength(1);
  });

  test('the files.fetch job in Redis names the message and its files but holds no access or refresh token', async () => {
    const { ws, mailbox } = await mailboxFor(p);
    const { ticketId, providerId } = await pollMessage(p, ws, mailbox, [{ name: 'invoice.pdf', contentType: 'application/pdf', content: pdf() }]);
    const [row] = await settled(ws.tenantId, ticketId, 1);
    expect(row!.state).toBe('stored');
    const job = await ctx.runtime.queues.queue('files').getJob(`files-${row!.event_id}`);
    expect(job).toBeDefined();
    const payload = JSON.stringify(job!.data);
    expect(payload).toContain(providerId);
    expect(payload).toContain(`"kind":"${p === 'google' ? 'gmail' : 'graph'}"`);
    const { access, refresh } = await h.tokens(ws.tenantId);
    expect(payload).not.toContain(access);
    expect(payload).not.toContain(refresh!);
    expect(payload.toLowerCase()).not.toContain('bearer');
    expect(payload).not.toContain(p === 'google' ? 'ya29.' : '"EwB');
    // Nor did the worker write it to a log line.
    expect(ctx.logs.text).not.toContain(access);
  });

  test('when the provider fails the download (HTTP 500) the ticket still exists and the file is failed with the provider\'s status as its reason', async () => {
    const { ws, mailbox } = await mailboxFor(p);
    double.failAttachments(p, 500);
    const { ticketId } = await pollMessage(p, ws, mailbox, [{ name: 'invoice.pdf', contentType: 'application/pdf', content: pdf() }]);
    const [row] = await settled(ws.tenantId, ticketId, 1);
    expect(row).toMatchObject({ name: 'invoice.pdf', state: 'failed', sha256: null });
    expect(row!.reason).toContain('HTTP 500');
    const t = await ticketDetail(ctx, ws, ticketId);
    expect(t.events.map((e) => e.kind)).toEqual(['inbound_email']);
  });

  test('an access token the provider stopped accepting is refreshed by the worker, which then fetches the file', async () => {
    const { ws, mailbox } = await mailboxFor(p);
    const invoice = pdf();
    // The poll works with the stored token; the provider refuses it from then on (revoked early), so the files
    // worker gets a 401 and must refresh through the mailbox service, as polling would.
    const { access } = await h.tokens(ws.tenantId);
    double.deliver(p, mailbox, { from: `cust.${tag()}@customer.test`, subject: 'Refreshed', text: 'File attached.', messageId: `${tag()}@mail.customer.test`, attachments: [{ name: 'invoice.pdf', contentType: 'application/pdf', content: invoice }] });
    await ctx.runtime.queues.queue('files').pause();
    try {
      await h.poll(ws.tenantId);
      double.expireAccessTokens(p, mailbox);
    } finally {
      await ctx.runtime.queues.queue('files').resume();
    }
    const ticket = (await h.tickets(ws.tenantId)).at(-1)!;
    const [row] = await settled(ws.tenantId, ticket.id, 1);
    expect(row).toMatchObject({ state: 'stored', sha256: sha(invoice) });
    expect((await h.tokens(ws.tenantId)).access).not.toBe(access);
  });
});

describe('microsoft: attachments that are not files', () => {
  test('an item attachment and a reference attachment are listed as skipped with the reason, beside the file that is stored', async () => {
    const { ws, mailbox } = await mailboxFor('microsoft');
    const invoice = pdf();
    const { ticketId } = await pollMessage('microsoft', ws, mailbox, [
      { name: 'Delivery schedule', kind: 'item' },
      { name: 'Quarterly.xlsx', kind: 'reference' },
      { name: 'invoice.pdf', contentType: 'application/pdf', content: invoice },
    ]);
    const rows = await settled(ws.tenantId, ticketId, 3);
    expect(rows.map((r) => [r.name, r.state])).toEqual([
      ['Delivery schedule', 'skipped'],
      ['Quarterly.xlsx', 'skipped'],
      ['invoice.pdf', 'stored'],
    ]);
    expect(rows[0]!.reason).toContain('Outlook item');
    expect(rows[1]!.reason).toContain('link to a file');
    expect(rows[2]!.sha256).toBe(sha(invoice));
  });
});

describe('Gmail attachment answers are decoded as they stream', () => {
  const run = async (chunks: string[]) => {
    const { Readable } = await import('node:stream');
    const out: Buffer[] = [];
    const stream = Readable.from(chunks.map((c) => Buffer.from(c, 'latin1'))).pipe(gmailAttachmentBody());
    for await (const c of stream as AsyncIterable<Buffer>) out.push(c);
    return Buffer.concat(out);
  };
  /** The text cut into pieces of 1 to 7 characters, so every boundary (inside names, escapes, quanta) is crossed. */
  const pieces = (text: string) => {
    const out: string[] = [];
    for (let i = 0, n = 1; i < text.length; i += n, n = (n % 7) + 1) out.push(text.slice(i, i + n));
    return out;
  };

  test('the bytes come out whole whatever the chunking and member order, other members (with escapes and nesting) skipped', async () => {
    const file = randomBytes(10_001);
    const data = file.toString('base64url');
    for (const text of [
      JSON.stringify({ size: file.length, data }),
      JSON.stringify({ data, size: file.length }),
      `{ "attachmentId" : "AN\\"Gj\\\\dJ{[" , "extra": {"a": [1, "]}", {"b": null}]}, "size":${file.length},\n "data": "${data}=" }\n`,
    ]) {
      expect(sha(await run(pieces(text)))).toBe(sha(file));
      expect(sha(await run([text]))).toBe(sha(file));
    }
  });

  test('an answer that is not a MessagePartBody fails the file with the reason', async () => {
    const data = randomBytes(30).toString('base64url');
    await expect(run([JSON.stringify({ size: 31, data })])).rejects.toThrow('declared 31 bytes');
    await expect(run([`{"data":"${data.slice(0, 8)}\\u0041"}`])).rejects.toThrow('outside base64url');
    await expect(run([`{"data":"${data}+/"}`])).rejects.toThrow('outside base64url');
    await expect(run([`{"size":"30","data":"${data}"}`])).rejects.toThrow('`size`');
    await expect(run([`{"size":30}`])).rejects.toThrow('no `data`');
    await expect(run([`{"data":"${data}"`])).rejects.toThrow('ended before');
    await expect(run([`["${data}"]`])).rejects.toThrow('not a JSON object');
    await expect(run([`{"data":"${data}"} {}`])).rejects.toThrow('after the object');
    await expect(run([`{"pad":"${'x'.repeat(70_000)}","data":"${data}"}`])).rejects.toThrow('besides the data');
  });
});

describe('the mail-provider double serves attachments as the providers document them', () => {
  test('Gmail attachments.get: the MessagePartBody with base64url data for a valid token, 401 for a bad one, 404 for unknown ids', async () => {
    const { ws, mailbox } = await mailboxFor('google');
    const file = randomBytes(3000);
    const id = double.deliver('google', mailbox, { from: `c.${tag()}@customer.test`, subject: 's', text: 't', messageId: `${tag()}@x.test`, attachments: [{ name: 'a.bin', content: file }] });
    const { access } = await h.tokens(ws.tenantId);
    const api = `${double.env.GOOGLE_GMAIL_API_URL}/gmail/v1/users/me/messages`;
    const auth = { authorization: `Bearer ${access}` };
    const msg = (await (await fetch(`${api}/${id}?format=full`, { headers: auth })).json()) as { payload: { parts: { filename: string; body: { attachmentId?: string; size: number } }[] } };
    const part = msg.payload.parts.find((x) => x.filename === 'a.bin')!;
    expect(part.body).toEqual({ attachmentId: expect.any(String), size: file.length });
    const ok = await fetch(`${api}/${id}/attachments/${part.body.attachmentId}`, { headers: auth });
    expect(ok.status).toBe(200);
    const body = (await ok.json()) as { size: number; data: string };
    expect(body.size).toBe(file.length);
    expect(Buffer.from(body.data, 'base64url').equals(file)).toBe(true);
    expect((await fetch(`${api}/${id}/attachments/${part.body.attachmentId}`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    expect((await fetch(`${api}/${id}/attachments/unknown`, { headers: auth })).status).toBe(404);
    expect((await fetch(`${api}/unknown/attachments/${part.body.attachmentId}`, { headers: auth })).status).toBe(404);
  });

  test('Graph: the attachments list with @odata.type (contentBytes only when not selected away), raw $value, 401 for a bad token, 404 for unknown ids', async () => {
    const { ws, mailbox } = await mailboxFor('microsoft');
    const file = randomBytes(3000);
    const id = double.deliver('microsoft', mailbox, { from: `c.${tag()}@customer.test`, subject: 's', text: 't', messageId: `${tag()}@x.test`, attachments: [{ name: 'a.bin', content: file }, { name: 'Item', kind: 'item' }] });
    const { access } = await h.tokens(ws.tenantId);
    const api = `${double.env.MICROSOFT_GRAPH_API_URL}/v1.0/me/messages/${encodeURIComponent(id)}/attachments`;
    const auth = { authorization: `Bearer ${access}` };
    const all = (await (await fetch(api, { headers: auth })).json()) as { value: Record<string, unknown>[] };
    expect(all.value.map((a) => a['@odata.type'])).toEqual(['#microsoft.graph.fileAttachment', '#microsoft.graph.itemAttachment']);
    expect(Buffer.from(String(all.value[0]!.contentBytes), 'base64').equals(file)).toBe(true);
    const selected = (await (await fetch(`${api}?$select=id,name,size`, { headers: auth })).json()) as { value: Record<string, unknown>[] };
    expect(selected.value[0]).toEqual({ '@odata.type': '#microsoft.graph.fileAttachment', '@odata.mediaContentType': 'application/octet-stream', id: all.value[0]!.id, name: 'a.bin', size: file.length });
    const raw = await fetch(`${api}/${encodeURIComponent(String(all.value[0]!.id))}/$value`, { headers: auth });
    expect(raw.status).toBe(200);
    expect(Buffer.from(await raw.arrayBuffer()).equals(file)).toBe(true);
    expect((await fetch(`${api}/${encodeURIComponent(String(all.value[0]!.id))}/$value`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    expect((await fetch(`${api}/unknown/$value`, { headers: auth })).status).toBe(404);
    expect((await fetch(`${double.env.MICROSOFT_GRAPH_API_URL}/v1.0/me/messages/unknown/attachments`, { headers: auth })).status).toBe(404);
  });
});
