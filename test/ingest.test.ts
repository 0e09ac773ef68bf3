/**
 * Public intake: POST /v1/ingest/{channel} (spec: Public intake, rules 1–5; Ingest result; Errors; Limits)
 * and GET /v1/ingest/deliveries. Real workers run the ingest jobs.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import {
  ADAPTER_CHANNELS,
  connect,
  conversation,
  countRows,
  ingest,
  ticketDetail,
  type AdapterChannel,
  type RowCounts,
  type TicketEvent,
} from './helpers/ingest';
import {
  emailPayload,
  newEmailMessageId,
  normaliseMessageId,
  smsPayload,
  telegramUpdate,
  webChatPayload,
  whatsappMessage,
  whatsappPayload,
  whatsappStatus,
} from './helpers/payloads';
import { createTicket, setStatus } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

/** Every adapter channel connected, plus facebook (no adapter). */
/** Only email connected. */
const tokens: Record<string, string> = {};

const { ctx, workspaces: [ws, ws2] } = useTestApp({ workers: true, workspaces: 2 });
beforeAll(async () => {
  for (const channel of [...ADAPTER_CHANNELS, 'facebook']) {
    const c = await connect(ctx, ws, channel, { config: { label: `${channel} main`, secret: `${channel}-secret` } });
    tokens[channel] = c.details.inbound_token!;
  }
  await connect(ctx, ws2, 'email');
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

const send = (channel: string, payload: unknown, via: Parameters<typeof ingest>[3] = ws.tenantId) => ingest(ctx, channel, payload, via);

/** Sends and insists on a 200 Ingest result. */
async function accepted(channel: string, payload: unknown, via: Parameters<typeof ingest>[3] = ws.tenantId) {
  const res = await send(channel, payload, via);
  if (res.status !== 200) throw new Error(`ingest ${channel}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { channel: string; ticket_id: string; customer_id: string; was_created: boolean; was_duplicate: boolean; messages?: unknown[] };
}

const diff = (after: RowCounts, before: RowCounts) =>
  Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - before[k as keyof RowCounts]])) as Record<keyof RowCounts, number>;
const NOTHING: Record<keyof RowCounts, number> = {
  tickets: 0,
  ticket_events: 0,
  customers: 0,
  customer_handles: 0,
  email_message_ids: 0,
  ingest_deliveries: 0,
  duplicate_total: 0,
};

async function expectNothingWritten(action: () => Promise<unknown>) {
  const before = await countRows(ctx);
  await action();
  expect(diff(await countRows(ctx), before)).toEqual(NOTHING);
}

const inboundEvents = (events: TicketEvent[], channel: string) => events.filter((e) => e.kind === `inbound_${channel}`);

/** A payload each adapter must refuse. */
const MALFORMED: Record<AdapterChannel, unknown> = {
  email: { ...emailPayload(), From: 'not an address', FromFull: { Email: '', Name: '', MailboxHash: '' } },
  sms: (() => {
    const p: Record<string, string> = smsPayload();
    delete p.MessageSid;
    return p;
  })(),
  whatsapp: { object: 'whatsapp_business_account', entry: 'not-an-array' },
  telegram: { message: { text: 'no update_id' } },
  web_chat: { ...webChatPayload(), sent_at: 'yesterday-ish' },
};

describe.each(ADAPTER_CHANNELS.map((c) => [c]))('%s adapter', (channel) => {
  test('a new message creates a ticket and its customer', async () => {
    const conv = conversation(channel);
    const text = `First message on ${channel}: my parcel ${randomUUID().slice(0, 8)} is missing`;
    const before = await countRows(ctx, ws.tenantId);
    const r = await accepted(channel, conv.next(text));
    expect(r).toEqual({ channel, ticket_id: expect.stringMatching(UUID), customer_id: expect.stringMatching(UUID), was_created: true, was_duplicate: false });

    const d = diff(await countRows(ctx, ws.tenantId), before);
    expect(d).toMatchObject({ tickets: 1, customers: 1, ticket_events: 1, ingest_deliveries: 1, duplicate_total: 0 });
    expect(d.customer_handles).toBe(channel === 'email' ? 0 : 1);
    expect(d.email_message_ids).toBe(channel === 'email' ? 1 : 0);

    const t = await ticketDetail(ctx, ws, r.ticket_id);
    expect(t).toMatchObject({ source: channel, status: 'open', customer_id: r.customer_id, customer_name: conv.customerName, description: text });
    if (channel === 'email') expect(t).toMatchObject({ subject: 'Where is my order?', customer_email: conv.customerEmail });
    else expect(t.subject).toBe(text.slice(0, 80));
    expect(t.events).toHaveLength(1);
    const [first] = t.events;
    expect(first).toMatchObject({ kind: `inbound_${channel}`, actor_type: 'customer', body: text });
    expect(first).not.toHaveProperty('actor_user_id');
    expect(first!.meta.provider_message_id).toEqual(expect.any(String));
  });

  test('a reply threads into the same ticket and customer', async () => {
    const conv = conversation(channel);
    const a = await accepted(channel, conv.next('Question one'));
    const before = await countRows(ctx, ws.tenantId);
    const b = await accepted(channel, conv.next('Follow-up two'));
    expect(b).toEqual({ channel, ticket_id: a.ticket_id, customer_id: a.customer_id, was_created: false, was_duplicate: false });
    const d = diff(await countRows(ctx, ws.tenantId), before);
    expect(d).toMatchObject({ tickets: 0, customers: 0, ticket_events: 1, ingest_deliveries: 1, customer_handles: 0 });

    const t = await ticketDetail(ctx, ws, a.ticket_id);
    expect(inboundEvents(t.events, channel).map((e) => e.body)).toEqual(['Question one', 'Follow-up two']);
    const reply = t.events[t.events.length - 1]!;
    expect(reply).toMatchObject({ kind: `inbound_${channel}`, actor_type: 'customer' });
    expect(reply).not.toHaveProperty('actor_user_id');
    expect(reply.meta.provider_message_id).toEqual(expect.any(String));
  });

  test('a redelivery is was_duplicate: same ticket, nothing written twice, duplicate_count counts it', async () => {
    const conv = conversation(channel);
    const payload = conv.next('Please answer once');
    const first = await accepted(channel, payload);
    const before = await countRows(ctx, ws.tenantId);
    for (let i = 1; i <= 2; i++) {
      const again = await accepted(channel, payload);
      expect(again).toEqual({ channel, ticket_id: first.ticket_id, customer_id: first.customer_id, was_created: false, was_duplicate: true });
    }
    expect(diff(await countRows(ctx, ws.tenantId), before)).toEqual({ ...NOTHING, duplicate_total: 2 });
    const t = await ticketDetail(ctx, ws, first.ticket_id);
    expect(inboundEvents(t.events, channel)).toHaveLength(1);
  });

  test('a payload the adapter cannot read is 400 channel_payload_invalid and writes nothing', async () => {
    await expectNothingWritten(async () => {
      const res = await send(channel, MALFORMED[channel]);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('channel_payload_invalid');
      expect(res.body.detail).toEqual(expect.stringContaining(channel));
    });
  });
});

describe('email threading', () => {
  test('References alone (no In-Reply-To) threads to the ticket of a Message-ID we saw', async () => {
    const from = `refs.${randomUUID().slice(0, 8)}@customer.test`;
    const firstId = newEmailMessageId();
    const a = await accepted('email', emailPayload({ from, messageId: firstId }));
    const b = await accepted('email', emailPayload({ from, references: [`unknown.${firstId}`, firstId] }));
    expect(b).toMatchObject({ ticket_id: a.ticket_id, was_created: false });
  });

  test('a reply to a reply threads too (each inbound Message-ID is remembered)', async () => {
    const from = `chain.${randomUUID().slice(0, 8)}@customer.test`;
    const id1 = newEmailMessageId();
    const id2 = newEmailMessageId();
    const a = await accepted('email', emailPayload({ from, messageId: id1 }));
    await accepted('email', emailPayload({ from, messageId: id2, inReplyTo: id1 }));
    const c = await accepted('email', emailPayload({ from, inReplyTo: `<${id2.toUpperCase()}>` }));
    expect(c).toMatchObject({ ticket_id: a.ticket_id, was_created: false });
  });

  test('an email with a fresh subject and no thread headers is a new ticket even from a known customer', async () => {
    const from = `known.${randomUUID().slice(0, 8)}@customer.test`;
    const a = await accepted('email', emailPayload({ from }));
    const b = await accepted('email', emailPayload({ from, subject: 'Another question' }));
    expect(b.was_created).toBe(true);
    expect(b.ticket_id).not.toBe(a.ticket_id);
    expect(b.customer_id).toBe(a.customer_id);
  });

  test('In-Reply-To a Message-ID seen in another workspace does not thread across workspaces', async () => {
    const id = newEmailMessageId();
    const other = await accepted('email', emailPayload({ messageId: id }), ws2.tenantId);
    const mine = await accepted('email', emailPayload({ inReplyTo: id }));
    expect(mine.was_created).toBe(true);
    expect(mine.ticket_id).not.toBe(other.ticket_id);
  });

  test('the plus-address hash (support+<ticket id>@) threads when headers are dropped; another workspace\'s id does not', async () => {
    const a = await accepted('email', emailPayload({}));
    const b = await accepted('email', emailPayload({ mailboxHash: a.ticket_id }));
    expect(b).toMatchObject({ ticket_id: a.ticket_id, was_created: false });
    const foreign = await accepted('email', emailPayload({}), ws2.tenantId);
    const c = await accepted('email', emailPayload({ mailboxHash: foreign.ticket_id }));
    expect(c.was_created).toBe(true);
    expect((await ctx.db.selectFrom('tickets').select('tenant_id').where('id', '=', c.ticket_id).executeTakeFirstOrThrow()).tenant_id).toBe(ws.tenantId);
  });
});

describe('conversation state', () => {
  test.each([['email'], ['telegram']] as const)('%s: a reply to a solved ticket reopens it (reopen + status_changed events)', async (channel) => {
    const conv = conversation(channel);
    const a = await accepted(channel, conv.next('It broke'));
    await setStatus(ctx, ws, a.ticket_id, 'solved');
    const b = await accepted(channel, conv.next('It broke again'));
    expect(b).toMatchObject({ ticket_id: a.ticket_id, was_created: false, was_duplicate: false });

    const t = await ticketDetail(ctx, ws, a.ticket_id);
    expect(t.status).toBe('open');
    expect(t.reopened_at).toMatch(ISO);
    const tail = t.events.slice(-3);
    expect(tail.map((e) => e.kind)).toEqual(['reopen', 'status_changed', `inbound_${channel}`]);
    expect(tail[0]).toMatchObject({ actor_type: 'customer', meta: { from: 'solved' } });
    expect(tail[1]).toMatchObject({ actor_type: 'customer', meta: { from: 'solved', to: 'open' } });
    expect(tail[2]).toMatchObject({ body: 'It broke again' });
    for (const e of tail) expect(e).not.toHaveProperty('actor_user_id');
  });

  test.each([['email'], ['whatsapp']] as const)('%s: a reply to a merged ticket lands on the winner', async (channel) => {
    const conv = conversation(channel);
    const loser = await accepted(channel, conv.next('Original question'));
    const winner = await createTicket(ctx, ws);
    await ctx.http.post(`/v1/tickets/${loser.ticket_id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: winner.id }).expect(200);

    const before = await countRows(ctx, ws.tenantId);
    const reply = await accepted(channel, conv.next('Any news?'));
    expect({ ticket_id: reply.ticket_id, was_created: reply.was_created }).toEqual({ ticket_id: winner.id, was_created: false });
    expect(diff(await countRows(ctx, ws.tenantId), before)).toMatchObject({ tickets: 0 });
    const w = await ticketDetail(ctx, ws, winner.id);
    expect(w.events[w.events.length - 1]).toMatchObject({ kind: `inbound_${channel}`, body: 'Any news?', actor_type: 'customer' });
    const l = await ticketDetail(ctx, ws, loser.ticket_id);
    expect(l.status).toBe('merged');
    expect(l.events.filter((e) => e.body === 'Any news?')).toEqual([]);
  });

  test('email: a reply to a closed ticket starts a new ticket; the closed one stays closed', async () => {
    const conv = conversation('email');
    const a = await accepted('email', conv.next('Old issue'));
    await setStatus(ctx, ws, a.ticket_id, 'closed');
    const b = await accepted('email', conv.next('Re: old issue, new problem'));
    expect(b.was_created).toBe(true);
    expect(b.ticket_id).not.toBe(a.ticket_id);
    expect(b.customer_id).toBe(a.customer_id);
    const old = await ticketDetail(ctx, ws, a.ticket_id);
    expect(old.status).toBe('closed');
    expect(inboundEvents(old.events, 'email')).toHaveLength(1);
  });

  test('sms: a message after the conversation\'s ticket was closed starts a new ticket', async () => {
    const conv = conversation('sms');
    const a = await accepted('sms', conv.next('First'));
    await setStatus(ctx, ws, a.ticket_id, 'closed');
    const b = await accepted('sms', conv.next('Second'));
    expect(b.was_created).toBe(true);
    expect(b.ticket_id).not.toBe(a.ticket_id);
    expect(b.customer_id).toBe(a.customer_id);
  });

  test('web_chat: a message after THREAD_WINDOW_HOURS starts a new ticket; inside the window it threads', async () => {
    const hours = ctx.config.THREAD_WINDOW_HOURS;
    const conv = conversation('web_chat');
    const a = await accepted('web_chat', conv.next('Hello'));
    await sql`update tickets set updated_at = now() - make_interval(hours => ${hours - 1}) where id = ${a.ticket_id}`.execute(ctx.db);
    const inside = await accepted('web_chat', conv.next('Still there?'));
    expect(inside).toMatchObject({ ticket_id: a.ticket_id, was_created: false });

    await sql`update tickets set updated_at = now() - make_interval(hours => ${hours + 1}) where id = ${a.ticket_id}`.execute(ctx.db);
    const after = await accepted('web_chat', conv.next('Back again days later'));
    expect(after.was_created).toBe(true);
    expect(after.ticket_id).not.toBe(a.ticket_id);
    expect(after.customer_id).toBe(a.customer_id);
    const t = await ticketDetail(ctx, ws, after.ticket_id);
    expect(t.events.map((e) => e.body)).toEqual(['Back again days later']);
  });

  test('chat threading is per sender: another customer on the same channel gets their own ticket', async () => {
    const a = await accepted('telegram', conversation('telegram').next('Mine'));
    const b = await accepted('telegram', conversation('telegram').next('Mine too'));
    expect(b.was_created).toBe(true);
    expect(b.ticket_id).not.toBe(a.ticket_id);
    expect(b.customer_id).not.toBe(a.customer_id);
  });
});

