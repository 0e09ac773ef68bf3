/**
 * Webhook intake under deployment settings and faults: INBOUND_WEBHOOK_REQUIRE_SIGNATURE, the per-integration
 * throttle, and a worker process SIGKILLed mid-burst (see webhooks.test.ts for the rest of the intake).
 */
import type { ChildProcess } from 'node:child_process';
import { sql } from 'kysely';
import type { Response } from 'supertest';
import { startTestApp, type TestContext } from './helpers/context';
import { createWorkspace, type Workspace } from './helpers/factories';
import { killGroup, killMidBurst, spawnWorker, workerStarted } from './helpers/processes';
import { eventually, sleep } from './helpers/wait';
import { type WebhookProvider } from './helpers/webhooks';
import { KITS, NOTHING, PROVIDERS, UUID, countRows, createIntegration, deliver, delivery, diff, expectEventOf, expectNothingWritten, getTranscript, headersFor, newSecret, plainHeaders, postRaw, type Delivery, type Integration } from './helpers/webhook-intake';
import { queuePrefix } from '../src/queue/connection';

describe('INBOUND_WEBHOOK_REQUIRE_SIGNATURE=true', () => {
  let rctx: TestContext;
  let rws: Workspace;
  const withSecret = {} as Record<WebhookProvider, Integration>;
  const without = {} as Record<WebhookProvider, Integration>;
  beforeAll(async () => {
    rctx = await startTestApp({ env: { INBOUND_WEBHOOK_REQUIRE_SIGNATURE: 'true' } });
    await rctx.startWorkers();
    rws = await createWorkspace(rctx);
    for (const p of PROVIDERS) {
      withSecret[p] = await createIntegration(rctx, rws, p, newSecret());
      without[p] = await createIntegration(rctx, rws, p);
    }
  });
  afterAll(async () => {
    await rctx?.close();
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: unsigned to an integration without a secret → 401 signature_required; signed to one with a secret → 200', async (p) => {
    const kit = KITS[p];
    await expectNothingWritten(rctx, async () => {
      for (const d of [kit.ticket(kit.newTicketId()), kit.nonTicket()[0]!]) {
        const res = await deliver(rctx, without[p], d);
        expect(res.status).toBe(401);
        expect(res.body.code).toBe('signature_required');
      }
      // Unsigned to the integration with a secret is a signature mismatch, not "required".
      const d = kit.ticket(kit.newTicketId());
      const res = await postRaw(rctx, p, withSecret[p].id, d.raw, plainHeaders(p, d));
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('signature_invalid');
    });
    const ticketId = kit.newTicketId();
    const ok = await deliver(rctx, withSecret[p], kit.ticket(ticketId));
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ status: 'ok', transcript_id: expect.stringMatching(UUID), external_ticket_id: ticketId });
  });
});

// ========================================================================================== 6. throttle

