import { startTestApp, type TestContext } from './helpers/context';
import { createWorkspace } from './helpers/factories';

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('operator endpoints with OPS_USER / OPS_PASSWORD set', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await startTestApp({ env: { OPS_USER: 'ops', OPS_PASSWORD: 'correct horse battery staple' } });
  });
  afterAll(async () => {
    await ctx.close();
  });

  test.each(['/metrics', '/admin/queues'])('%s refuses a missing or wrong credential with 401 and a Basic challenge', async (path) => {
    for (const auth of [undefined, basic('ops', 'wrong'), basic('nobody', 'correct horse battery staple'), 'Bearer x']) {
      const req = ctx.http.get(path);
      const res = auth ? await req.set('Authorization', auth) : await req;
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Basic realm=/);
    }
  });

  test('/metrics serves Prometheus text: request durations by operation and status, and every queue\'s depth and oldest waiting age', async () => {
    const ws = await createWorkspace(ctx);
    await ctx.http.get('/v1/members').set('Authorization', `Bearer ${ws.ownerKey}`);
    const res = await ctx.http.get('/metrics').set('Authorization', basic('ops', 'correct horse battery staple'));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.text).toMatch(/helpdesk_http_request_duration_seconds_count\{[^}]*operation_id="list_members"[^}]*status="200"[^}]*\} [1-9]/);
    for (const q of ['ingest', 'webhooks', 'mailbox', 'outbound', 'rollups', 'maintenance']) {
      expect(res.text).toContain(`helpdesk_queue_jobs{queue="${q}",state="waiting"}`);
      expect(res.text).toContain(`helpdesk_queue_oldest_waiting_seconds{queue="${q}"}`);
    }
  });

  test('a 429 is counted as a throttle rejection of its route', async () => {
    const tctx = await startTestApp({ env: { OPS_USER: 'ops', OPS_PASSWORD: 'pw-pw-pw-pw', INGEST_RATE_POINTS: '1', JOB_WAIT_MS: '200' } });
    try {
      const ws = await createWorkspace(tctx);
      await tctx.http.put('/v1/channels/sms').set('Authorization', `Bearer ${ws.ownerKey}`).send({ config: {} });
      const send = (sid: string) =>
        tctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: { MessageSid: sid, From: '+15550001', To: '+15550002', Body: 'hi', AccountSid: 'AC1' } });
      await send('SM1');
      expect((await send('SM2')).status).toBe(429);
      const res = await tctx.http.get('/metrics').set('Authorization', basic('ops', 'pw-pw-pw-pw'));
      expect(res.text).toMatch(/helpdesk_throttle_rejections_total\{route="ingest_channel_message"\} 1/);
    } finally {
      await tctx.close();
    }
  });

  test('/admin/queues serves the Bull Board dashboard to the operator', async () => {
    const res = await ctx.http.get('/admin/queues').set('Authorization', basic('ops', 'correct horse battery staple'));
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/<html/i);
    const api = await ctx.http.get('/admin/queues/api/queues').set('Authorization', basic('ops', 'correct horse battery staple'));
    expect(api.status).toBe(200);
    const names = (api.body.queues as { name: string }[]).map((q) => q.name).sort();
    expect(names).toEqual(['ingest', 'mailbox', 'maintenance', 'outbound', 'rollups', 'webhooks']);
  });
});

describe('operator endpoints without OPS_USER / OPS_PASSWORD', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await startTestApp();
  });
  afterAll(async () => {
    await ctx.close();
  });

  test('are not served at all (404), and a log line says how to enable them', async () => {
    expect((await ctx.http.get('/metrics')).status).toBe(404);
    expect((await ctx.http.get('/admin/queues')).status).toBe(404);
    expect(ctx.logs.lines.some((l: string) => /ops endpoints disabled: set OPS_USER and OPS_PASSWORD/.test(l))).toBe(true);
  });
});

describe('the Grafana dashboard in docs/', () => {
  test('is importable JSON whose queries use only metrics /metrics exports', async () => {
    const { readFileSync } = await import('node:fs');
    const path = await import('node:path');
    const dashboard = JSON.parse(readFileSync(path.join(__dirname, '..', 'docs', 'grafana-dashboard.json'), 'utf8')) as {
      uid: string;
      panels: { targets: { expr: string }[] }[];
    };
    expect(dashboard.uid).toBe('helpdesk-api');
    const exported = ['helpdesk_http_request_duration_seconds', 'helpdesk_queue_jobs', 'helpdesk_queue_oldest_waiting_seconds', 'helpdesk_throttle_rejections_total', 'process_resident_memory_bytes'];
    const used = dashboard.panels.flatMap((p) => p.targets.flatMap((t) => [...t.expr.matchAll(/\b((?:helpdesk|process)_[a-z_]+)/g)].map((m) => m[1]!)));
    expect(used.length).toBeGreaterThan(0);
    for (const name of used) expect(exported.some((e) => name === e || name.startsWith(`${e}_`))).toBe(true);
  });
});
