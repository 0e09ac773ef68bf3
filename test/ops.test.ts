import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startTestApp, type TestContext } from './helpers/context';
import { createWorkspace } from './helpers/factories';
import { eventually } from './helpers/wait';
import { rawOf, zendeskEvent } from './helpers/webhooks';
import { useTestApp } from './helpers/use-test-app';

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('operator endpoints with OPS_USER / OPS_PASSWORD set', () => {
  const { ctx } = useTestApp({ env: { OPS_USER: 'ops', OPS_PASSWORD: 'correct horse battery staple' } });

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
    for (const q of ['ingest', 'webhooks', 'mailbox', 'outbound', 'rollups', 'maintenance', 'events', 'deliveries', 'files']) {
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
    expect(names).toEqual(['deliveries', 'events', 'files', 'ingest', 'mailbox', 'maintenance', 'outbound', 'rollups', 'webhooks']);
  });
});

describe('operator pages against framing and cross-site requests', () => {
  let ctx: TestContext;
  const auth = basic('ops', 'pw-frame-pw');
  beforeAll(async () => {
    ctx = await startTestApp({ env: { OPS_USER: 'ops', OPS_PASSWORD: 'pw-frame-pw' } });
  });
  afterAll(async () => {
    await ctx.close();
  });

  const host = () => `127.0.0.1:${(ctx.server.address() as { port: number }).port}`;
  const pause = (headers: Record<string, string>) => {
    let req = ctx.http.put('/admin/queues/api/queues/rollups/pause').set('Authorization', auth);
    for (const [k, v] of Object.entries(headers)) req = req.set(k, v);
    return req;
  };
  const paused = () => ctx.runtime.queues.queue('rollups').isPaused();

  test.each([
    ['the dashboard', '/admin/queues', auth],
    ['a dashboard API read', '/admin/queues/api/queues', auth],
    ['a refused dashboard request', '/admin/queues', undefined],
    ['the metrics', '/metrics', auth],
    ['a refused metrics request', '/metrics', undefined],
  ])('%s is sent with X-Frame-Options DENY and CSP frame-ancestors none', async (_what, path, credential) => {
    const req = ctx.http.get(path);
    const res = credential ? await req.set('Authorization', credential) : await req;
    expect(res.status).toBe(credential ? 200 : 401);
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['content-security-policy']).toBe("frame-ancestors 'none'");
  });

  test.each([
    ['Sec-Fetch-Site cross-site', { 'Sec-Fetch-Site': 'cross-site' }],
    ['Sec-Fetch-Site same-site (a sibling subdomain)', { 'Sec-Fetch-Site': 'same-site' }],
    ['a foreign Origin', { Origin: 'https://evil.example' }],
    ['Origin null (a sandboxed frame or data: page)', { Origin: 'null' }],
    ['a same-origin claim with a foreign Origin', { 'Sec-Fetch-Site': 'same-origin', Origin: 'https://evil.example' }],
  ])('a state-changing dashboard request with %s is refused 403 cross_site_request and changes nothing', async (_what, headers) => {
    const res = await pause(headers as Record<string, string>);
    expect(res.status).toBe(403);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 403, code: 'cross_site_request' });
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(await paused()).toBe(false);
  });

  test('a cross-site request is refused even without the credential (no 401 challenge to answer)', async () => {
    const res = await ctx.http.post('/admin/queues/api/queues/rollups/add').set('Sec-Fetch-Site', 'cross-site').send({ name: 'x', data: {} });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('cross_site_request');
  });

  test('the dashboard itself (same-origin, or a non-browser client) may still change state; reads are never checked', async () => {
    expect((await ctx.http.get('/admin/queues/api/queues').set('Authorization', auth).set('Sec-Fetch-Site', 'cross-site')).status).toBe(200);
    const same = await pause({ 'Sec-Fetch-Site': 'same-origin', Origin: `http://${host()}` });
    expect(same.status).toBeLessThan(300);
    expect(await paused()).toBe(true);
    const cli = await ctx.http.put('/admin/queues/api/queues/rollups/resume').set('Authorization', auth);
    expect(cli.status).toBeLessThan(300);
    expect(await paused()).toBe(false);
  });
});

