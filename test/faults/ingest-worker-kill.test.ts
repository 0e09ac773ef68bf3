/**
 * Fault tests for the ingest pipeline: "exactly once under redelivery bursts" and "a worker killed mid-job
 * (SIGKILL) and retried by BullMQ never duplicates a write".
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Response } from 'supertest';
import type { Db } from '../../src/db';
import { channelById } from '../../src/domains/channels/registry';
import type { IngestItem } from '../../src/domains/ingest/worker';
import { startTestApp, type TestContext } from '../helpers/context';
import { bearer, createWorkspace, type Workspace } from '../helpers/factories';
import { emailPayload, smsPayload } from '../helpers/payloads';
import { killGroup, killMidBurst, spawnWorker, workerStarted } from '../helpers/processes';
import { eventually, sleep } from '../helpers/wait';
import { queuePrefix } from '../../src/queue/connection';
import { useTestApp } from '../helpers/use-test-app';

const SMS_TO = '+15550001111';
const hex = (n: number) => randomBytes(n).toString('hex');
/** A fresh phone number, so every scenario starts from a sender the workspace has never met. */
const newPhone = () => `+1555${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;

async function connectChannels(ctx: TestContext, ws: Workspace): Promise<void> {
  await ctx.http.put('/v1/channels/email').set(bearer(ws.ownerKey)).send({ config: { inbound_address: 'support@acme.test' } }).expect(200);
  await ctx.http.put('/v1/channels/sms').set(bearer(ws.ownerKey)).send({ config: { phone_number: SMS_TO, auth_token: 'secret-token' } }).expect(200);
}

interface Counts {
  tickets: number;
  inboundEvents: number;
  customers: number;
  handles: number;
  deliveries: number;
  duplicateSum: number;
}

/** Everything one workspace holds that ingest writes. */
async function counts(db: Db, tenantId: string, channel: string): Promise<Counts> {
  const n = async (q: Promise<{ n: string | number | bigint } | undefined>) => Number((await q)?.n ?? 0);
  const [tickets, inboundEvents, customers, handles, deliveries, duplicateSum] = await Promise.all([
    n(db.selectFrom('tickets').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', tenantId).executeTakeFirst()),
    n(
      db
        .selectFrom('ticket_events')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('tenant_id', '=', tenantId)
        .where('kind', '=', `inbound_${channel}`)
        .executeTakeFirst(),
    ),
    n(db.selectFrom('customers').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', tenantId).executeTakeFirst()),
    n(db.selectFrom('customer_handles').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', tenantId).executeTakeFirst()),
    n(db.selectFrom('ingest_deliveries').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', tenantId).executeTakeFirst()),
    n(
      db
        .selectFrom('ingest_deliveries')
        .select((eb) => eb.fn.coalesce(eb.fn.sum<string>('duplicate_count'), eb.lit(0)).as('n'))
        .where('tenant_id', '=', tenantId)
        .executeTakeFirst(),
    ),
  ]);
  return { tickets, inboundEvents, customers, handles, deliveries, duplicateSum };
}

async function ledger(db: Db, tenantId: string) {
  return db.selectFrom('ingest_deliveries').selectAll().where('tenant_id', '=', tenantId).execute();
}

/**
 * Every inbound event of the workspace (one per written message). Events are matched to messages by body
 * (unique per message in these tests), which every inbound event carries whether it opened the ticket or not.
 */
async function inboundEvents(db: Db, tenantId: string, channel: string) {
  return db
    .selectFrom('ticket_events')
    .select(['ticket_id', 'body'])
    .where('tenant_id', '=', tenantId)
    .where('kind', '=', `inbound_${channel}`)
    .execute();
}

const post = (ctx: TestContext, channel: string, tenantId: string, payload: Record<string, unknown>) =>
  ctx.http.post(`/v1/ingest/${channel}`).send({ tenant_id: tenantId, payload });

const bodies = (rs: Response[]) => rs.map((r) => r.body as { ticket_id: string; customer_id: string; was_created: boolean; was_duplicate: boolean });

// ------------------------------------------------------------------------------------------------ 1. bursts

describe('redelivery bursts (workers in-process)', () => {
  const { ctx } = useTestApp({ workers: true });

  /** One workspace per scenario, so every count below is the scenario's own. */
  async function freshWorkspace(): Promise<Workspace> {
    const ws = await createWorkspace(ctx);
    await connectChannels(ctx, ws);
    return ws;
  }

  test('the same SMS delivered 20 times concurrently: one ticket, one event, one customer, 1 created + 19 duplicates', async () => {
    const ws = await freshWorkspace();
    const payload = smsPayload({ from: newPhone(), body: 'Burst: please change my delivery address.' });
    const rs = await Promise.all(Array.from({ length: 20 }, () => post(ctx, 'sms', ws.tenantId, payload)));

    expect(rs.map((r) => r.status)).toEqual(Array(20).fill(200));
    const b = bodies(rs);
    expect(b.filter((x) => x.was_created === true && x.was_duplicate === false)).toHaveLength(1);
    expect(b.filter((x) => x.was_duplicate === true && x.was_created === false)).toHaveLength(19);
    expect(new Set(b.map((x) => x.ticket_id)).size).toBe(1);
    expect(new Set(b.map((x) => x.customer_id)).size).toBe(1);

    expect(await counts(ctx.db, ws.tenantId, 'sms')).toEqual({ tickets: 1, inboundEvents: 1, customers: 1, handles: 1, deliveries: 1, duplicateSum: 19 });
    const [row] = await ledger(ctx.db, ws.tenantId);
    expect(row).toMatchObject({ channel: 'sms', provider_message_id: payload.MessageSid, ticket_id: b[0]!.ticket_id, was_created: true, duplicate_count: 19 });
  });

  test('the same email delivered 20 times concurrently: one ticket, one event, one customer, 1 created + 19 duplicates', async () => {
    const ws = await freshWorkspace();
    const payload = emailPayload({ from: `burst-${hex(4)}@customer.test`, subject: 'Burst email' });
    const rs = await Promise.all(Array.from({ length: 20 }, () => post(ctx, 'email', ws.tenantId, payload as unknown as Record<string, unknown>)));

    expect(rs.map((r) => r.status)).toEqual(Array(20).fill(200));
    const b = bodies(rs);
    expect(b.filter((x) => x.was_created === true && x.was_duplicate === false)).toHaveLength(1);
    expect(b.filter((x) => x.was_duplicate === true && x.was_created === false)).toHaveLength(19);
    expect(new Set(b.map((x) => x.ticket_id)).size).toBe(1);
    expect(new Set(b.map((x) => x.customer_id)).size).toBe(1);

    // Email customers are found by address: no customer_handles row.
    expect(await counts(ctx.db, ws.tenantId, 'email')).toEqual({ tickets: 1, inboundEvents: 1, customers: 1, handles: 0, deliveries: 1, duplicateSum: 19 });
    const [row] = await ledger(ctx.db, ws.tenantId);
    expect(row).toMatchObject({ channel: 'email', ticket_id: b[0]!.ticket_id, was_created: true, duplicate_count: 19 });
    const mids = await ctx.db.selectFrom('email_message_ids').select(['ticket_id']).where('tenant_id', '=', ws.tenantId).execute();
    expect(mids).toEqual([{ ticket_id: b[0]!.ticket_id }]);
  });

  test('mixed SMS burst: 10 messages from one new sender × 3 copies → 10 deliveries, 1 customer, 1 threaded ticket, 10 events', async () => {
    const ws = await freshWorkspace();
    const from = newPhone();
    const payloads = Array.from({ length: 10 }, (_, i) => smsPayload({ from, body: `Mixed burst message ${i}` }));
    const sends = payloads.flatMap((p) => [p, p, p]);
    const rs = await Promise.all(sends.map((p) => post(ctx, 'sms', ws.tenantId, p)));

    expect(rs.map((r) => r.status)).toEqual(Array(30).fill(200));
    const b = bodies(rs);
    // One conversation: the first message written opens the ticket, the other nine thread into it.
    expect(new Set(b.map((x) => x.ticket_id)).size).toBe(1);
    expect(b.filter((x) => x.was_created)).toHaveLength(1);
    expect(b.filter((x) => x.was_duplicate)).toHaveLength(20);
    // Per message: exactly one of its three copies was the write, the other two duplicates.
    for (let i = 0; i < payloads.length; i++) {
      const copies = b.slice(i * 3, i * 3 + 3);
      expect(copies.filter((x) => !x.was_duplicate)).toHaveLength(1);
    }
    const rows = await ledger(ctx.db, ws.tenantId);
    expect(rows).toHaveLength(10);
    expect(rows.map((r) => r.duplicate_count)).toEqual(Array(10).fill(2));
    expect(rows.filter((r) => r.was_created)).toHaveLength(1);
    const events = await inboundEvents(ctx.db, ws.tenantId, 'sms');
    expect(events.map((e) => e.body).sort()).toEqual(payloads.map((p) => p.Body).sort());

    // One sender, one customer: the ticket's, the ledger's and every answer's.
    const [ticket] = await ctx.db.selectFrom('tickets').select(['id', 'customer_id']).where('tenant_id', '=', ws.tenantId).execute();
    expect(new Set(b.map((x) => x.customer_id))).toEqual(new Set([ticket!.customer_id]));
    expect(new Set(rows.map((r) => r.customer_id))).toEqual(new Set([ticket!.customer_id]));
    expect(await counts(ctx.db, ws.tenantId, 'sms')).toEqual({ tickets: 1, inboundEvents: 10, customers: 1, handles: 1, deliveries: 10, duplicateSum: 20 });
  });

  test('mixed email burst: 10 emails from one new sender × 3 copies → 10 deliveries, 1 customer, 10 tickets, 10 events', async () => {
    const ws = await freshWorkspace();
    const from = `mixed-${hex(4)}@customer.test`;
    const payloads = Array.from({ length: 10 }, (_, i) => emailPayload({ from, subject: `Question ${i}` }) as unknown as Record<string, unknown>);
    const rs = await Promise.all(payloads.flatMap((p) => [p, p, p]).map((p) => post(ctx, 'email', ws.tenantId, p)));

    expect(rs.map((r) => r.status)).toEqual(Array(30).fill(200));
    const b = bodies(rs);
    expect(new Set(b.map((x) => x.customer_id)).size).toBe(1);
    expect(new Set(b.map((x) => x.ticket_id)).size).toBe(10);
    expect(b.filter((x) => x.was_created)).toHaveLength(10);
    expect(b.filter((x) => x.was_duplicate)).toHaveLength(20);
    for (let i = 0; i < payloads.length; i++) {
      const copies = b.slice(i * 3, i * 3 + 3);
      expect(new Set(copies.map((x) => x.ticket_id)).size).toBe(1);
      expect(copies.filter((x) => !x.was_duplicate)).toHaveLength(1);
    }
    expect(await counts(ctx.db, ws.tenantId, 'email')).toEqual({ tickets: 10, inboundEvents: 10, customers: 1, handles: 0, deliveries: 10, duplicateSum: 20 });
  });
});

// --------------------------------------------------------------------------------------- 2. same job re-run

describe('the processor re-running the same job', () => {
  let ctx: TestContext;
  let ws: Workspace;
  beforeAll(async () => {
    ctx = await startTestApp();
    ws = await createWorkspace(ctx);
    await connectChannels(ctx, ws);
  });
  afterAll(async () => {
    await ctx.close();
  });

  /** The item the gateway would enqueue for this SMS payload. */
  function smsItem(id: string, payload = smsPayload({ from: newPhone(), body: `Re-run test ${hex(6)}` })): IngestItem {
    const parsed = channelById('sms')!.adapter!.parse(payload);
    if (!parsed.ok) throw new Error('payload did not parse');
    return { id, tenant_id: ws.tenantId, channel: 'sms', message: parsed.messages[0]! };
  }

  const ticketsFor = async (customerId: string) =>
    ctx.db.selectFrom('tickets').select('id').where('tenant_id', '=', ws.tenantId).where('customer_id', '=', customerId).execute();
  const deliveryOf = async (item: IngestItem) =>
    ctx.db
      .selectFrom('ingest_deliveries')
      .selectAll()
      .where('tenant_id', '=', ws.tenantId)
      .where('provider_message_id', '=', item.message.providerMessageId)
      .executeTakeFirstOrThrow();
  const eventsFor = async (item: IngestItem) =>
    (await inboundEvents(ctx.db, ws.tenantId, 'sms')).filter((e) => e.body === item.message.body);

  test('the same item twice answers the first result both times; another correlation id is a duplicate', async () => {
    const item = smsItem(`rerun-${hex(6)}`);
    const first = await ctx.workerServices.ingestProcessor.process(item);
    const again = await ctx.workerServices.ingestProcessor.process(item);
    expect(first).toMatchObject({ channel: 'sms', was_created: true, was_duplicate: false });
    expect(again).toEqual(first);
    expect(await deliveryOf(item)).toMatchObject({ first_correlation_id: item.id, ticket_id: first.ticket_id, duplicate_count: 0 });

    const redelivered = await ctx.workerServices.ingestProcessor.process({ ...item, id: `other-${hex(6)}` });
    expect(redelivered).toEqual({ ...first, was_created: false, was_duplicate: true });
    expect(await deliveryOf(item)).toMatchObject({ duplicate_count: 1 });
    expect(await ticketsFor(first.customer_id)).toEqual([{ id: first.ticket_id }]);
    expect(await eventsFor(item)).toHaveLength(1);
  });

  test('the same item processed 5× concurrently writes one ticket and one event', async () => {
    const item = smsItem(`concurrent-${hex(6)}`);
    const results = await Promise.all(Array.from({ length: 5 }, () => ctx.workerServices.ingestProcessor.process(item)));
    expect(new Set(results.map((r) => r.ticket_id)).size).toBe(1);
    for (const r of results) expect(r).toMatchObject({ was_created: true, was_duplicate: false });
    expect(await ticketsFor(results[0]!.customer_id)).toHaveLength(1);
    expect(await eventsFor(item)).toHaveLength(1);
    expect(await deliveryOf(item)).toMatchObject({ first_correlation_id: item.id, duplicate_count: 0 });
  });

  test('5 different correlation ids for one message concurrently: 1 created, 4 duplicates, duplicate_count 4', async () => {
    const payload = smsPayload({ from: newPhone(), body: `Correlation test ${hex(6)}` });
    const items = Array.from({ length: 5 }, (_, i) => smsItem(`corr-${i}-${hex(6)}`, payload));
    const results = await Promise.all(items.map((i) => ctx.workerServices.ingestProcessor.process(i)));
    expect(new Set(results.map((r) => r.ticket_id)).size).toBe(1);
    expect(results.filter((r) => r.was_created && !r.was_duplicate)).toHaveLength(1);
    expect(results.filter((r) => r.was_duplicate && !r.was_created)).toHaveLength(4);
    expect(await deliveryOf(items[0]!)).toMatchObject({ duplicate_count: 4 });
    expect(await eventsFor(items[0]!)).toHaveLength(1);
  });

  test('a retried ingest.batch (BullMQ re-running the whole job) answers the same and counts no duplicate twice', async () => {
    // One batch as the gateway builds it: a message, and a redelivery of it from another request.
    const payload = smsPayload({ from: newPhone(), body: `Batch retry test ${hex(6)}` });
    const original = smsItem(`batch-a-${hex(6)}`, payload);
    const copy = smsItem(`batch-b-${hex(6)}`, payload);
    const firstRun = await ctx.workerServices.ingestProcessor.processBatch([original, copy]);
    const retry = await ctx.workerServices.ingestProcessor.processBatch([original, copy]);

    expect(firstRun.map((r) => r.ok)).toEqual([true, true]);
    expect(retry).toEqual(firstRun);
    expect(await eventsFor(original)).toHaveLength(1);
    expect(await ticketsFor((firstRun[0]!.value as { customer_id: string }).customer_id)).toHaveLength(1);
    // One provider redelivery happened; the retry of the job that carried it is not a second one.
    expect(await deliveryOf(original)).toMatchObject({ first_correlation_id: original.id, duplicate_count: 1 });
  });
});

// -------------------------------------------------------------------------------------- 3. SIGKILL mid-job

describe('a worker process SIGKILLed mid-burst', () => {
  let ctx: TestContext;
  let ws: Workspace;
  const children: ChildProcess[] = [];

  /** tsx runs the worker in a child node process: the worker gets its own process group so a kill reaches both. */
  function startWorker(): { proc: ChildProcess; output: () => string; started: Promise<void> } {
    const worker = spawnWorker(ctx.config, { detached: true, env: { WORKER_CONCURRENCY: '4' } });
    children.push(worker.proc);
    return { proc: worker.proc, output: worker.output, started: workerStarted(worker) };
  }

  beforeAll(async () => {
    // No in-process workers here; a short wait so requests whose job died answer 202 promptly.
    ctx = await startTestApp({ env: { JOB_WAIT_MS: '2000' } });
    ws = await createWorkspace(ctx);
    await connectChannels(ctx, ws);
  });
  afterAll(async () => {
    // Only groups whose leader is still ours and alive (the first worker's group was killed whole already).
    for (const c of children) if (c.exitCode === null && c.signalCode === null) killGroup(c);
    await ctx.close();
  });

  test('every delivery is written exactly once after a SIGKILL and a retry by a new worker', async () => {
    const SENDERS = 100;
    const DISTINCT = 200;
    const payloads = Array.from({ length: SENDERS }, () => newPhone()).flatMap((from, s) =>
      [0, 1].map((k) => smsPayload({ from, body: `Kill test: sender ${s}, message ${k}` })),
    );
    expect(payloads).toHaveLength(DISTINCT);
    const senders = new Set(payloads.map((p) => p.From)).size;
    // 20% of the messages delivered a second time, interleaved with the originals.
    const sends: Record<string, string>[] = [];
    payloads.forEach((p, i) => {
      sends.push(p);
      if (i % 5 === 0) sends.push(p);
    });
    const redeliveries = sends.length - DISTINCT;

    const first = startWorker();
    await first.started;
    const ingestQueue = ctx.runtime.queues.queue('ingest');
    const started = Date.now();

    const responses = Promise.all(sends.map((p) => post(ctx, 'sms', ws.tenantId, p)));
    // Kill once the worker is demonstrably mid-burst: ≥ 50 ms in, something committed, jobs in its hands.
    await sleep(50);
    const { atKill, killedAt: killedClock, orphaned } = await killMidBurst({
      proc: first.proc,
      midBurst: async () => {
        const [c, active] = await Promise.all([counts(ctx.db, ws.tenantId, 'sms'), ingestQueue.getActiveCount()]);
        return c.deliveries > 0 && active > 0 ? c : undefined;
      },
      activeCount: () => ingestQueue.getActiveCount(),
      redis: ctx.runtime.redis,
      stalledCheckKey: `${queuePrefix(ctx.config, 'ingest')}:ingest:stalled-check`,
    });
    const killedAt = killedClock - started;
    const second = startWorker();
    await second.started;

    const rs = await responses;
    const statuses = rs.map((r) => r.status);
    expect(statuses.every((st) => st === 200 || st === 202)).toBe(true);

    await eventually(
      async () => {
        const c = await counts(ctx.db, ws.tenantId, 'sms');
        const q = await ingestQueue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
        const pendingJobs = Object.values(q).reduce((a, b) => a + b, 0);
        return c.deliveries === DISTINCT && pendingJobs === 0 ? true : undefined;
      },
      60_000,
      'every delivery in the ledger and the ingest queue drained',
      250,
    );
    const failed = (await ingestQueue.getJobCounts('failed')).failed ?? 0;
    const finished = Date.now() - started;

    const c = await counts(ctx.db, ws.tenantId, 'sms');
    const rows = await ledger(ctx.db, ws.tenantId);
    const events = await inboundEvents(ctx.db, ws.tenantId, 'sms');
    const tickets = await ctx.db.selectFrom('tickets').select(['id', 'customer_id']).where('tenant_id', '=', ws.tenantId).execute();
    const sidOfBody = new Map(payloads.map((p) => [p.Body!, p.MessageSid!]));
    // eslint-disable-next-line no-console
    console.log(
      `SIGKILL test: ${sends.length} requests (${DISTINCT} distinct, ${senders} senders); killed at ${killedAt} ms with ${atKill.deliveries} ` +
        `deliveries committed and ${orphaned} active job(s) orphaned; answers 200=${statuses.filter((st) => st === 200).length} ` +
        `202=${statuses.filter((st) => st === 202).length}; all written ${finished} ms after the burst began; ` +
        `tickets ${c.tickets}, customers ${c.customers}, handles ${c.handles}, duplicate_count sum ${c.duplicateSum} (redeliveries ${redeliveries}); failed jobs ${failed}`,
    );

    expect(failed).toBe(0);
    expect(c.deliveries).toBe(DISTINCT);
    expect(rows.every((r) => r.ticket_id !== null && r.customer_id !== null)).toBe(true);
    // Exactly one inbound event per delivery, and for exactly the messages sent.
    expect(c.inboundEvents).toBe(DISTINCT);
    expect(events.map((e) => e.body).sort()).toEqual(payloads.map((p) => p.Body).sort());
    // One conversation ticket per sender (each sender's second message threads into the first's ticket).
    expect(c.tickets).toBe(senders);
    expect(rows.filter((r) => r.was_created)).toHaveLength(senders);
    // The ledger points at the ticket that holds the message's event.
    const eventTicket = new Map(events.map((e) => [sidOfBody.get(e.body), e.ticket_id]));
    for (const r of rows) expect(r.ticket_id).toBe(eventTicket.get(r.provider_message_id));
    // Answers that did arrive agree with the ledger, and per message exactly one answered copy was the write.
    const byId = new Map(rows.map((r) => [r.provider_message_id, r]));
    const writesPerMessage = new Map<string, number>();
    rs.forEach((r, i) => {
      if (r.status !== 200) return;
      const sid = sends[i]!.MessageSid!;
      expect(r.body.ticket_id).toBe(byId.get(sid)!.ticket_id);
      if (!r.body.was_duplicate) writesPerMessage.set(sid, (writesPerMessage.get(sid) ?? 0) + 1);
    });
    expect([...writesPerMessage.values()].filter((n) => n !== 1)).toEqual([]);
    // One customer per sender: the ticket's customer is the ledger's.
    const ticketCustomer = new Map(tickets.map((t) => [t.id, t.customer_id]));
    expect(rows.filter((r) => r.customer_id !== ticketCustomer.get(r.ticket_id!))).toEqual([]);
    expect(c.customers).toBe(senders);
    expect(c.handles).toBe(senders);
    // Every redelivery counted once: no fewer, and no more (a re-run job must not count its duplicates again).
    expect(c.duplicateSum).toBe(redeliveries);
  }, 85_000);
});
