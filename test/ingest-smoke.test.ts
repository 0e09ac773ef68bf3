import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { emailPayload, smsPayload } from './helpers/payloads';

let ctx: TestContext;
let ws: Workspace;
beforeAll(async () => {
  ctx = await startTestApp();
  await ctx.startWorkers();
  ws = await createWorkspace(ctx);
  await ctx.http.put('/v1/channels/email').set(bearer(ws.ownerKey)).send({ config: { inbound_address: 'support@acme.test' } }).expect(200);
  await ctx.http.put('/v1/channels/sms').set(bearer(ws.ownerKey)).send({ config: { phone_number: '+15550001111', auth_token: 'secret-token' } }).expect(200);
});
afterAll(async () => {
  await ctx.close();
});

test('an email creates a ticket, its redelivery is a duplicate, and a reply threads', async () => {
  const first = emailPayload({});
  const a = await ctx.http.post('/v1/ingest/email').send({ tenant_id: ws.tenantId, payload: first });
  expect(a.status).toBe(200);
  expect(a.body).toMatchObject({ channel: 'email', was_created: true, was_duplicate: false });
  const again = await ctx.http.post('/v1/ingest/email').send({ tenant_id: ws.tenantId, payload: first });
  expect(again.body).toMatchObject({ ticket_id: a.body.ticket_id, was_created: false, was_duplicate: true });
  const sms = await ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: smsPayload({}) });
  expect(sms.body).toMatchObject({ channel: 'sms', was_created: true });
  const sms2 = await ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: smsPayload({}) });
  expect(sms2.body).toMatchObject({ ticket_id: sms.body.ticket_id, was_created: false, was_duplicate: false });
});
