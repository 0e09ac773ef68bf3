import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { emailPayload, smsPayload } from './helpers/payloads';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workers: true, workspaces: 1 });
beforeAll(async () => {
  await ctx.http.put('/v1/channels/email').set(bearer(ws.ownerKey)).send({ config: { inbound_address: 'support@acme.test' } }).expect(200);
  await ctx.http.put('/v1/channels/sms').set(bearer(ws.ownerKey)).send({ config: { phone_number: '+15550001111', auth_token: 'secret-token' } }).expect(200);
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

describe('when no worker answers in time', () => {
  let slow: TestContext;
  let w: Workspace;
  beforeAll(async () => {
    slow = await startTestApp({ env: { JOB_WAIT_MS: '300' } });
    w = await createWorkspace(slow);
    await slow.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send({ config: {} }).expect(200);
  });
  afterAll(async () => {
    await slow.close();
  });

  test('answers 202 accepted with the provider message ids, and the message is still processed exactly once', async () => {
    const payload = smsPayload({});
    const res = await slow.http.post('/v1/ingest/sms').send({ tenant_id: w.tenantId, payload });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'accepted', channel: 'sms', provider_message_ids: [payload.MessageSid] });
    expect(typeof res.body.job_id).toBe('string');
    await slow.startWorkers();
    let listed: { provider_message_id: string; ticket_id: string | null }[] = [];
    for (let i = 0; i < 50 && listed.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      listed = (await slow.http.get('/v1/ingest/deliveries').set(bearer(w.ownerKey))).body.deliveries;
    }
    expect(listed.map((d) => d.provider_message_id)).toEqual([payload.MessageSid]);
    expect(listed[0]!.ticket_id).not.toBeNull();
    const again = await slow.http.post('/v1/ingest/sms').send({ tenant_id: w.tenantId, payload });
    expect(again.body).toMatchObject({ ticket_id: listed[0]!.ticket_id, was_duplicate: true });
  });
});