describe('throttle (INBOUND_WEBHOOK_RATE_POINTS=3 per 2 s window, per integration)', () => {
  let tctx: TestContext;
  let tws: Workspace;
  beforeAll(async () => {
    tctx = await startTestApp({ env: { INBOUND_WEBHOOK_RATE_POINTS: '3', INBOUND_WEBHOOK_RATE_WINDOW_SECONDS: '2' } });
    await tctx.startWorkers();
    tws = await createWorkspace(tctx);
  });
  afterAll(async () => {
    await tctx?.close();
  });

  test('the 4th delivery → 429 with integer Retry-After, nothing written; other integrations unaffected; replayed after the window → 200 and recorded', async () => {
    const integrations = {} as Record<WebhookProvider, Integration>;
    for (const p of PROVIDERS) integrations[p] = await createIntegration(tctx, tws, p, newSecret());
    const neighbour = await createIntegration(tctx, tws, 'zendesk', newSecret());

    const throttled = {} as Record<WebhookProvider, { d: Delivery; ticketId: string; res: Response }>;
    for (const p of PROVIDERS) {
      const kit = KITS[p];
      const ticketId = kit.newTicketId();
      for (let v = 0; v < 3; v++) expect((await deliver(tctx, integrations[p], kit.ticket(ticketId, v))).status).toBe(200);
      const d = kit.ticket(ticketId, 3);
      const before = await countRows(tctx);
      const res = await deliver(tctx, integrations[p], d);
      expect(res.status).toBe(429);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      const retryAfter = Number(res.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(2);
      expect(diff(await countRows(tctx), before)).toEqual(NOTHING);
      throttled[p] = { d, ticketId, res };
    }
    // Throttling is per integration: a neighbour in the same workspace is still served.
    expect((await deliver(tctx, neighbour, KITS.zendesk.ticket(KITS.zendesk.newTicketId()))).status).toBe(200);

    await sleep(Math.max(...PROVIDERS.map((p) => Number(throttled[p].res.headers['retry-after']))) * 1000 + 100);
    for (const p of PROVIDERS) {
      const { d, ticketId } = throttled[p];
      const before = await countRows(tctx, integrations[p].id);
      const replay = await deliver(tctx, integrations[p], d);
      expect(replay.status).toBe(200);
      expect(replay.body).toMatchObject({ status: 'ok', external_ticket_id: ticketId });
      // Recorded as new: it never entered the ledger when it was throttled.
      expect(diff(await countRows(tctx, integrations[p].id), before)).toEqual({ deliveries: 1, transcripts: 0, events: 1 });
      const t = await getTranscript(tctx, tws.ownerKey, replay.body.transcript_id);
      expect(t.event_count).toBe(4);
      expectEventOf(t.events[0]!, d);
    }
  });
});

// ============================================================================ 8. SIGKILL of a worker process

describe('a worker process SIGKILLed mid-burst', () => {
  let kctx: TestContext;
  let kws: Workspace;
  const children: ChildProcess[] = [];
  const integrations = {} as Record<WebhookProvider, Integration>;

  /** tsx runs the worker in a child node process: the worker gets its own process group so a kill reaches both. */
  function startWorker(): { proc: ChildProcess; output: () => string; started: Promise<void> } {
    const worker = spawnWorker(kctx.config, { detached: true, env: { WORKER_CONCURRENCY: '4' } });
    children.push(worker.proc);
    return { proc: worker.proc, output: worker.output, started: workerStarted(worker) };
  }

  beforeAll(async () => {
    // No in-process workers; a short wait so requests whose job died answer 202 promptly; small batches so the
    // burst is many jobs and the kill lands with some in a worker's hands.
    kctx = await startTestApp({ env: { JOB_WAIT_MS: '2000', INBOUND_WEBHOOK_BATCH_MAX: '4' } });
    kws = await createWorkspace(kctx);
    for (const p of PROVIDERS) integrations[p] = await createIntegration(kctx, kws, p, newSecret());
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) killGroup(c);
    await kctx?.close();
  });

  /** The identity of a recorded event: its provider event id, or (Help Scout) the conversation `number` we made unique. */
  const keyOf = (provider: string, raw: Record<string, unknown>) =>
    provider === 'zendesk' ? String(raw.id) : provider === 'front' ? String((raw.payload as { id: string }).id) : String(raw.number);

  test('after a new worker starts and clients retry 5xx/202 until 200, every distinct event is recorded exactly once', async () => {
    const TICKETS = 20;
    const EVENTS_PER_TICKET = 3;
    interface Send {
      integration: Integration;
      key: string;
      raw: string;
      headers: Record<string, string>;
    }
    const distinct: Send[] = [];
    let number = 1;
    for (const p of PROVIDERS) {
      const kit = KITS[p];
      for (let t = 0; t < TICKETS; t++) {
        const ticketId = kit.newTicketId();
        for (let v = 0; v < EVENTS_PER_TICKET; v++) {
          let d = kit.ticket(ticketId, v);
          if (p === 'helpscout') d = delivery({ ...d.body, number: number++ }, { event: d.event! });
          distinct.push({ integration: integrations[p], key: keyOf(p, d.body), raw: d.raw, headers: headersFor(p, d, integrations[p].secret) });
        }
      }
    }
    const DISTINCT = distinct.length;
    expect(new Set(distinct.map((s) => `${s.integration.provider}|${s.key}`)).size).toBe(DISTINCT);
    // Every 5th event delivered a second time, interleaved with the originals.
    const sends: Send[] = [];
    distinct.forEach((s, i) => {
      sends.push(s);
      if (i % 5 === 0) sends.push(s);
    });
    const redeliveries = sends.length - DISTINCT;

    const first = startWorker();
    await first.started;
    const queue = kctx.runtime.queues.queue('webhooks');
    const started = Date.now();
    const deadline = started + 50_000;
    const attempts: number[] = Array(sends.length).fill(0);
    const nonFinal: number[] = [];

    const untilOk = async (s: Send, i: number): Promise<Response> => {
      for (;;) {
        attempts[i]!++;
        const res = await postRaw(kctx, s.integration.provider, s.integration.id, s.raw, s.headers);
        if (res.status === 200) return res;
        if (res.status !== 202 && res.status < 500) throw new Error(`unexpected ${res.status}: ${JSON.stringify(res.body)}`);
        nonFinal.push(res.status);
        if (Date.now() > deadline) throw new Error(`delivery ${i} never answered 200 (last ${res.status})`);
        await sleep(200);
      }
    };
    const responses = Promise.all(sends.map((s, i) => untilOk(s, i)));

    // Kill once the worker is demonstrably mid-burst: something committed, jobs in its hands.
    await sleep(20);
    const { atKill, killedAt: killedClock, orphaned } = await killMidBurst({
      proc: first.proc,
      midBurst: async () => {
        const [c, active] = await Promise.all([countRows(kctx), queue.getActiveCount()]);
        return c.deliveries > 0 && active > 0 ? c : undefined;
      },
      activeCount: () => queue.getActiveCount(),
      redis: kctx.runtime.redis,
      stalledCheckKey: `${queuePrefix(kctx.config, 'webhooks')}:webhooks:stalled-check`,
    });
    const killedAt = killedClock - started;
    const second = startWorker();
    await second.started;

    const rs = await responses;
    const answeredAt = Date.now() - started;

    // Wait for the orphaned jobs to be re-run by BullMQ (their items are then copies of what the retries wrote).
    await eventually(
      async () => {
        const q = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
        return Object.values(q).reduce((a, b) => a + b, 0) === 0 ? true : undefined;
      },
      50_000,
      'the webhooks queue to drain (orphaned jobs re-run)',
      250,
    );
    const failed = (await queue.getJobCounts('failed')).failed ?? 0;
    const c = await countRows(kctx);
    const events = await kctx.db
      .selectFrom('transcript_events as e')
      .innerJoin('transcripts as t', 't.id', 'e.transcript_id')
      .select(['e.transcript_id', 'e.raw', 't.integration_id', 't.external_ticket_id', 't.event_count'])
      .where('e.tenant_id', '=', kws.tenantId)
      .execute();
    const dupSum = Number(
      (await sql<{ n: number }>`select coalesce(sum(duplicate_count), 0)::int as n from webhook_deliveries where tenant_id = ${kws.tenantId}`.execute(kctx.db)).rows[0]!.n,
    );
    // eslint-disable-next-line no-console
    console.log(
      `webhooks SIGKILL test: ${sends.length} requests (${DISTINCT} distinct); killed at ${killedAt} ms with ${atKill.deliveries} deliveries ` +
        `committed and ${orphaned} active job(s) orphaned; ${nonFinal.length} non-200 answers retried (${nonFinal.filter((s) => s === 202).length} × 202); ` +
        `all answered 200 by ${answeredAt} ms, drained by ${Date.now() - started} ms; duplicate_count sum ${dupSum}; failed jobs ${failed}`,
    );

    expect(failed).toBe(0);
    expect(rs.map((r) => r.status)).toEqual(Array(sends.length).fill(200));
    expect(c).toEqual({ deliveries: DISTINCT, transcripts: TICKETS * PROVIDERS.length, events: DISTINCT });
    // Exactly the events sent, each once.
    const provOf = new Map(PROVIDERS.map((p) => [integrations[p].id, p]));
    const recordedKeys = events.map((e) => `${provOf.get(e.integration_id)}|${keyOf(provOf.get(e.integration_id)!, e.raw as Record<string, unknown>)}`);
    expect([...recordedKeys].sort()).toEqual(distinct.map((s) => `${s.integration.provider}|${s.key}`).sort());
    // Each transcript's count agrees with its events.
    const perTranscript = new Map<string, number>();
    for (const e of events) perTranscript.set(e.transcript_id, (perTranscript.get(e.transcript_id) ?? 0) + 1);
    for (const e of events) expect(e.event_count).toBe(perTranscript.get(e.transcript_id));
    expect([...perTranscript.values()]).toEqual(Array(TICKETS * PROVIDERS.length).fill(EVENTS_PER_TICKET));
    // Every answer names the transcript that holds its event.
    const transcriptOf = new Map(events.map((e, i) => [recordedKeys[i]!, { id: e.transcript_id, ticket: e.external_ticket_id }]));
    rs.forEach((r, i) => {
      const s = sends[i]!;
      const t = transcriptOf.get(`${s.integration.provider}|${s.key}`)!;
      expect(r.body).toEqual({ status: 'ok', transcript_id: t.id, external_ticket_id: t.ticket });
    });
    expect(dupSum).toBeGreaterThanOrEqual(redeliveries);
  }, 90_000);
});