describe('whatsapp specifics', () => {
  test('a statuses-only webhook (delivery receipts) is 200 ignored and writes nothing', async () => {
    await expectNothingWritten(async () => {
      const res = await send('whatsapp', whatsappPayload({ statuses: [whatsappStatus(), whatsappStatus({ status: 'read' })] }));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ channel: 'whatsapp', ignored: true });
      expect(res.body).not.toHaveProperty('ticket_id');
    });
  });

  test('two messages from two customers in one POST: two tickets, both answered in messages[]', async () => {
    const m1 = whatsappMessage({ from: '447700900101', text: 'From the first customer' });
    const m2 = whatsappMessage({ from: '447700900202', text: 'From the second customer' });
    const before = await countRows(ctx, ws.tenantId);
    const r = await accepted('whatsapp', whatsappPayload({ messages: [m1, m2], names: { '447700900101': 'One', '447700900202': 'Two' } }));
    expect(r.messages).toHaveLength(2);
    const [a, b] = r.messages as Array<{ ticket_id: string; customer_id: string; was_created: boolean; was_duplicate: boolean }>;
    expect(a).toMatchObject({ channel: 'whatsapp', was_created: true, was_duplicate: false });
    expect(b).toMatchObject({ channel: 'whatsapp', was_created: true, was_duplicate: false });
    expect(a!.ticket_id).not.toBe(b!.ticket_id);
    expect(r.ticket_id).toBe(a!.ticket_id);
    expect(diff(await countRows(ctx, ws.tenantId), before)).toMatchObject({ tickets: 2, customers: 2, ingest_deliveries: 2 });
    expect((await ticketDetail(ctx, ws, b!.ticket_id)).customer_name).toBe('Two');

    // The same POST redelivered: both duplicates, nothing new.
    const again = await accepted('whatsapp', whatsappPayload({ messages: [m1, m2] }));
    expect((again.messages as Array<{ was_duplicate: boolean }>).map((m) => m.was_duplicate)).toEqual([true, true]);
  });

  test('two messages from one customer in one POST: one ticket, the second threaded', async () => {
    const from = '447700900303';
    const r = await accepted('whatsapp', whatsappPayload({ messages: [whatsappMessage({ from, text: 'Part one' }), whatsappMessage({ from, text: 'Part two' })] }));
    const [a, b] = r.messages as Array<{ ticket_id: string; was_created: boolean }>;
    expect(a).toMatchObject({ was_created: true });
    expect(b).toMatchObject({ ticket_id: a!.ticket_id, was_created: false });
    const t = await ticketDetail(ctx, ws, a!.ticket_id);
    expect(inboundEvents(t.events, 'whatsapp').map((e) => e.body)).toEqual(['Part one', 'Part two']);
  });
});

