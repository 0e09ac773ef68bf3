/**
 * The ingest worker's set-based batch write (`processBatch`): items of one batch that depend on each other
 * (same sender, same conversation, In-Reply-To an earlier item), a batch meeting existing tickets (open,
 * solved, merged), copies within and across batches, concurrent overlapping batches, the worker's own
 * connection check, the HTTP tier's cached route giving way to it, and the plans of the threading lookups.
 */
import { randomBytes } from 'node:crypto';
import {
  CompiledQuery,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
  type DatabaseConnection,
  type Driver,
} from 'kysely';
import { escapeLiteral } from 'pg';
import type { Db, Executor } from '../src/db';
import type { Database } from '../src/db/types';
import type { InboundMessage } from '../src/domains/channels/adapters/types';
import { channelById } from '../src/domains/channels/registry';
import * as customerStore from '../src/domains/customers/store';
import type { IngestItem, IngestResult } from '../src/domains/ingest/worker';
import * as ticketStore from '../src/domains/tickets/store';
import { statusOf } from '../src/http/errors';
import type { ItemResult } from '../src/queue/results';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { connect, countRows, ingest, ticketDetail } from './helpers/ingest';
import { emailPayload, newEmailMessageId, normaliseMessageId, smsPayload, webChatPayload } from './helpers/payloads';
import { createTicket, setStatus } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const SMS_TO = '+15550001111';
const hex = (n: number) => randomBytes(n).toString('hex');
/** A fresh phone number: every scenario starts from senders the workspace has never met. */
const newPhone = () => `+1555${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;
const newAddress = (who: string) => `${who}-${hex(4)}@customer.test`;

/** The item the gateway would enqueue for this provider payload (the adapter's real output). */
function itemOf(tenantId: string, channel: string, payload: unknown, id = `corr-${hex(6)}`): IngestItem {
  const parsed = channelById(channel)!.adapter!.parse(payload);
  if (!parsed.ok || parsed.messages.length !== 1) throw new Error(`${channel} payload did not parse to one message`);
  return { id, tenant_id: tenantId, channel, message: parsed.messages[0]! };
}
const smsItem = (w: Workspace, payload: Record<string, string>, id?: string) => itemOf(w.tenantId, 'sms', payload, id);
const emailItem = (w: Workspace, payload: ReturnType<typeof emailPayload>, id?: string) => itemOf(w.tenantId, 'email', payload, id);

/** Insists every item was answered ok and returns the Ingest results in item order. */
function values(results: ItemResult[]): IngestResult[] {
  expect(results.filter((r) => !r.ok)).toEqual([]);
  return results.map((r) => r.value as IngestResult);
}

/** Fisher–Yates with a small seeded generator, so a failing order can be replayed from its seed. */
function shuffled<T>(xs: T[], seed: number): T[] {
  let s = seed >>> 0;
  const rand = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

// ------------------------------------------------------------------------------------- the batch write

describe('one batch written set-based (processBatch)', () => {
  const { ctx } = useTestApp();

  const processBatch = (items: IngestItem[]) => ctx.workerServices.ingestProcessor.processBatch(items);

  /** One workspace per scenario, with SMS and email connected, so every count below is the scenario's own. */
  async function freshWorkspace(): Promise<Workspace> {
    const w = await createWorkspace(ctx);
    await connect(ctx, w, 'sms', { config: { phone_number: SMS_TO } });
    await connect(ctx, w, 'email', { config: { inbound_address: 'support@acme.test' } });
    return w;
  }

  /** A ticket's events in the API's timeline order (tickets store listEvents: created_at, then seq). */
  const timeline = async (w: Workspace, ticketId: string) =>
    (
      await ctx.db
        .selectFrom('ticket_events')
        .select(['kind', 'body', 'meta'])
        .where('tenant_id', '=', w.tenantId)
        .where('ticket_id', '=', ticketId)
        .orderBy('created_at')
        .orderBy('seq')
        .execute()
    ).map((e) => ({ kind: e.kind, body: e.body, meta: e.meta as unknown as Record<string, unknown> }));

  const ticketsOf = (w: Workspace) =>
    ctx.db
      .selectFrom('tickets')
      .select(['id', 'customer_id', 'status', 'source', 'conversation_key', 'merged_into_id', 'reopened_at'])
      .where('tenant_id', '=', w.tenantId)
      .execute();
  const customersOf = (w: Workspace) => ctx.db.selectFrom('customers').select(['id', 'email']).where('tenant_id', '=', w.tenantId).execute();
  const handlesOf = (w: Workspace) => ctx.db.selectFrom('customer_handles').select(['kind', 'handle', 'customer_id']).where('tenant_id', '=', w.tenantId).execute();
  const ledgerOf = (w: Workspace) => ctx.db.selectFrom('ingest_deliveries').selectAll().where('tenant_id', '=', w.tenantId).execute();
  const deliveryOf = (w: Workspace, item: IngestItem) =>
    ctx.db
      .selectFrom('ingest_deliveries')
      .selectAll()
      .where('tenant_id', '=', w.tenantId)
      .where('channel', '=', item.channel)
      .where('provider_message_id', '=', item.message.providerMessageId)
      .executeTakeFirst();
  /** Inbound events carrying this item's body, anywhere in the workspace (bodies are unique per message here). */
  const eventsOf = (w: Workspace, item: IngestItem) =>
    ctx.db
      .selectFrom('ticket_events')
      .select(['ticket_id', 'kind'])
      .where('tenant_id', '=', w.tenantId)
      .where('kind', '=', `inbound_${item.channel}`)
      .where('body', '=', item.message.body)
      .execute();

  test('two first messages from one new SMS sender in one batch: one customer and handle, one ticket opened by the first, the second appended after it', async () => {
    const w = await freshWorkspace();
    const from = newPhone();
    const first = smsItem(w, smsPayload({ from, body: `First: my parcel is late ${hex(3)}` }));
    const second = smsItem(w, smsPayload({ from, body: `Second: it was due on Monday ${hex(3)}` }));

    const [r1, r2] = values(await processBatch([first, second]));
    expect(r1).toEqual({ channel: 'sms', ticket_id: expect.any(String), customer_id: expect.any(String), was_created: true, was_duplicate: false });
    expect(r2).toEqual({ ...r1, was_created: false });

    expect(await ticketsOf(w)).toEqual([
      { id: r1!.ticket_id, customer_id: r1!.customer_id, status: 'open', source: 'sms', conversation_key: `${from}|${SMS_TO}`, merged_into_id: null, reopened_at: null },
    ]);
    expect(await customersOf(w)).toEqual([{ id: r1!.customer_id, email: '' }]);
    expect(await handlesOf(w)).toEqual([{ kind: 'phone', handle: from, customer_id: r1!.customer_id }]);

    // Arrival order in the timeline: the opening event, then the appended one.
    const expected = [first, second].map((i) => ({ kind: 'inbound_sms', body: i.message.body, meta: expect.objectContaining({ provider_message_id: i.message.providerMessageId }) }));
    expect(await timeline(w, r1!.ticket_id)).toEqual(expected);
    const detail = await ticketDetail(ctx, w, r1!.ticket_id);
    expect(detail.events.map((e) => ({ kind: e.kind, body: e.body }))).toEqual(expected.map(({ kind, body }) => ({ kind, body })));

    expect(await deliveryOf(w, first)).toMatchObject({ ticket_id: r1!.ticket_id, customer_id: r1!.customer_id, was_created: true, duplicate_count: 0 });
    expect(await deliveryOf(w, second)).toMatchObject({ ticket_id: r1!.ticket_id, customer_id: r1!.customer_id, was_created: false, duplicate_count: 0 });
  });

  test('email: an item whose In-Reply-To names an earlier item\'s Message-ID (another sender) threads into the ticket that item opened', async () => {
    const w = await freshWorkspace();
    const originalId = newEmailMessageId();
    const original = emailItem(w, emailPayload({ from: newAddress('alice'), subject: 'Invoice 881 is wrong', messageId: originalId, text: `Original ${hex(3)}` }));
    // A colleague in Cc answers the thread from another address.
    const reply = emailItem(
      w,
      emailPayload({ from: newAddress('bob'), fromName: 'Bob Builder', messageId: newEmailMessageId(), inReplyTo: originalId, references: [originalId], text: `Reply ${hex(3)}` }),
    );
    expect(reply.message.inReplyTo).toEqual([normaliseMessageId(originalId)]);

    const [r1, r2] = values(await processBatch([original, reply]));
    expect(r1).toMatchObject({ channel: 'email', was_created: true, was_duplicate: false });
    expect(r2).toEqual({ channel: 'email', ticket_id: r1!.ticket_id, customer_id: expect.any(String), was_created: false, was_duplicate: false });
    // The reply's sender is a customer of their own; the ticket stays the original sender's.
    expect(r2!.customer_id).not.toBe(r1!.customer_id);
    const customers = await customersOf(w);
    expect(new Map(customers.map((c) => [c.id, c.email]))).toEqual(
      new Map([
        [r1!.customer_id, original.message.sender.handle],
        [r2!.customer_id, reply.message.sender.handle],
      ]),
    );
    expect((await ticketsOf(w)).map((t) => ({ id: t.id, customer_id: t.customer_id }))).toEqual([{ id: r1!.ticket_id, customer_id: r1!.customer_id }]);
    expect((await timeline(w, r1!.ticket_id)).map((e) => e.body)).toEqual([original.message.body, reply.message.body]);
    // Both Message-IDs now lead to the ticket, so a reply to either threads later.
    const mids = await ctx.db.selectFrom('email_message_ids').select(['message_id', 'ticket_id']).where('tenant_id', '=', w.tenantId).orderBy('message_id').execute();
    expect(mids).toEqual(
      [original.message.messageIdHeader!, reply.message.messageIdHeader!].sort().map((message_id) => ({ message_id, ticket_id: r1!.ticket_id })),
    );
  });

  test('email: a known customer\'s address in another letter case is that customer (adapter output and a hand-built mixed-case sender)', async () => {
    const w = await freshWorkspace();
    const stored = `Known.Person-${hex(3)}@Customer.Test`;
    const created = await ctx.http.post('/v1/customers').set(bearer(w.ownerKey)).send({ display_name: 'Known Person', email: stored });
    expect(created.status).toBe(201);
    const known = created.body.id as string;

    // The email adapter lower-cases the address it reads; a message built by hand keeps SHOUTING case.
    const parsed = emailItem(w, emailPayload({ from: stored.toUpperCase(), subject: 'First question', text: `Parsed ${hex(3)}` }));
    expect(parsed.message.sender.handle).toBe(stored.toLowerCase());
    const shouting: InboundMessage = {
      providerMessageId: normaliseMessageId(newEmailMessageId()),
      sender: { handle: stored.toUpperCase(), email: stored.toUpperCase(), name: 'KNOWN PERSON' },
      subject: 'Second question',
      body: `Hand-built ${hex(3)}`,
    };
    const handBuilt: IngestItem = { id: `corr-${hex(6)}`, tenant_id: w.tenantId, channel: 'email', message: shouting };

    const results = values(await processBatch([parsed, handBuilt]));
    expect(results.map((r) => r.customer_id)).toEqual([known, known]);
    expect(results.map((r) => r.was_created)).toEqual([true, true]);
    expect(await customersOf(w)).toEqual([{ id: known, email: stored }]);
    expect((await ticketsOf(w)).map((t) => t.customer_id)).toEqual([known, known]);
  });

  test('a batch mixing a reply to an open ticket, replies to a solved one (reopened once), a reply into a merged ticket and a new sender', async () => {
    const w = await freshWorkspace();
    const [pa, pb, pc, pd] = [newPhone(), newPhone(), newPhone(), newPhone()];
    const say = (from: string, text: string) => smsItem(w, smsPayload({ from, body: `${text} ${hex(3)}` }));
    const process = (item: IngestItem) => ctx.workerServices.ingestProcessor.process(item);

    // Existing state: A's ticket open, B's solved, C's merged into a ticket made through the API.
    const a1Item = say(pa, 'A1');
    const a1 = await process(a1Item);
    const b1 = await process(say(pb, 'B1'));
    await setStatus(ctx, w, b1.ticket_id, 'solved');
    const c1 = await process(say(pc, 'C1'));
    const winner = await createTicket(ctx, w, { subject: 'The one we keep' });
    await ctx.http.post(`/v1/tickets/${c1.ticket_id}/merge`).set(bearer(w.ownerKey)).send({ target_ticket_id: winner.id }).expect(200);
    const before = await countRows(ctx, w.tenantId);
    const winnerBefore = await timeline(w, winner.id);

    const a2 = say(pa, 'A2');
    const b2 = say(pb, 'B2');
    const c2 = say(pc, 'C2');
    const d1 = say(pd, 'D1');
    const b3 = say(pb, 'B3');
    const [ra2, rb2, rc2, rd1, rb3] = values(await processBatch([a2, b2, c2, d1, b3]));

    const reply = (ticket_id: string, customer_id: string) => ({ channel: 'sms', ticket_id, customer_id, was_created: false, was_duplicate: false });
    expect(ra2).toEqual(reply(a1.ticket_id, a1.customer_id));
    expect(rb2).toEqual(reply(b1.ticket_id, b1.customer_id));
    expect(rb3).toEqual(reply(b1.ticket_id, b1.customer_id));
    expect(rc2).toEqual(reply(winner.id, c1.customer_id));
    expect(rd1).toEqual({ channel: 'sms', ticket_id: expect.any(String), customer_id: expect.any(String), was_created: true, was_duplicate: false });
    expect([a1.ticket_id, b1.ticket_id, c1.ticket_id, winner.id]).not.toContain(rd1!.ticket_id);
    expect([a1.customer_id, b1.customer_id, c1.customer_id]).not.toContain(rd1!.customer_id);

    // Open: appended.
    expect((await timeline(w, a1.ticket_id)).map((e) => [e.kind, e.body])).toEqual([
      ['inbound_sms', a1Item.message.body],
      ['inbound_sms', a2.message.body],
    ]);

    // Solved: open again, reopen and status_changed once, before the inbound events; no event written twice.
    const tickets = new Map((await ticketsOf(w)).map((t) => [t.id, t]));
    expect(tickets.get(b1.ticket_id)).toMatchObject({ status: 'open', reopened_at: expect.any(Date) });
    const bEvents = await timeline(w, b1.ticket_id);
    expect(bEvents.map((e) => e.kind)).toEqual(['inbound_sms', 'status_changed', 'reopen', 'status_changed', 'inbound_sms', 'inbound_sms']);
    expect(bEvents.slice(2)).toEqual([
      { kind: 'reopen', body: '', meta: { from: 'solved' } },
      { kind: 'status_changed', body: '', meta: { from: 'solved', to: 'open' } },
      { kind: 'inbound_sms', body: b2.message.body, meta: expect.objectContaining({ provider_message_id: b2.message.providerMessageId }) },
      { kind: 'inbound_sms', body: b3.message.body, meta: expect.objectContaining({ provider_message_id: b3.message.providerMessageId }) },
    ]);

    // Merged: the loser stays merged and untouched; the message is on the winner.
    expect(tickets.get(c1.ticket_id)).toMatchObject({ status: 'merged', merged_into_id: winner.id });
    expect((await timeline(w, c1.ticket_id)).map((e) => e.body)).not.toContain(c2.message.body);
    expect(await timeline(w, winner.id)).toEqual([
      ...winnerBefore,
      { kind: 'inbound_sms', body: c2.message.body, meta: expect.objectContaining({ provider_message_id: c2.message.providerMessageId }) },
    ]);
    expect(tickets.get(winner.id)).toMatchObject({ status: 'open' });

    // New sender: their own customer, handle and conversation ticket.
    expect(tickets.get(rd1!.ticket_id)).toMatchObject({ customer_id: rd1!.customer_id, status: 'open', conversation_key: `${pd}|${SMS_TO}` });
    expect((await handlesOf(w)).filter((h) => h.handle === pd)).toEqual([{ kind: 'phone', handle: pd, customer_id: rd1!.customer_id }]);
    expect(await timeline(w, rd1!.ticket_id)).toEqual([{ kind: 'inbound_sms', body: d1.message.body, meta: expect.objectContaining({ provider_message_id: d1.message.providerMessageId }) }]);

    // Every message once, every ledger row pointing where its event is; one new ticket, customer and handle.
    for (const [item, r] of [[a2, ra2], [b2, rb2], [c2, rc2], [d1, rd1], [b3, rb3]] as const) {
      expect(await eventsOf(w, item)).toEqual([{ ticket_id: r!.ticket_id, kind: 'inbound_sms' }]);
      expect(await deliveryOf(w, item)).toMatchObject({ ticket_id: r!.ticket_id, customer_id: r!.customer_id, was_created: r!.was_created, duplicate_count: 0 });
    }
    const after = await countRows(ctx, w.tenantId);
    expect(after).toEqual({
      ...before,
      tickets: before.tickets + 1,
      // 5 inbound events, plus reopen and status_changed on B's ticket.
      ticket_events: before.ticket_events + 7,
      customers: before.customers + 1,
      customer_handles: before.customer_handles + 1,
      ingest_deliveries: before.ingest_deliveries + 5,
    });
  });

  test('copies: the same message twice in a batch and a copy of one already in the ledger write once each; re-running the batch answers the same and counts nothing again', async () => {
    const w = await freshWorkspace();
    const earlier = smsItem(w, smsPayload({ from: newPhone(), body: `Already in the ledger ${hex(3)}` }), `corr-earlier-${hex(4)}`);
    const first = await ctx.workerServices.ingestProcessor.process(earlier);

    const payload = smsPayload({ from: newPhone(), body: `Sent twice ${hex(3)}` });
    const original = smsItem(w, payload, `corr-a-${hex(4)}`);
    const copy = smsItem(w, payload, `corr-b-${hex(4)}`);
    const redelivery = smsItem(w, smsPayload({ from: earlier.message.sender.handle, body: earlier.message.body, sid: earlier.message.providerMessageId }), `corr-c-${hex(4)}`);
    const batch = [original, copy, redelivery];
    const before = await countRows(ctx, w.tenantId);

    const results = await processBatch(batch);
    const [ro, rc, rr] = values(results);
    expect(ro).toEqual({ channel: 'sms', ticket_id: expect.any(String), customer_id: expect.any(String), was_created: true, was_duplicate: false });
    expect(rc).toEqual({ ...ro, was_created: false, was_duplicate: true });
    expect(rr).toEqual({ ...first, was_created: false, was_duplicate: true });

    const written = await countRows(ctx, w.tenantId);
    expect(written).toEqual({
      ...before,
      tickets: before.tickets + 1,
      ticket_events: before.ticket_events + 1,
      customers: before.customers + 1,
      customer_handles: before.customer_handles + 1,
      ingest_deliveries: before.ingest_deliveries + 1,
      duplicate_total: before.duplicate_total + 2,
    });
    expect(await eventsOf(w, original)).toEqual([{ ticket_id: ro!.ticket_id, kind: 'inbound_sms' }]);
    expect(await eventsOf(w, earlier)).toEqual([{ ticket_id: first.ticket_id, kind: 'inbound_sms' }]);
    expect(await deliveryOf(w, original)).toMatchObject({ first_correlation_id: original.id, ticket_id: ro!.ticket_id, was_created: true, duplicate_count: 1 });
    expect(await deliveryOf(w, earlier)).toMatchObject({ first_correlation_id: earlier.id, ticket_id: first.ticket_id, was_created: true, duplicate_count: 1 });

    // BullMQ re-running the same job: identical answers, no write, no duplicate counted twice.
    const again = await processBatch(batch);
    expect(again).toEqual(results);
    expect(await countRows(ctx, w.tenantId)).toEqual(written);
    expect((await deliveryOf(w, original))?.duplicate_count).toBe(1);
    expect((await deliveryOf(w, earlier))?.duplicate_count).toBe(1);
  });

  test('6 overlapping batches run concurrently (shared senders and message ids, shuffled): one customer per sender, one open ticket per conversation, one event per message', async () => {
    const SENDERS = 6;
    const BATCHES = 6;
    // Senders new to the workspace, known customers whose last conversation ticket was closed (their next
    // message opens a new ticket, and nothing but the sender lock stops two batches from both opening one:
    // no constraint would), and half of each.
    for (const [seed, knownCount] of [
      [11, 0],
      [12, SENDERS],
      [13, SENDERS / 2],
    ] as const) {
      const w = await freshWorkspace();
      const phones = Array.from({ length: SENDERS }, newPhone);
      const known = phones.slice(SENDERS - knownCount);
      const closed = new Map<string, string>();
      for (const from of known) {
        const r = await ctx.workerServices.ingestProcessor.process(smsItem(w, smsPayload({ from, body: `Earlier ${hex(3)}` })));
        await setStatus(ctx, w, r.ticket_id, 'closed');
        closed.set(from, r.ticket_id);
      }
      // Message b of every sender belongs to batch b: all six batches bring a message from each of the six
      // senders, each the first of that sender's new conversation as far as that batch can tell.
      const payloads = phones.map((from, s) => Array.from({ length: BATCHES }, (_, b) => smsPayload({ from, body: `Seed ${seed}, sender ${s}, message ${b} ${hex(3)}` })));
      const all = payloads.flat();
      let n = 0;
      const batches = Array.from({ length: BATCHES }, (_, b) => {
        const own = payloads.map((m) => m[b]!);
        // Shared provider message ids too: every other batch carries copies of two of the next batch's
        // messages, and each batch a second copy of one of its own. Every item has its own correlation id.
        const next = (b + 1) % BATCHES;
        const copies = b % 2 === 0 ? [payloads[b % SENDERS]![next]!, payloads[(b + 3) % SENDERS]![next]!] : [];
        const list = [...own, ...copies, own[(seed + b) % SENDERS]!];
        return shuffled(list, seed * 1000 + b).map((p) => smsItem(w, p, `s${seed}-b${b}-i${n++}`));
      });
      const items = batches.flat();

      const answered = await Promise.all(batches.map((batch) => processBatch(batch)));

      const results = values(answered.flat());
      expect(answered.map((r) => r.map((x) => x.id))).toEqual(batches.map((batch) => batch.map((i) => i.id)));
      const tickets = (await ticketsOf(w)).filter((t) => ![...closed.values()].includes(t.id));
      const handles = await handlesOf(w);
      const customers = await customersOf(w);
      const ledger = (await ledgerOf(w)).filter((d) => ![...closed.values()].includes(d.ticket_id!));
      const events = await ctx.db
        .selectFrom('ticket_events')
        .select(['ticket_id', 'body', 'kind'])
        .where('tenant_id', '=', w.tenantId)
        .where('ticket_id', 'not in', [...closed.values(), '00000000-0000-0000-0000-000000000000'])
        .execute();

      // One customer (and handle) per sender, one open ticket per conversation (the closed ones untouched).
      const scenario = { seed, knownCount };
      expect({ ...scenario, customers: customers.length }).toEqual({ ...scenario, customers: SENDERS });
      expect(handles.map((h) => h.handle).sort()).toEqual([...phones].sort());
      const customerOf = new Map(handles.map((h) => [h.handle, h.customer_id]));
      expect({ ...scenario, conversations: tickets.map((t) => t.conversation_key).sort() }).toEqual({ ...scenario, conversations: phones.map((from) => `${from}|${SMS_TO}`).sort() });
      const ticketOf = new Map(tickets.map((t) => [t.conversation_key, t]));
      for (const from of phones) expect(ticketOf.get(`${from}|${SMS_TO}`)).toMatchObject({ customer_id: customerOf.get(from), status: 'open' });
      for (const id of closed.values()) expect((await timeline(w, id)).map((e) => e.kind)).toEqual(['inbound_sms', 'status_changed']);

      // One event per distinct message, on its sender's ticket.
      expect(events.map((e) => e.body).sort()).toEqual(all.map((p) => p.Body!).sort());
      for (const e of events) {
        const p = all.find((x) => x.Body === e.body)!;
        expect({ body: e.body, kind: e.kind, ticket: e.ticket_id }).toEqual({ body: e.body, kind: 'inbound_sms', ticket: ticketOf.get(`${p.From}|${SMS_TO}`)!.id });
      }

      // Every answer names its sender's ticket and customer; per message exactly one answer is the write,
      // and per sender exactly one answer opened the ticket.
      results.forEach((r, i) => {
        const from = items[i]!.message.sender.handle;
        expect(r).toMatchObject({ channel: 'sms', ticket_id: ticketOf.get(`${from}|${SMS_TO}`)!.id, customer_id: customerOf.get(from) });
      });
      for (const p of all) {
        const mine = results.filter((_, i) => items[i]!.message.providerMessageId === p.MessageSid);
        expect(mine.filter((r) => !r.was_duplicate)).toHaveLength(1);
      }
      for (const from of phones) {
        expect(results.filter((r, i) => r.was_created && items[i]!.message.sender.handle === from)).toHaveLength(1);
      }

      // The ledger: one row per message, every extra copy counted once.
      expect(ledger).toHaveLength(all.length);
      expect(ledger.reduce((sum, r) => sum + r.duplicate_count, 0)).toBe(items.length - all.length);
      expect(ledger.filter((r) => r.was_created)).toHaveLength(SENDERS);
    }
  });

  test('a message PostgreSQL cannot store (a NUL character) is refused 400 on its own; the rest of its batch is written', async () => {
    const w = await freshWorkspace();
    const poison = smsItem(w, smsPayload({ from: newPhone(), body: 'bad \u0000 byte' }));
    const innocent = smsItem(w, smsPayload({ from: newPhone(), body: 'Fine message' }));
    const [p, i] = await processBatch([poison, innocent]);
    expect(p).toMatchObject({ ok: false, error: { code: 'channel_payload_invalid' } });
    expect(statusOf(p!.error!.code)).toBe(400);
    expect(i).toMatchObject({ ok: true, value: { was_created: true, was_duplicate: false } });
    const ledger = await ctx.db.selectFrom('ingest_deliveries').select('provider_message_id').where('tenant_id', '=', w.tenantId).execute();
    expect(ledger.map((r) => r.provider_message_id)).toEqual([innocent.message.providerMessageId]);
  });

  test('an item for a channel the workspace disabled (or never connected) is refused 404 with nothing written for it; the rest of the batch is written', async () => {
    const w = await freshWorkspace();
    const off = await ctx.http.put('/v1/channels/email').set(bearer(w.ownerKey)).send({ enabled: false, config: { inbound_address: 'support@acme.test' } });
    expect(off.status).toBe(200);
    expect(off.body.enabled).toBe(false);

    const address = newAddress('disabled');
    const s1 = smsItem(w, smsPayload({ from: newPhone(), body: `Before ${hex(3)}` }));
    const email = emailItem(w, emailPayload({ from: address, subject: 'Into a disabled channel', text: `Refused ${hex(3)}` }));
    const visitor = `v_${hex(6)}`;
    const chat = itemOf(w.tenantId, 'web_chat', webChatPayload({ visitorId: visitor, text: `Never connected ${hex(3)}` }));
    const s2 = smsItem(w, smsPayload({ from: newPhone(), body: `After ${hex(3)}` }));

    const results = await processBatch([s1, email, chat, s2]);
    const refusal = { ok: false, error: { code: 'not_found', detail: 'No such channel connection.' } };
    expect(statusOf('not_found')).toBe(404);
    expect(results[1]).toEqual({ id: email.id, ...refusal });
    expect(results[2]).toEqual({ id: chat.id, ...refusal });
    const [r1, r2] = values([results[0]!, results[3]!]);
    expect(r1).toMatchObject({ channel: 'sms', was_created: true });
    expect(r2).toMatchObject({ channel: 'sms', was_created: true });

    // The SMS items are written; of the refused ones nothing at all.
    expect((await ticketsOf(w)).map((t) => t.id).sort()).toEqual([r1!.ticket_id, r2!.ticket_id].sort());
    expect((await ledgerOf(w)).map((d) => d.provider_message_id).sort()).toEqual([s1.message.providerMessageId, s2.message.providerMessageId].sort());
    expect((await customersOf(w)).map((c) => c.id).sort()).toEqual([r1!.customer_id, r2!.customer_id].sort());
    expect((await handlesOf(w)).map((h) => h.kind)).toEqual(['phone', 'phone']);
    expect(await eventsOf(w, email)).toEqual([]);
    expect(await eventsOf(w, chat)).toEqual([]);
    expect(await ctx.db.selectFrom('email_message_ids').select('message_id').where('tenant_id', '=', w.tenantId).execute()).toEqual([]);

    // Alone (a batch of one, or the single-item path) it is refused the same way.
    expect(await processBatch([email])).toEqual([{ id: email.id, ...refusal }]);
    await expect(ctx.workerServices.ingestProcessor.process(email)).rejects.toMatchObject({ code: 'not_found' });
    expect(await deliveryOf(w, email)).toBeUndefined();
    expect((await countRows(ctx, w.tenantId)).ingest_deliveries).toBe(2);
  });

  test('an item whose token_hash is not the connection\'s current inbound token (rotated, or never issued) is refused 404 with nothing written', async () => {
    const w = await createWorkspace(ctx);
    const created = await connect(ctx, w, 'sms', { config: { phone_number: SMS_TO } });
    const oldToken = created.details.inbound_token!;
    const rotated = await ctx.http.post('/v1/channels/sms/inbound-token/rotate').set(bearer(w.ownerKey));
    expect(rotated.status).toBe(200);
    const newToken: string = rotated.body.inbound_token;
    const hashOf = (token: string) => ctx.services.channels.tokenHash(token).toString('hex');

    const say = (text: string, token?: string): IngestItem => ({
      ...smsItem(w, smsPayload({ from: newPhone(), body: `${text} ${hex(3)}` })),
      ...(token !== undefined ? { token_hash: hashOf(token) } : {}),
    });
    const withOld = say('Old token', oldToken);
    const withNew = say('Current token', newToken);
    const byTenant = say('No token (by tenant id)');
    const withBogus = say('Never issued', `itk_${hex(24)}`);

    const results = await processBatch([withOld, withNew, byTenant, withBogus]);
    const refusal = { ok: false, error: { code: 'not_found', detail: 'No such channel connection.' } };
    expect(statusOf('not_found')).toBe(404);
    expect(results[0]).toEqual({ id: withOld.id, ...refusal });
    expect(results[3]).toEqual({ id: withBogus.id, ...refusal });
    const written = values([results[1]!, results[2]!]);

    expect((await ledgerOf(w)).map((d) => d.provider_message_id).sort()).toEqual([withNew.message.providerMessageId, byTenant.message.providerMessageId].sort());
    expect((await ticketsOf(w)).map((t) => t.id).sort()).toEqual(written.map((r) => r.ticket_id).sort());
    expect((await handlesOf(w)).map((h) => h.handle).sort()).toEqual([withNew.message.sender.handle, byTenant.message.sender.handle].sort());
    expect((await customersOf(w)).map((c) => c.id).sort()).toEqual(written.map((r) => r.customer_id).sort());
    expect(await eventsOf(w, withOld)).toEqual([]);
    expect(await eventsOf(w, withBogus)).toEqual([]);
  });
});

// ------------------------------------------------------------------------------------------ HTTP tier

describe('HTTP tier: a cached connection gives way to the worker\'s check (INGEST_RATE_POINTS=3 per 60 s)', () => {
  let hctx: TestContext;
  beforeAll(async () => {
    // A long route cache, so the edge certainly still says "connected" when the worker's check refuses.
    hctx = await startTestApp({ env: { INGEST_RATE_POINTS: '3', INGEST_RATE_WINDOW_SECONDS: '60', INGEST_ROUTE_CACHE_MS: '60000' } });
    await hctx.startWorkers();
  });
  afterAll(async () => {
    await hctx.close();
  });

  /** Status, content type and problem body without the per-request id. */
  const problem = (r: { status: number; body: Record<string, unknown>; headers: Record<string, unknown> }) => {
    const body = { ...r.body };
    expect(body.request_id).toEqual(expect.any(String));
    delete body.request_id;
    delete body.instance;
    return { status: r.status, type: r.headers['content-type'], body };
  };

  /** Spies on the worker's batch call, so a test can tell a refusal by the worker from one at the edge. */
  function workerItems() {
    const seen: IngestItem[] = [];
    const original = hctx.workerServices.ingestProcessor.processBatch;
    const spy = jest.spyOn(hctx.workerServices.ingestProcessor, 'processBatch').mockImplementation(async (items) => {
      seen.push(...items);
      return original(items);
    });
    return { seen, restore: () => spy.mockRestore() };
  }

  test('disabling the connection: the very next delivery is 404 with the never-connected body, nothing is written, and the throttle point is refunded', async () => {
    const w = await createWorkspace(hctx);
    await connect(hctx, w, 'sms', { config: { phone_number: SMS_TO } });
    const never = await createWorkspace(hctx);
    await connect(hctx, never, 'email');
    const reference = problem(await ingest(hctx, 'sms', smsPayload(), never.tenantId));
    expect(reference.status).toBe(404);

    // One accepted delivery (1 of 3 points) warms the edge's cache for (workspace, sms).
    const warm = await ingest(hctx, 'sms', smsPayload({ from: newPhone(), body: 'Warm-up' }), w.tenantId);
    expect(warm.status).toBe(200);
    const off = await hctx.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send({ enabled: false, config: { phone_number: SMS_TO } });
    expect(off.status).toBe(200);

    // Three refused deliveries in a row: each 404 like a never-connected channel, none costs a point.
    const before = await countRows(hctx);
    const spy = workerItems();
    try {
      for (let i = 0; i < 3; i++) {
        const refused = smsPayload({ from: newPhone(), body: `While disabled ${i}` });
        const res = await ingest(hctx, 'sms', refused, w.tenantId);
        expect(problem(res)).toEqual(reference);
        expect(await hctx.db.selectFrom('ingest_deliveries').select('tenant_id').where('provider_message_id', '=', refused.MessageSid!).execute()).toEqual([]);
      }
      // The edge still said "connected" (its cache), so the first refusal was the worker's, in its
      // transaction; that refusal evicted the cached answer, so the next two were refused at the edge.
      expect(spy.seen.filter((i) => i.tenant_id === w.tenantId)).toHaveLength(1);
    } finally {
      spy.restore();
    }
    expect(await countRows(hctx)).toEqual(before);

    // Enabled again: exactly the two points left are there (the refusals gave theirs back), then 429.
    await connect(hctx, w, 'sms', { enabled: true, config: { phone_number: SMS_TO } });
    expect((await ingest(hctx, 'sms', smsPayload({ from: newPhone() }), w.tenantId)).status).toBe(200);
    expect((await ingest(hctx, 'sms', smsPayload({ from: newPhone() }), w.tenantId)).status).toBe(200);
    expect((await ingest(hctx, 'sms', smsPayload({ from: newPhone() }), w.tenantId)).status).toBe(429);
  });

  test('rotating the inbound token: the old token, just used, is 404 on the very next request with the unknown-token body; nothing is written; the new token works', async () => {
    const w = await createWorkspace(hctx);
    const created = await connect(hctx, w, 'web_chat');
    const oldToken = created.details.inbound_token!;
    const unknown = problem(await ingest(hctx, 'web_chat', webChatPayload(), { token: `itk_${hex(24)}` }));
    expect(unknown.status).toBe(404);
    const never = await createWorkspace(hctx);
    expect(problem(await ingest(hctx, 'web_chat', webChatPayload(), never.tenantId))).toEqual(unknown);

    expect((await ingest(hctx, 'web_chat', webChatPayload({ visitorId: `v_${hex(6)}`, text: 'Warm-up' }), { token: oldToken })).status).toBe(200);
    const rotated = await hctx.http.post('/v1/channels/web_chat/inbound-token/rotate').set(bearer(w.ownerKey));
    expect(rotated.status).toBe(200);
    const newToken: string = rotated.body.inbound_token;

    const before = await countRows(hctx);
    const spy = workerItems();
    try {
      const stale = webChatPayload({ visitorId: `v_${hex(6)}`, text: 'With the old token' });
      expect(problem(await ingest(hctx, 'web_chat', stale, { token: oldToken }))).toEqual(unknown);
      expect(spy.seen.map((i) => i.message.providerMessageId)).toEqual([stale.message_id]);
    } finally {
      spy.restore();
    }
    expect(await countRows(hctx)).toEqual(before);

    const fresh = await ingest(hctx, 'web_chat', webChatPayload({ visitorId: `v_${hex(6)}`, text: 'With the new token' }), { token: newToken });
    expect(fresh.status).toBe(200);
    expect(fresh.body).toMatchObject({ channel: 'web_chat', was_created: true, was_duplicate: false });
  });
});

// ------------------------------------------------------------------------------------ lookup plans

/** The statements a store function issues (SQL text and parameters, compiled as for the real pool), not run. */
async function issuedBy(run: (db: Db) => Promise<unknown>): Promise<CompiledQuery[]> {
  const issued: CompiledQuery[] = [];
  const connection: DatabaseConnection = {
    executeQuery: async <R>(q: CompiledQuery) => {
      issued.push(q);
      return { rows: [] as R[] };
    },
    streamQuery: () => {
      throw new Error('not used');
    },
  };
  const driver: Driver = {
    init: async () => {},
    acquireConnection: async () => connection,
    beginTransaction: async () => {},
    commitTransaction: async () => {},
    rollbackTransaction: async () => {},
    releaseConnection: async () => {},
    destroy: async () => {},
  };
  const recorder = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => driver,
      createIntrospector: (k) => new PostgresIntrospector(k),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
  await run(recorder);
  return issued;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}
type ExplainRow = { 'QUERY PLAN': { Plan: PlanNode }[] };

interface Read {
  node: string;
  on: string;
  perLoop: number;
  total: number;
}

/** Rows each node on the relation (or one of its indexes) read: emitted plus filtered away, per loop and in all. */
function readsOn(plan: PlanNode, relation: string, indexes: Map<string, string>): Read[] {
  const out: Read[] = [];
  const walk = (n: PlanNode) => {
    const on = n['Relation Name'] ?? (n['Index Name'] ? indexes.get(n['Index Name']) : undefined);
    if (on === relation) {
      // EXPLAIN reports rows and rows removed as per-loop averages.
      const perLoop = n['Actual Rows'] + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0);
      out.push({ node: `${n['Node Type']}${n['Index Name'] ? ` using ${n['Index Name']}` : ''}`, on, perLoop, total: perLoop * n['Actual Loops'] });
    }
    for (const c of n.Plans ?? []) walk(c);
  };
  walk(plan);
  return out;
}

/** A parameter as an SQL literal (for EXECUTE's arguments): strings, numbers, arrays of strings. */
function literal(v: unknown): string {
  if (Array.isArray(v)) return `ARRAY[${v.map(literal).join(', ')}]`;
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return escapeLiteral(v);
  throw new Error(`no literal for ${typeof v}`);
}

describe('threading lookups probe indexes per key, never scan the workspace', () => {
  let ctx: TestContext;
  let w: Workspace;
  const SEEDED = 3000;
  const KEYS = 10;
  let phones: string[] = [];
  let indexes = new Map<string, string>();
  let prepared = 0;

  beforeAll(async () => {
    ctx = await startTestApp();
    w = await createWorkspace(ctx);
    // 3000 SMS customers, each with a handle and a conversation ticket; every tenth conversation also has an
    // older closed ticket. Written with SQL for speed, within the tables' constraints.
    await sql`
      with c as (
        insert into customers (id, tenant_id, display_name, email)
        select gen_random_uuid(), ${w.tenantId}::uuid, '+1556' || lpad(g::text, 7, '0'), '' from generate_series(1, ${SEEDED}::int) g
        returning id, display_name as phone
      ), h as (
        insert into customer_handles (tenant_id, kind, handle, customer_id)
        select ${w.tenantId}::uuid, 'phone', phone, id from c
        returning customer_id, handle
      ), p as (
        select id from sla_policies where tenant_id = ${w.tenantId}::uuid and is_default
      )
      insert into tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id,
                           first_response_due, resolution_due, conversation_key, solved_at, created_at, updated_at)
      select gen_random_uuid(), ${w.tenantId}::uuid, 'Seeded conversation', 'Seeded', v.status, 'normal', 'sms', h.customer_id, p.id,
             now() + interval '1 hour', now() + interval '1 day', h.handle || ${`|${SMS_TO}`}, v.solved_at, now() - v.age, now() - v.age
      from h cross join p
      cross join lateral (
        values ('open', null::timestamptz, interval '1 minute'),
               ('closed', now() - interval '2 hours', interval '3 hours')
      ) as v(status, solved_at, age)
      where v.status = 'open' or right(h.handle, 1) = '0'`.execute(ctx.db);
    phones = (await ctx.db.selectFrom('customer_handles').select('handle').where('tenant_id', '=', w.tenantId).orderBy('handle').execute()).map((r) => r.handle);
    const idx = await sql<{ indexname: string; tablename: string }>`
      select indexname, tablename from pg_indexes where tablename in ('tickets', 'customer_handles')`.execute(ctx.db);
    indexes = new Map(idx.rows.map((r) => [r.indexname, r.tablename]));
  });
  afterAll(async () => {
    await ctx.close();
  });

  /** 8 keys that exist (spread over the workspace) and 2 that do not. */
  const lookupPhones = () => [...Array.from({ length: KEYS - 2 }, (_, i) => phones[Math.floor(((i + 0.5) * phones.length) / (KEYS - 2))]!), '+19990000001', '+19990000002'];
  const conversations = () => lookupPhones().map((p) => ({ source: 'sms', key: `${p}|${SMS_TO}` }));
  const handles = () => lookupPhones().map((handle) => ({ kind: 'phone', handle }));

  /** The one statement each lookup issues, exactly as the store writes it. */
  const lookups = async () => {
    const [conversationsSql] = await issuedBy((db) => ticketStore.openConversationTickets(db, w.tenantId, conversations(), ctx.config.THREAD_WINDOW_HOURS));
    const [handlesSql] = await issuedBy((db) => customerStore.findHandles(db, w.tenantId, handles()));
    return [
      { name: 'openConversationTickets', relation: 'tickets', q: conversationsSql! },
      { name: 'findHandles', relation: 'customer_handles', q: handlesSql! },
    ];
  };

  /** The plan the statement gets when sent as is (unnamed: a custom plan for these parameter values). */
  async function customPlan(exec: Executor, q: CompiledQuery): Promise<PlanNode> {
    const { rows } = await exec.executeQuery<ExplainRow>(CompiledQuery.raw(`explain (analyze, format json) ${q.sql}`, [...q.parameters]));
    return rows[0]!['QUERY PLAN'][0]!.Plan;
  }

  /** The plan a named prepared statement may settle on after a few executions: the generic one. */
  async function genericPlan(q: CompiledQuery): Promise<PlanNode> {
    const name = `lookup_probe_${++prepared}`;
    return ctx.db.transaction().execute(async (tx) => {
      await tx.executeQuery(CompiledQuery.raw(`prepare ${name} as ${q.sql}`));
      await tx.executeQuery(CompiledQuery.raw('set local plan_cache_mode = force_generic_plan'));
      const { rows } = await tx.executeQuery<ExplainRow>(CompiledQuery.raw(`explain (analyze, format json) execute ${name}(${q.parameters.map(literal).join(', ')})`));
      await tx.executeQuery(CompiledQuery.raw(`deallocate ${name}`));
      return rows[0]!['QUERY PLAN'][0]!.Plan;
    });
  }

  /**
   * Nodes on the relation that read more than a few rows per probe or more than a few per key in all (every
   * lookup, custom and generic plan): a report of all of them, not just the first.
   */
  async function scans(stats: string) {
    const out: (Read & { lookup: string })[] = [];
    for (const { name, relation, q } of await lookups()) {
      for (const [planned, plan] of [
        ['custom plan', await customPlan(ctx.db, q)],
        ['generic plan', await genericPlan(q)],
      ] as const) {
        const lookup = `${name}, ${planned}, ${stats}`;
        const reads = readsOn(plan, relation, indexes);
        if (reads.length === 0) out.push({ lookup, node: '(no node on the relation)', on: relation, perLoop: NaN, total: NaN });
        for (const r of reads) if (r.perLoop > 10 || r.total > KEYS * 3) out.push({ lookup, ...r });
      }
    }
    return out;
  }

  test(`openConversationTickets and findHandles for ${KEYS} keys read a few rows per key of ${SEEDED} (custom and generic plans, before and after ANALYZE)`, async () => {
    const counts = await countRows(ctx, w.tenantId);
    expect(counts).toMatchObject({ customers: SEEDED, customer_handles: SEEDED, tickets: SEEDED + SEEDED / 10 });
    // The plans below are of real lookups: these keys find what exists.
    expect((await ticketStore.openConversationTickets(ctx.db, w.tenantId, conversations(), ctx.config.THREAD_WINDOW_HOURS)).size).toBe(KEYS - 2);
    expect((await customerStore.findHandles(ctx.db, w.tenantId, handles())).size).toBe(KEYS - 2);

    // No statistics for these rows yet, as after a bulk import into a table autovacuum has not analyzed.
    const before = await scans('no statistics');
    await sql`analyze tickets, customer_handles, customers`.execute(ctx.db);
    const after = await scans('analyzed');
    expect([...before, ...after]).toEqual([]);
  });

  test('the measure sees a scan: with index access disabled the same statements read the whole workspace', async () => {
    for (const { relation, q } of await lookups()) {
      await ctx.db.transaction().execute(async (tx) => {
        for (const setting of ['enable_indexscan', 'enable_indexonlyscan', 'enable_bitmapscan']) await sql`select set_config(${setting}, 'off', true)`.execute(tx);
        const total = readsOn(await customPlan(tx, q), relation, indexes).reduce((sum, r) => sum + r.total, 0);
        expect(total).toBeGreaterThanOrEqual(SEEDED);
      });
    }
  });
});