describe('job and dedupe metrics from worker processes', () => {
  let ctx: TestContext;
  const auth = basic('ops', 'pw-pw-pw-pw');
  beforeAll(async () => {
    ctx = await startTestApp({ env: { OPS_USER: 'ops', OPS_PASSWORD: 'pw-pw-pw-pw', WORKER_METRICS_PUSH_MS: '100' } });
    await ctx.startWorkers();
  });
  afterAll(async () => {
    await ctx.close();
  });

  test('a redelivery counts one dedupe hit for its route; a first delivery counts none', async () => {
    const ws = await createWorkspace(ctx);
    await ctx.http.put('/v1/channels/sms').set('Authorization', `Bearer ${ws.ownerKey}`).send({ config: {} }).expect(200);
    const send = () =>
      ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: { MessageSid: 'SM-dedupe-1', From: '+15550009', To: '+15550002', Body: 'hi', AccountSid: 'AC1' } });
    expect((await send()).body.was_duplicate).toBe(false);
    const before = await ctx.http.get('/metrics').set('Authorization', auth);
    expect(before.text).not.toMatch(/helpdesk_dedupe_hits_total\{route="ingest_channel_message"\}/);
    expect((await send()).body.was_duplicate).toBe(true);
    const after = await ctx.http.get('/metrics').set('Authorization', auth);
    expect(after.text).toMatch(/helpdesk_dedupe_hits_total\{route="ingest_channel_message"\} 1\n/);
  });

  test('a redelivered webhook event counts one dedupe hit for the webhook route', async () => {
    const ws = await createWorkspace(ctx);
    const integration = await ctx.http.post('/v1/integrations').set('Authorization', `Bearer ${ws.ownerKey}`).send({ provider: 'zendesk', name: 'Zendesk' }).expect(201);
    const raw = rawOf(zendeskEvent());
    const deliver = () => ctx.http.post(`/v1/webhooks/zendesk/${integration.body.id}`).set('Content-Type', 'application/json').send(raw);
    expect((await deliver()).status).toBe(200);
    expect((await ctx.http.get('/metrics').set('Authorization', auth)).text).not.toMatch(/helpdesk_dedupe_hits_total\{route="receive_webhook"\}/);
    expect((await deliver()).status).toBe(200);
    expect((await ctx.http.get('/metrics').set('Authorization', auth)).text).toMatch(/helpdesk_dedupe_hits_total\{route="receive_webhook"\} 1\n/);
  });

  test('jobs run by a worker show as duration histograms and failure counters per queue, labelled by worker', async () => {
    const ws = await createWorkspace(ctx);
    await ctx.http.put('/v1/channels/sms').set('Authorization', `Bearer ${ws.ownerKey}`).send({ config: {} }).expect(200);
    await ctx.http
      .post('/v1/ingest/sms')
      .send({ tenant_id: ws.tenantId, payload: { MessageSid: 'SM-jobs-1', From: '+15550019', To: '+15550002', Body: 'hi', AccountSid: 'AC1' } })
      .expect(200);
    // A payload the job's schema refuses fails on its only attempt.
    await ctx.runtime.queues.queue('maintenance').add('audit.prune', { retention_days: 'not a number' }, { attempts: 1 });
    const text = await eventually(async () => {
      const res = await ctx.http.get('/metrics').set('Authorization', auth);
      return /helpdesk_job_failures_total\{[^}]*queue="maintenance"/.test(res.text) ? res.text : undefined;
    }, 10_000, 'the failure to be published');
    expect(text).toMatch(/helpdesk_job_duration_seconds_count\{[^}]*queue="ingest",job="ingest.batch",outcome="completed"[^}]*worker="[^"]+"[^}]*\} [1-9]/);
    expect(text).toMatch(/helpdesk_job_duration_seconds_bucket\{[^}]*le="\+Inf"[^}]*queue="ingest"/);
    expect(text).toMatch(/helpdesk_job_failures_total\{[^}]*queue="maintenance",job="audit.prune",final="true"[^}]*\} 1\n/);
    expect(text).not.toMatch(/helpdesk_job_failures_total\{[^}]*queue="ingest"/);
  });

  test('the Grafana dashboard in docs/ is importable JSON whose every query names a metric this /metrics exports', async () => {
    const dashboard = JSON.parse(readFileSync(path.join(__dirname, '..', 'docs', 'grafana-dashboard.json'), 'utf8')) as {
      uid: string;
      panels: { targets: { expr: string }[] }[];
    };
    expect(dashboard.uid).toBe('helpdesk-api');
    const scraped = (await ctx.http.get('/metrics').set('Authorization', auth)).text;
    const exported = new Set([...scraped.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    const used = dashboard.panels.flatMap((p) => p.targets.flatMap((t) => [...t.expr.matchAll(/\b((?:helpdesk|process)_[a-z_]+)/g)].map((m) => m[1]!)));
    expect(new Set(used)).toEqual(new Set([...used].filter((name) => exported.has(name.replace(/_(bucket|count|sum)$/, '')) || exported.has(name))));
    for (const name of ['helpdesk_job_duration_seconds', 'helpdesk_job_failures_total', 'helpdesk_dedupe_hits_total', 'helpdesk_queue_jobs']) {
      expect(used.some((u) => u.startsWith(name))).toBe(true);
    }
  });
});

describe('operator endpoints without OPS_USER / OPS_PASSWORD', () => {
  const { ctx } = useTestApp();

  test('are not served at all (404), and a log line says how to enable them', async () => {
    expect((await ctx.http.get('/metrics')).status).toBe(404);
    expect((await ctx.http.get('/admin/queues')).status).toBe(404);
    expect(ctx.logs.lines.some((l: string) => /ops endpoints disabled: set OPS_USER and OPS_PASSWORD/.test(l))).toBe(true);
  });
});