test('telegram: an edited_message is not a new message (200 ignored, nothing written)', async () => {
  await expectNothingWritten(async () => {
    const res = await send('telegram', telegramUpdate({ kind: 'edited_message' }));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ channel: 'telegram', ignored: true });
  });
});

describe('ledger', () => {
  test('concurrent copies of one message write one ticket; the rest are duplicates', async () => {
    const payload = conversation('web_chat').next('Sent five times at once');
    const before = await countRows(ctx, ws.tenantId);
    const results = await Promise.all(Array.from({ length: 5 }, () => accepted('web_chat', payload)));
    expect(results.filter((r) => r.was_created)).toHaveLength(1);
    expect(results.filter((r) => r.was_duplicate)).toHaveLength(4);
    expect(new Set(results.map((r) => r.ticket_id)).size).toBe(1);
    expect(diff(await countRows(ctx, ws.tenantId), before)).toMatchObject({ tickets: 1, ticket_events: 1, customers: 1, ingest_deliveries: 1, duplicate_total: 4 });
  });

  test('is keyed by (workspace, channel, provider message id): the same id elsewhere is not a duplicate', async () => {
    await connect(ctx, ws2, 'web_chat');
    const messageId = `wc_shared_${randomUUID()}`;
    const here = await accepted('web_chat', webChatPayload({ messageId, visitorId: `v_${randomUUID()}` }));
    const there = await accepted('web_chat', webChatPayload({ messageId, visitorId: `v_${randomUUID()}` }), ws2.tenantId);
    expect(there).toMatchObject({ was_created: true, was_duplicate: false });
    expect(there.ticket_id).not.toBe(here.ticket_id);
    // The same string as an SMS MessageSid, in the same workspace, on another channel.
    const sms = await accepted('sms', smsPayload({ sid: messageId, from: '+15550190001' }));
    expect(sms).toMatchObject({ was_created: true, was_duplicate: false });
  });

  test('a redelivered reply returns the reply\'s first result (was_created false) and adds no event', async () => {
    const conv = conversation('sms');
    const a = await accepted('sms', conv.next('One'));
    const replyPayload = conv.next('Two');
    await accepted('sms', replyPayload);
    const again = await accepted('sms', replyPayload);
    expect(again).toMatchObject({ ticket_id: a.ticket_id, was_created: false, was_duplicate: true });
    expect(inboundEvents((await ticketDetail(ctx, ws, a.ticket_id)).events, 'sms')).toHaveLength(2);
  });
});

