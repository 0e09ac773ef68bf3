import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { EICAR, EICAR_SIGNATURE, sharedClamd, stopSharedClamd, type OwnClamd } from './helpers/clamd';

/**
 * Issue 34, "EICAR is quarantined by a real clamd": the service configured with CLAMAV_HOST/CLAMAV_PORT, as a
 * deployment would, against the clamd the test suite starts (Debian's clamav-daemon, a local EICAR signature).
 */
let ctx: TestContext;
let ws: Workspace;
let clamd: OwnClamd;

beforeAll(async () => {
  clamd = await sharedClamd();
  ctx = await startTestApp({ env: { CLAMAV_HOST: clamd.host, CLAMAV_PORT: String(clamd.port) } });
  ws = await createWorkspace(ctx);
}, 60_000);
afterAll(async () => {
  await ctx?.close();
  await stopSharedClamd();
});

const upload = (bytes: Buffer, filename: string) => ctx.http.post('/v1/uploads').set(bearer(ws.ownerKey)).attach('file', bytes, { filename, contentType: 'text/plain' });

test('an uploaded EICAR file is quarantined by the real clamd: infected with its signature, never downloadable', async () => {
  const res = await upload(EICAR, 'invoice.txt');
  expect(res.status).toBe(201);
  expect(res.body.attachment).toMatchObject({ state: 'infected', reason: EICAR_SIGNATURE });
  const dl = await ctx.http.get(`/v1/attachments/${res.body.attachment.id}/content`).set(bearer(ws.ownerKey));
  expect(dl.status).toBe(409);
  expect(dl.body.code).toBe('attachment_unavailable');
  expect(String(dl.text)).not.toContain('EICAR-STANDARD');
});

test('a clean file passes the same clamd and downloads as sent', async () => {
  const bytes = Buffer.from('Order 4471: two blue mugs, one red teapot.\n');
  const res = await upload(bytes, 'order.txt');
  expect(res.status).toBe(201);
  expect(res.body.attachment.state).toBe('stored');
  const dl = await ctx.http.get(`/v1/attachments/${res.body.attachment.id}/content`).set(bearer(ws.ownerKey)).buffer(true);
  expect(dl.status).toBe(200);
  expect(Buffer.from(dl.text ?? dl.body)).toEqual(bytes);
});
