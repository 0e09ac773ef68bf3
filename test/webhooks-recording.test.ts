/**
 * Webhook intake, recorded exactly once: redeliveries, reruns of a job, concurrent jobs, payloads PostgreSQL
 * cannot store, and reading the transcripts (see webhooks.test.ts for the rest of the intake).
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { startTestApp, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { zendeskEvent, zendeskTrigger, type WebhookProvider } from './helpers/webhooks';
import { ISO, KITS, NOTHING, PROVIDERS, countRows, createIntegration, deliver, delivery, diff, expectEventOf, getTranscript, hex, newSecret, recorded, type Integration, useWebhookSuite } from './helpers/webhook-intake';

const { ctx, ws, ws2, signed, open } = useWebhookSuite();

// -------------------------------------------------------------------------------------- 5. exactly once

describe('exactly once', () => {
  describe.each(PROVIDERS.map((p) => [p]))('%s', (p) => {
    const kit = KITS[p];

    test('a redelivered event (re-signed later) returns the same transcript and adds nothing', async () => {
      const ticketId = kit.newTicketId();
      const d = kit.ticket(ticketId);
      const first = await recorded(ctx, signed[p], d);
      const before = await countRows(ctx);
      for (let i = 1; i <= 3; i++) {
        // Signed at another time: the Zendesk/Front timestamp headers (and so the signatures) differ.
        const again = await deliver(ctx, signed[p], d, { now: new Date(Date.now() - i * 2000) });
        expect(again.status).toBe(200);
        expect(again.body).toEqual(first);
      }
      expect(diff(await countRows(ctx), before)).toEqual(NOTHING);
      const ledger = await ctx.db.selectFrom('webhook_deliveries').selectAll().where('integration_id', '=', signed[p].id).where('transcript_id', '=', first.transcript_id).execute();
      expect(ledger).toHaveLength(1);
      expect(ledger[0]).toMatchObject({ duplicate_count: 3, external_ticket_id: ticketId });
      expect((await getTranscript(ctx, ws.ownerKey, first.transcript_id)).event_count).toBe(1);
    });

    test('50 concurrent deliveries of one event: all 200, one transcript id, exactly one event; another event then adds one', async () => {
      const ticketId = kit.newTicketId();
      const d = kit.ticket(ticketId);
      const before = await countRows(ctx, signed[p].id);
      const rs = await Promise.all(Array.from({ length: 50 }, () => deliver(ctx, signed[p], d)));
      expect(rs.map((r) => r.status)).toEqual(Array(50).fill(200));
      expect(new Set(rs.map((r) => r.body.transcript_id)).size).toBe(1);
      for (const r of rs) expect(r.body).toEqual({ status: 'ok', transcript_id: rs[0]!.body.transcript_id, external_ticket_id: ticketId });
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 1, transcripts: 1, events: 1 });
      const t = await getTranscript(ctx, ws.ownerKey, rs[0]!.body.transcript_id);
      expect(t.event_count).toBe(1);
      expect(t.events).toHaveLength(1);
      expectEventOf(t.events[0]!, d);

      const next = kit.ticket(ticketId, 1);
      const r2 = await recorded(ctx, signed[p], next);
      expect(r2.transcript_id).toBe(rs[0]!.body.transcript_id);
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 2, transcripts: 1, events: 2 });
      expect((await getTranscript(ctx, ws.ownerKey, r2.transcript_id)).event_count).toBe(2);
    });
  });

  test('helpscout: one signed body replayed 24× under 24 different (unsigned) event headers records one event; another body is a new event', async () => {
    const kit = KITS.helpscout;
    const ticketId = kit.newTicketId();
    const d = kit.ticket(ticketId);
    const before = await countRows(ctx, signed.helpscout.id);
    const first = await recorded(ctx, signed.helpscout, d);
    const names = ['convo.assigned', 'convo.moved', 'convo.status', 'convo.tags', 'convo.merged', 'convo.deleted'];
    for (let i = 1; i < 24; i++) {
      const res = await deliver(ctx, signed.helpscout, { ...d, event: `${names[i % names.length]!}${i}` });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'ok', transcript_id: first.transcript_id });
    }
    expect(diff(await countRows(ctx, signed.helpscout.id), before)).toEqual({ deliveries: 1, transcripts: 1, events: 1 });
    const ledger = await ctx.db.selectFrom('webhook_deliveries').select('duplicate_count').where('integration_id', '=', signed.helpscout.id).where('transcript_id', '=', first.transcript_id).execute();
    expect(ledger.map((r) => Number(r.duplicate_count))).toEqual([23]);
    // The first delivery's event name is the one recorded.
    expect((await getTranscript(ctx, ws.ownerKey, first.transcript_id)).events.map((e) => e.type)).toEqual(['convo.created']);

    const changed = { ...d.body, status: 'closed' };
    const rebodied = await recorded(ctx, signed.helpscout, delivery(changed, { event: d.event! }));
    expect(rebodied.transcript_id).toBe(first.transcript_id);
    expect(diff(await countRows(ctx, signed.helpscout.id), before)).toEqual({ deliveries: 2, transcripts: 1, events: 2 });
  });

  test('zendesk/front: the dedupe key is the provider event id, per integration', async () => {
    for (const p of ['zendesk', 'front'] as const) {
      const kit = KITS[p];
      const d = kit.ticket(kit.newTicketId());
      const a = await recorded(ctx, signed[p], d);
      // The same event at another integration of the workspace is that integration's own first sight.
      const b = await recorded(ctx, open[p], d);
      expect(b.transcript_id).not.toBe(a.transcript_id);
      expect((await getTranscript(ctx, ws.ownerKey, b.transcript_id)).event_count).toBe(1);
    }
  });
});

describe('a webhooks.batch job run again after a crash', () => {
  test('answers as the first run did and counts each copy once (the copies ledger), however often the job reruns', async () => {
    const i = signed.zendesk;
    const item = (id: string) => ({
      id,
      tenant_id: ws.tenantId,
      integration_id: i.id,
      dedupe_key: `evt-rerun-${hex(4)}`,
      provider_event_id: null,
      external_ticket_id: `rerun-${hex(4)}`,
      type: 'zen:event-type:ticket.created',
      occurred_at: null,
      status: 'open',
      subject: 'Rerun',
      priority: null,
      requester: null,
      raw: '{}',
    });
    const original = item(`corr-${hex(6)}`);
    const copy = { ...original, id: `corr-${hex(6)}` };
    const firstRun = await ctx.workerServices.webhookProcessor.processBatch([original, copy]);
    const retry = await ctx.workerServices.webhookProcessor.processBatch([original, copy]);
    const again = await ctx.workerServices.webhookProcessor.processBatch([copy]);
    expect(retry).toEqual(firstRun);
    expect(again).toEqual([firstRun[1]]);
    expect(firstRun.map((r) => (r.value as { was_duplicate: boolean }).was_duplicate)).toEqual([false, true]);
    const [row] = await ctx.db.selectFrom('webhook_deliveries').select('duplicate_count').where('integration_id', '=', i.id).where('dedupe_key', '=', original.dedupe_key).execute();
    expect(Number(row!.duplicate_count)).toBe(1);
  });
});

describe('exactly once across concurrent jobs (INBOUND_WEBHOOK_BATCH_MAX=1: every delivery its own job)', () => {
  let jctx: TestContext;
  let jws: Workspace;
  const integrations = {} as Record<WebhookProvider, Integration>;
  beforeAll(async () => {
    jctx = await startTestApp({ env: { INBOUND_WEBHOOK_BATCH_MAX: '1' } });
    await jctx.startWorkers();
    jws = await createWorkspace(jctx);
    for (const p of PROVIDERS) integrations[p] = await createIntegration(jctx, jws, p, newSecret());
  });
  afterAll(async () => {
    await jctx?.close();
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: 50 concurrent copies of one event in 50 jobs → one event, one transcript, 49 duplicates counted', async (p) => {
    const kit = KITS[p];
    const ticketId = kit.newTicketId();
    const d = kit.ticket(ticketId);
    const rs = await Promise.all(Array.from({ length: 50 }, () => deliver(jctx, integrations[p], d)));
    expect(rs.map((r) => r.status)).toEqual(Array(50).fill(200));
    expect(new Set(rs.map((r) => r.body.transcript_id)).size).toBe(1);
    const t = await getTranscript(jctx, jws.ownerKey, rs[0]!.body.transcript_id);
    expect(t).toMatchObject({ external_ticket_id: ticketId, event_count: 1 });
    expect(t.events).toHaveLength(1);
    const ledger = await jctx.db.selectFrom('webhook_deliveries').selectAll().where('transcript_id', '=', t.id).execute();
    expect(ledger.map((l) => l.duplicate_count)).toEqual([49]);
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: 20 different events about one new ticket, concurrently in 20 jobs → one transcript holding all 20', async (p) => {
    const kit = KITS[p];
    const ticketId = kit.newTicketId();
    const ds = Array.from({ length: 20 }, (_, v) => kit.ticket(ticketId, v));
    const rs = await Promise.all(ds.map((d) => deliver(jctx, integrations[p], d)));
    expect(rs.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(new Set(rs.map((r) => r.body.transcript_id)).size).toBe(1);
    const transcripts = await jctx.db.selectFrom('transcripts').selectAll().where('integration_id', '=', integrations[p].id).where('external_ticket_id', '=', ticketId).execute();
    expect(transcripts).toHaveLength(1);
    expect(transcripts[0]).toMatchObject({ id: rs[0]!.body.transcript_id, event_count: 20 });
    const t = await getTranscript(jctx, jws.ownerKey, transcripts[0]!.id);
    expect(t.events).toHaveLength(20);
    expect(t.events.map((e) => e.raw)).toEqual(expect.arrayContaining(ds.map((d) => d.body)));
  });
});

describe('payloads PostgreSQL cannot store as sent (NUL character, lone surrogate escape)', () => {
  let nctx: TestContext;
  let nws: Workspace;
  let integ: Integration;
  beforeAll(async () => {
    nctx = await startTestApp({ env: { JOB_WAIT_MS: '2000' } });
    await nctx.startWorkers();
    nws = await createWorkspace(nctx);
    integ = await createIntegration(nctx, nws, 'zendesk', newSecret());
  });
  afterAll(async () => {
    await nctx?.close();
  });

  test('answered 200 (recorded) or 400 (nothing written), never accepted and lost; innocent deliveries sent alongside are recorded', async () => {
    const kit = KITS.zendesk;
    // Valid JSON (RFC 8259 allows any escaped code point), but PostgreSQL refuses U+0000 in text and jsonb,
    // and unpaired surrogate escapes in jsonb.
    const poison = [
      delivery(zendeskTrigger({ title: 'Printer \u0000 jammed' })),
      delivery(zendeskEvent({ subject: 'Printer jammed \ud800' })),
    ];
    expect(poison[0]!.raw).toContain('\\u0000');
    expect(poison[1]!.raw).toContain('\\ud800');
    const innocents = Array.from({ length: 4 }, () => kit.ticket(kit.newTicketId()));
    const rs = await Promise.all([...poison, ...innocents].map((d) => deliver(nctx, integ, d)));
    const answers = rs.map((r) => `${r.status} ${r.body.status ?? r.body.code}`);
    // eslint-disable-next-line no-console
    console.log(`NUL / lone surrogate probe answers: ${answers.join(', ')}`);

    expect(rs.slice(poison.length).map((r) => r.status)).toEqual(Array(innocents.length).fill(200));
    for (const r of rs.slice(0, poison.length)) expect(['200 ok', '400 webhook_payload_invalid']).toContain(`${r.status} ${r.status === 200 ? r.body.status : r.body.code}`);
    const events = await sql<{ n: number }>`select count(*)::int as n from transcript_events`.execute(nctx.db);
    expect(events.rows[0]!.n).toBe(innocents.length + rs.slice(0, poison.length).filter((r) => r.status === 200).length);
  });
});

// ---------------------------------------------------------------------------------------------- 7. reading

describe('reading transcripts', () => {
  test('GET /v1/transcripts/{id} pages events newest first with limit and offset', async () => {
    const kit = KITS.zendesk;
    const ticketId = kit.newTicketId();
    const ds = [0, 1, 2, 3, 4].map((v) => kit.ticket(ticketId, v));
    let transcriptId = '';
    for (const d of ds) transcriptId = (await recorded(ctx, signed.zendesk, d)).transcript_id;
    const newestFirst = [...ds].reverse().map((d) => d.expected!.provider_event_id);

    const all = await getTranscript(ctx, ws.ownerKey, transcriptId);
    expect(all.event_count).toBe(5);
    expect(all.events.map((e) => e.provider_event_id)).toEqual(newestFirst);
    const p1 = await getTranscript(ctx, ws.ownerKey, transcriptId, '?limit=2');
    expect(p1).toMatchObject({ limit: 2, offset: 0, event_count: 5 });
    expect(p1.events.map((e) => e.provider_event_id)).toEqual(newestFirst.slice(0, 2));
    const p2 = await getTranscript(ctx, ws.ownerKey, transcriptId, '?limit=2&offset=2');
    expect(p2.events.map((e) => e.provider_event_id)).toEqual(newestFirst.slice(2, 4));
    const p3 = await getTranscript(ctx, ws.ownerKey, transcriptId, '?limit=2&offset=4');
    expect(p3.events.map((e) => e.provider_event_id)).toEqual(newestFirst.slice(4));
    expect((await getTranscript(ctx, ws.ownerKey, transcriptId, '?offset=5')).events).toEqual([]);
    for (const q of ['?limit=0', '?limit=201', '?offset=-1', '?limit=abc', '?sort=asc']) {
      expect({ q, status: (await ctx.http.get(`/v1/transcripts/${transcriptId}${q}`).set(bearer(ws.ownerKey))).status }).toEqual({ q, status: 400 });
    }
  });

  test('GET /v1/integrations/{id}/transcripts lists the integration\'s transcripts, most recently active first, paginated', async () => {
    const i = await createIntegration(ctx, ws, 'front', newSecret());
    const kit = KITS.front;
    const [t1, t2, t3] = [kit.newTicketId(), kit.newTicketId(), kit.newTicketId()];
    const a = await recorded(ctx, i, kit.ticket(t1, 0));
    const b = await recorded(ctx, i, kit.ticket(t2, 0));
    const c = await recorded(ctx, i, kit.ticket(t3, 0));
    await recorded(ctx, i, kit.ticket(t1, 1)); // t1 is now the most recently active

    const res = await ctx.http.get(`/v1/integrations/${i.id}/transcripts`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
    expect(res.body.next_cursor).toBeNull();
    expect(res.body.transcripts.map((t: { id: string }) => t.id)).toEqual([a.transcript_id, c.transcript_id, b.transcript_id]);
    expect(res.body.transcripts[0]).toEqual({ id: a.transcript_id, external_ticket_id: t1, event_count: 2, created_at: expect.stringMatching(ISO), updated_at: expect.stringMatching(ISO) });
    expect(res.body.transcripts[1]).toMatchObject({ external_ticket_id: t3, event_count: 1 });

    const first = await ctx.http.get(`/v1/integrations/${i.id}/transcripts?limit=1`).set(bearer(ws.ownerKey));
    const page = await ctx.http.get(`/v1/integrations/${i.id}/transcripts?limit=1&after=${first.body.next_cursor}`).set(bearer(ws.ownerKey));
    expect(page.body.transcripts.map((t: { id: string }) => t.id)).toEqual([c.transcript_id]);
    expect(page.body.next_cursor).toEqual(expect.any(String));
    const unknown = await ctx.http.get(`/v1/integrations/${randomUUID()}/transcripts`).set(bearer(ws.ownerKey));
    expect(unknown.status).toBe(404);
  });

  test('a viewer and a key with helpdesk-ingress:read may read; a key without it gets 403; another workspace gets 404', async () => {
    const kit = KITS.helpscout;
    const r = await recorded(ctx, signed.helpscout, kit.ticket(kit.newTicketId()));
    const viewer = await addMember(ctx, ws, 'viewer');
    const [reader, other] = await Promise.all([
      mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ingress:read'] }),
      mintKey(ctx, ws.ownerKey, { scopes: ['tickets:read', 'admin-resources:read'] }),
    ]);
    for (const token of [viewer.token, reader.secret]) {
      expect((await ctx.http.get(`/v1/transcripts/${r.transcript_id}`).set(bearer(token))).status).toBe(200);
      expect((await ctx.http.get(`/v1/integrations/${signed.helpscout.id}/transcripts`).set(bearer(token))).status).toBe(200);
    }
    for (const path of [`/v1/transcripts/${r.transcript_id}`, `/v1/integrations/${signed.helpscout.id}/transcripts`]) {
      const res = await ctx.http.get(path).set(bearer(other.secret));
      expect(res.status).toBe(403);
      expect((await ctx.http.get(path)).status).toBe(401);
      const foreign = await ctx.http.get(path).set(bearer(ws2.ownerKey));
      expect(foreign.status).toBe(404);
      expect(JSON.stringify(foreign.body)).not.toContain(r.external_ticket_id);
    }
    expect((await ctx.http.get(`/v1/transcripts/${randomUUID()}`).set(bearer(ws.ownerKey))).status).toBe(404);
    expect((await ctx.http.get('/v1/transcripts/not-a-uuid').set(bearer(ws.ownerKey))).status).toBe(404);
  });

  test('integration_id (the secret half of the webhook URL) is shown only to an admin who may list integrations, never to a viewer, editor or helpdesk-ingress:read key', async () => {
    const kit = KITS.helpscout;
    const r = await recorded(ctx, signed.helpscout, kit.ticket(kit.newTicketId()));
    const viewer = await addMember(ctx, ws, 'viewer');
    const editor = await addMember(ctx, ws, 'editor');
    const reader = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ingress:read'] });
    for (const token of [viewer.token, editor.token, reader.secret]) {
      for (const path of [`/v1/transcripts/${r.transcript_id}`, `/v1/integrations/${signed.helpscout.id}/transcripts`]) {
        const res = await ctx.http.get(path).set(bearer(token));
        expect(res.status).toBe(200);
        expect(res.body).not.toHaveProperty('integration_id');
        expect(JSON.stringify(res.body)).not.toContain(signed.helpscout.id);
      }
    }
    const admin = await addMember(ctx, ws, 'admin');
    for (const token of [admin.token, ws.ownerKey]) {
      expect((await getTranscript(ctx, token, r.transcript_id)).integration_id).toBe(signed.helpscout.id);
    }
  });
});

// =========================================================================== 3b. INBOUND_WEBHOOK_REQUIRE_SIGNATURE