describe('workspace resolution', () => {
  test('by tenant_id (any letter case)', async () => {
    const r = await accepted('telegram', conversation('telegram').next('Upper-case tenant'), ws.tenantId.toUpperCase());
    const row = await ctx.db.selectFrom('tickets').select('tenant_id').where('id', '=', r.ticket_id).executeTakeFirstOrThrow();
    expect(row.tenant_id).toBe(ws.tenantId);
  });

  test('by ?token=<inbound_token>, with no tenant id in the body', async () => {
    const r = await accepted('sms', conversation('sms').next('Via token'), { token: tokens.sms! });
    const row = await ctx.db.selectFrom('tickets').select('tenant_id').where('id', '=', r.ticket_id).executeTakeFirstOrThrow();
    expect(row.tenant_id).toBe(ws.tenantId);
  });

  test('a token for another channel is 404 and writes nothing', async () => {
    await expectNothingWritten(async () => {
      const res = await send('email', emailPayload(), { token: tokens.sms! });
      expect(res.status).toBe(404);
    });
  });

  test('an unknown token is 404', async () => {
    const res = await send('sms', smsPayload(), { token: 'itk_not-a-real-token' });
    expect(res.status).toBe(404);
  });

  test('by agent_id (an agent of the workspace)', async () => {
    const agent = await ctx.http.post('/v1/agents').set(bearer(ws.ownerKey)).send({ name: 'Intake bot' });
    expect(agent.status).toBe(201);
    const r = await accepted('web_chat', conversation('web_chat').next('Via agent'), { agent_id: agent.body.id });
    const row = await ctx.db.selectFrom('tickets').select('tenant_id').where('id', '=', r.ticket_id).executeTakeFirstOrThrow();
    expect(row.tenant_id).toBe(ws.tenantId);

    // ws2's agent cannot reach a channel ws2 has not connected.
    const agent2 = await ctx.http.post('/v1/agents').set(bearer(ws2.ownerKey)).send({ name: 'Other bot' });
    await expectNothingWritten(async () => {
      expect((await send('sms', smsPayload(), { agent_id: agent2.body.id })).status).toBe(404);
      expect((await send('sms', smsPayload(), { agent_id: randomUUID() })).status).toBe(404);
      expect((await send('sms', smsPayload(), { agent_id: 'not-a-uuid' })).status).toBe(404);
    });
  });

  test('neither tenant_id, agent_id nor token is a 400 and writes nothing', async () => {
    await expectNothingWritten(async () => {
      const res = await ctx.http.post('/v1/ingest/sms').send({ payload: smsPayload() });
      expect(res.status).toBe(400);
    });
  });

  test('a disabled connection is 404 (by tenant_id and by its token) and writes nothing', async () => {
    const w = await createWorkspace(ctx);
    const created = await connect(ctx, w, 'web_chat', { enabled: false });
    await expectNothingWritten(async () => {
      expect((await send('web_chat', webChatPayload(), w.tenantId)).status).toBe(404);
      expect((await send('web_chat', webChatPayload(), { token: created.details.inbound_token! })).status).toBe(404);
    });
    // Enabled again, the same token works.
    await connect(ctx, w, 'web_chat', { enabled: true });
    expect((await send('web_chat', webChatPayload(), { token: created.details.inbound_token! })).status).toBe(200);
  });

  test('a channel the workspace has not connected is 404 and writes nothing', async () => {
    await expectNothingWritten(async () => {
      const res = await send('sms', smsPayload(), ws2.tenantId);
      expect(res.status).toBe(404);
    });
  });

  test('an unregistered channel is 404 and writes nothing', async () => {
    await expectNothingWritten(async () => {
      for (const channel of ['myspace', 'SMS', 'api', 'web']) {
        const res = await send(channel, smsPayload());
        expect({ channel, status: res.status }).toEqual({ channel, status: 404 });
      }
    });
  });

  test('a channel id naming an Object.prototype member is unregistered (404), not an adapter-less channel', async () => {
    for (const channel of ['constructor', 'toString', '__proto__']) {
      const res = await send(channel, smsPayload());
      expect({ channel, status: res.status }).toEqual({ channel, status: 404 });
    }
  });

  test('a registered channel without an adapter (facebook, connected) is 400 channel_adapter_unavailable', async () => {
    await expectNothingWritten(async () => {
      const res = await send('facebook', { object: 'page', entry: [{ id: '1', messaging: [{ sender: { id: '42' }, message: { mid: 'm_1', text: 'hi' } }] }] });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('channel_adapter_unavailable');
    });
  });

  test('an unknown tenant and a known tenant without the channel give identical 404 bodies (apart from request_id)', async () => {
    const disabled = await createWorkspace(ctx);
    await connect(ctx, disabled, 'sms', { enabled: false });
    const variants = [
      await send('sms', smsPayload(), randomUUID()), // no such workspace
      await send('sms', smsPayload(), ws2.tenantId), // exists, sms not connected
      await send('sms', smsPayload(), disabled.tenantId), // exists, sms disabled
      await send('sms', smsPayload(), 'not-a-uuid'), // cannot name a workspace
      await send('sms', smsPayload(), { token: 'itk_unknown' }),
      await send('sms', smsPayload(), { agent_id: randomUUID() }),
    ];
    const strip = (r: { status: number; body: Record<string, unknown>; headers: Record<string, unknown> }) => {
      const { request_id, ...rest } = r.body;
      expect(request_id).toEqual(expect.any(String));
      return { status: r.status, body: rest, type: r.headers['content-type'] };
    };
    const [first, ...rest] = variants.map(strip);
    expect(first!.status).toBe(404);
    for (const r of rest) expect(r).toEqual(first);
  });

  test('no credential is read: an invalid Authorization header is ignored, not 401', async () => {
    for (const header of ['Bearer sk_zr_definitely-not-a-key', 'Bearer garbage.jwt.value', 'Basic dXNlcjpwYXNz']) {
      const res = await ctx.http.post('/v1/ingest/telegram').set('Authorization', header).send({ tenant_id: ws.tenantId, payload: conversation('telegram').next('hi') });
      expect(res.status).toBe(200);
    }
    // A valid credential of another workspace does not redirect the message either.
    const res = await ctx.http.post('/v1/ingest/email').set(bearer(ws2.ownerKey)).send({ tenant_id: ws.tenantId, payload: emailPayload() });
    expect(res.status).toBe(200);
    const row = await ctx.db.selectFrom('tickets').select('tenant_id').where('id', '=', res.body.ticket_id).executeTakeFirstOrThrow();
    expect(row.tenant_id).toBe(ws.tenantId);
  });
});

