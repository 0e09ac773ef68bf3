/**
 * Web chat from a browser (issue 18, part 6): `POST /v1/ingest/web_chat?token=…` answers CORS preflight and
 * requests for the connection's `allowed_origins`; other origins get no CORS headers, so the browser does
 * not let their pages post or read.
 */
import { connect } from './helpers/ingest';
import { webChatPayload } from './helpers/payloads';
import { useTestApp } from './helpers/use-test-app';

let token: string;
const SHOP = 'https://shop.northwind.example';

const { ctx, ws } = useTestApp({ workers: true, workspaces: 1 });
beforeAll(async () => {
  token = (await connect(ctx, ws, 'web_chat', { config: { allowed_origins: [SHOP, 'https://help.northwind.example/'] } })).details.inbound_token!;
});

const preflight = (origin: string, t = token) =>
  ctx.http
    .options(`/v1/ingest/web_chat?token=${encodeURIComponent(t)}`)
    .set({ Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type' });
const post = (origin: string) => ctx.http.post(`/v1/ingest/web_chat?token=${encodeURIComponent(token)}`).set('Origin', origin).send({ payload: webChatPayload() });

test('a preflight from an allowed origin is answered with that origin, POST and Content-Type', async () => {
  const res = await preflight(SHOP);
  expect(res.status).toBe(204);
  expect(res.headers['access-control-allow-origin']).toBe(SHOP);
  expect(res.headers['access-control-allow-methods']).toBe('POST');
  expect(res.headers['access-control-allow-headers']).toMatch(/content-type/i);
  expect(res.headers.vary).toMatch(/Origin/);
  // Listed with a trailing slash, matched without: an Origin never has one.
  expect((await preflight('https://help.northwind.example')).headers['access-control-allow-origin']).toBe('https://help.northwind.example');
});

test('the message itself from an allowed origin is written and readable by the page', async () => {
  const res = await post(SHOP);
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ channel: 'web_chat', was_created: true });
  expect(res.headers['access-control-allow-origin']).toBe(SHOP);
});

test('another origin, or an unknown token, gets no CORS headers (preflight and request)', async () => {
  for (const res of [await preflight('https://evil.example'), await preflight(SHOP, 'itk_not-a-token'), await post('https://evil.example')]) {
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(res.headers['access-control-allow-methods']).toBeUndefined();
  }
  // A different scheme or port is another origin.
  expect((await preflight('http://shop.northwind.example')).headers['access-control-allow-origin']).toBeUndefined();
  expect((await preflight('https://shop.northwind.example:8443')).headers['access-control-allow-origin']).toBeUndefined();
});

test('other channels and the authenticated API answer no CORS at all', async () => {
  const sms = await ctx.http.options('/v1/ingest/sms').set({ Origin: SHOP, 'Access-Control-Request-Method': 'POST' });
  expect(sms.headers['access-control-allow-origin']).toBeUndefined();
  const api = await ctx.http.get('/v1/members').set('Origin', SHOP);
  expect(api.headers['access-control-allow-origin']).toBeUndefined();
});