describe('bad input: a clear 4xx and nothing written', () => {
  const cases: Array<[string, () => Promise<{ status: number; body: { code?: string } }>, number, string | null]> = [
    ['a JSON array body', () => ctx.http.post('/v1/ingest/sms').set('Content-Type', 'application/json').send('[1,2]'), 400, null],
    ['a JSON string body', () => ctx.http.post('/v1/ingest/sms').set('Content-Type', 'application/json').send('"hello"'), 400, null],
    ['a JSON null body', () => ctx.http.post('/v1/ingest/sms').set('Content-Type', 'application/json').send('null'), 400, null],
    ['malformed JSON', () => ctx.http.post('/v1/ingest/sms').set('Content-Type', 'application/json').send('{"tenant_id":'), 400, null],
    ['a form-encoded body', () => ctx.http.post('/v1/ingest/sms').type('form').send('MessageSid=SM1&From=%2B1&To=%2B2&Body=hi'), 415, null],
    ['no body', () => ctx.http.post('/v1/ingest/sms'), 400, null],
    ['missing payload', () => ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId }), 400, null],
    ['payload that is a string', () => ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: 'MessageSid=SM1' }), 400, null],
    ['payload that is an array', () => ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: [smsPayload()] }), 400, null],
    ['payload null', () => ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: null }), 400, null],
    ['an unknown body field', () => ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: smsPayload(), extra: 1 }), 400, null],
    ['an unknown query parameter', () => ctx.http.post('/v1/ingest/sms?tenant=x').send({ tenant_id: ws.tenantId, payload: smsPayload() }), 400, null],
    ['tenant_id not a string', () => ctx.http.post('/v1/ingest/sms').send({ tenant_id: 12345, payload: smsPayload() }), 400, null],
    ['an sms payload posted to email', () => send('email', smsPayload()), 400, 'channel_payload_invalid'],
    ['an email payload posted to sms', () => send('sms', emailPayload()), 400, 'channel_payload_invalid'],
    ['a telegram update posted to whatsapp', () => send('whatsapp', telegramUpdate()), 400, 'channel_payload_invalid'],
    ['a whatsapp webhook posted to telegram', () => send('telegram', whatsappPayload()), 400, 'channel_payload_invalid'],
    ['an email payload posted to web_chat', () => send('web_chat', emailPayload()), 400, 'channel_payload_invalid'],
    ['an empty payload', () => send('web_chat', {}), 400, 'channel_payload_invalid'],
    ['an unknown tenant id', () => send('sms', smsPayload(), randomUUID()), 404, null],
    ['a non-UUID tenant id', () => send('sms', smsPayload(), 'acme'), 404, null],
    ['a SQL-ish tenant id', () => send('sms', smsPayload(), "' or 1=1 --"), 404, null],
    ['a token for another channel', () => send('web_chat', webChatPayload(), { token: tokens.email! }), 404, null],
    [
      'a body over 1 MiB (BODY_LIMIT_BYTES default)',
      () => send('web_chat', { ...webChatPayload(), text: 'x'.repeat(1024 * 1024 + 10) }),
      413,
      null,
    ],
  ];

  test.each(cases)('%s', async (_name, run, status, code) => {
    await expectNothingWritten(async () => {
      const res = await run();
      expect(res.status).toBe(status);
      if (code) expect(res.body.code).toBe(code);
      expect(res.body.code).toEqual(expect.any(String));
    });
  });
});

describe('GET /v1/ingest/deliveries', () => {
  let wd: Workspace;
  beforeAll(async () => {
    wd = await createWorkspace(ctx);
    await connect(ctx, wd, 'web_chat');
    await connect(ctx, wd, 'telegram');
  });

  test('admin lists recent deliveries with channel, provider message id, ticket, first_seen_at and duplicate count', async () => {
    const adm = await addMember(ctx, wd, 'admin');
    const messageId = `wc_${randomUUID()}`;
    const payload = webChatPayload({ messageId, visitorId: `v_${randomUUID()}` });
    const first = await accepted('web_chat', payload, wd.tenantId);
    await accepted('web_chat', payload, wd.tenantId);
    await accepted('web_chat', payload, wd.tenantId);
    const tg = telegramUpdate({ fromId: 7_999_000_001 });
    const tgResult = await accepted('telegram', tg, wd.tenantId);
    // Another workspace's delivery with the same id is not listed here.
    await connect(ctx, ws2, 'web_chat').catch(() => undefined);
    await accepted('web_chat', payload, ws2.tenantId);

    const res = await ctx.http.get('/v1/ingest/deliveries').set(bearer(adm.token));
    expect(res.status).toBe(200);
    expect(res.body.deliveries).toHaveLength(2);
    const wc = res.body.deliveries.find((d: { channel: string }) => d.channel === 'web_chat');
    expect(wc).toEqual({
      channel: 'web_chat',
      provider_message_id: messageId,
      ticket_id: first.ticket_id,
      customer_id: first.customer_id,
      was_created: true,
      first_seen_at: expect.stringMatching(ISO),
      last_seen_at: expect.stringMatching(ISO),
      duplicate_count: 2,
    });
    expect(Date.parse(wc.last_seen_at)).toBeGreaterThanOrEqual(Date.parse(wc.first_seen_at));
    const tgRow = res.body.deliveries.find((d: { channel: string }) => d.channel === 'telegram');
    const m = (tg as unknown as { message: { message_id: number; chat: { id: number } } }).message;
    expect(tgRow).toMatchObject({ provider_message_id: `${m.chat.id}:${m.message_id}`, ticket_id: tgResult.ticket_id, duplicate_count: 0 });
    // Newest first.
    expect(res.body.deliveries[0].channel).toBe('telegram');

    const filtered = await ctx.http.get('/v1/ingest/deliveries?channel=telegram').set(bearer(adm.token));
    expect(filtered.body.deliveries.map((d: { channel: string }) => d.channel)).toEqual(['telegram']);
    const newest = await ctx.http.get('/v1/ingest/deliveries?limit=1').set(bearer(adm.token));
    expect(newest.body.deliveries.map((d: { channel: string }) => d.channel)).toEqual(['telegram']);
    const paged = await ctx.http.get(`/v1/ingest/deliveries?limit=1&after=${newest.body.next_cursor}`).set(bearer(adm.token));
    expect(paged.body.deliveries).toHaveLength(1);
    expect(paged.body.deliveries[0].channel).toBe('web_chat');
  });

  test('email deliveries are keyed by the normalised RFC Message-ID', async () => {
    await connect(ctx, wd, 'email');
    const id = newEmailMessageId();
    await accepted('email', emailPayload({ messageId: `<${id.toUpperCase()}>` }), wd.tenantId);
    const res = await ctx.http.get('/v1/ingest/deliveries?channel=email').set(bearer(wd.ownerKey));
    expect(res.body.deliveries.map((d: { provider_message_id: string }) => d.provider_message_id)).toEqual([normaliseMessageId(id)]);
  });

  test('below admin is 403; a key needs channels:read', async () => {
    const ed = await addMember(ctx, wd, 'editor');
    const refused = await ctx.http.get('/v1/ingest/deliveries').set(bearer(ed.token));
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('insufficient_role');
    const viewer = await addMember(ctx, wd, 'viewer');
    expect((await ctx.http.get('/v1/ingest/deliveries').set(bearer(viewer.token))).status).toBe(403);
    const ticketsKey = await mintKey(ctx, wd.ownerKey, { scopes: ['tickets:read'] });
    expect((await ctx.http.get('/v1/ingest/deliveries').set(bearer(ticketsKey.secret))).status).toBe(403);
    const channelsKey = await mintKey(ctx, wd.ownerKey, { scopes: ['channels:read'] });
    expect((await ctx.http.get('/v1/ingest/deliveries').set(bearer(channelsKey.secret))).status).toBe(200);
    expect((await ctx.http.get('/v1/ingest/deliveries')).status).toBe(401);
  });

  test('limit and the cursor are bounded and checked', async () => {
    for (const q of ['limit=0', 'limit=501', 'offset=1', 'limit=abc', 'bogus=1', 'after=xyz', `after=${'A'.repeat(300)}`]) {
      expect((await ctx.http.get(`/v1/ingest/deliveries?${q}`).set(bearer(wd.ownerKey))).status).toBe(400);
    }
  });
});

describe('throttle (INGEST_RATE_POINTS=3 per 60 s, per workspace and channel)', () => {
  const { ctx: tctx } = useTestApp({ env: { INGEST_RATE_POINTS: '3', INGEST_RATE_WINDOW_SECONDS: '60' }, workers: true });

  const tsend = (channel: string, payload: unknown, tenantId: string) => ingest(tctx, channel, payload, tenantId);

  test('the 4th distinct message is 429 with an integer Retry-After, and nothing is written', async () => {
    const w = await createWorkspace(tctx);
    await connect(tctx, w, 'sms');
    await connect(tctx, w, 'web_chat');
    for (let i = 0; i < 3; i++) {
      expect((await tsend('sms', smsPayload({ from: `+1555010${i}000` }), w.tenantId)).status).toBe(200);
    }
    const before = await countRows(tctx);
    const fourth = smsPayload({ from: '+15550109999' });
    const res = await tsend('sms', fourth, w.tenantId);
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toMatch(/^\d+$/);
    const retryAfter = Number(res.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(diff(await countRows(tctx), before)).toEqual(NOTHING);
    expect(await tctx.db.selectFrom('ingest_deliveries').selectAll().where('provider_message_id', '=', fourth.MessageSid!).execute()).toEqual([]);

    // Per (workspace, channel): another channel of the same workspace, and another workspace, still pass.
    expect((await tsend('web_chat', webChatPayload(), w.tenantId)).status).toBe(200);
    const other = await createWorkspace(tctx);
    await connect(tctx, other, 'sms');
    expect((await tsend('sms', smsPayload(), other.tenantId)).status).toBe(200);
  });

  test('duplicates are refunded: one message then five redeliveries never hit 429, and exactly two more distinct fit', async () => {
    const w = await createWorkspace(tctx);
    await connect(tctx, w, 'sms');
    const payload = smsPayload({ from: '+15550108888' });
    const first = await tsend('sms', payload, w.tenantId);
    expect(first.status).toBe(200);
    for (let i = 0; i < 5; i++) {
      const again = await tsend('sms', payload, w.tenantId);
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ ticket_id: first.body.ticket_id, was_duplicate: true });
    }
    expect((await tsend('sms', smsPayload({ from: '+15550108881' }), w.tenantId)).status).toBe(200);
    expect((await tsend('sms', smsPayload({ from: '+15550108882' }), w.tenantId)).status).toBe(200);
    expect((await tsend('sms', smsPayload({ from: '+15550108883' }), w.tenantId)).status).toBe(429);
  });

  test('a refused request for an unknown tenant costs nothing and is never 429', async () => {
    for (let i = 0; i < 5; i++) expect((await tsend('sms', smsPayload(), randomUUID())).status).toBe(404);
  });
});
