/**
 * Web chat both ways (issue 33): a widget opens a visitor session with the connection's inbound token, posts the
 * visitor's messages through intake, and reads the visitor's own conversation (their messages and the agents'
 * replies, never notes) as pages or live. Sessions are isolated from each other and from other workspaces,
 * and rotating the inbound token ends every session and stream.
 */
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { createVisitorTokens } from '../src/domains/web-chat/tokens';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';
import { connect, ingest } from './helpers/ingest';
import { webChatPayload } from './helpers/payloads';
import { connectSse, type SseClient } from './helpers/sse';
import { eventually, sleep } from './helpers/wait';

const SHOP = 'https://shop.northwind.example';
const CACHE_MS = 300;

const { ctx, workspaces: [a, b] } = useTestApp({
  env: {
    WEB_CHAT_CONNECTION_CACHE_MS: String(CACHE_MS),
    WEB_CHAT_STREAMS_PER_VISITOR: '2',
    EVENT_STREAM_POLL_MS: '50',
    EVENT_STREAM_RECHECK_SECONDS: '1',
    EVENT_STREAM_HEARTBEAT_SECONDS: '1',
  },
  workers: true,
  workspaces: 2,
  timeout: 60_000,
});
let tokenA: string;
let tokenB: string;

beforeAll(async () => {
  tokenA = (await connect(ctx, a, 'web_chat', { config: { allowed_origins: [SHOP] } })).details.inbound_token!;
  tokenB = (await connect(ctx, b, 'web_chat', { config: { allowed_origins: [SHOP] } })).details.inbound_token!;
}, 60_000);

// ------------------------------------------------------------------------------------------------ helpers

interface Session {
  visitor_id: string;
  visitor_token: string;
  expires_at: string;
  resumed: boolean;
}
interface Message {
  id: string;
  author: 'visitor' | 'agent';
  agent_name?: string;
  text: string;
  created_at: string;
  message_id?: string;
}

const q = encodeURIComponent;

async function openSession(token: string, o: { visitorId?: string; visitorToken?: string } = {}): Promise<Session> {
  let req = ctx.http.post(`/v1/web-chat/sessions?token=${q(token)}`);
  if (o.visitorToken) req = req.set(bearer(o.visitorToken));
  const res = await req.send(o.visitorId ? { visitor_id: o.visitorId } : {});
  if (res.status !== 201) throw new Error(`session: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Session;
}

const post = (s: Session | string, text: string, messageId = `m_${randomBytes(5).toString('hex')}`) =>
  ctx.http.post('/v1/web-chat/messages').set(bearer(typeof s === 'string' ? s : s.visitor_token)).send({ message_id: messageId, text });

async function say(s: Session, text: string, messageId?: string) {
  const res = await post(s, text, messageId);
  if (res.status !== 200) throw new Error(`post: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { channel: string; message_id: string; was_created: boolean; was_duplicate: boolean };
}

const read = (s: Session | string, query = '') => ctx.http.get(`/v1/web-chat/messages${query}`).set(bearer(typeof s === 'string' ? s : s.visitor_token));

async function conversation(s: Session, query = '') {
  const res = await read(s, query);
  if (res.status !== 200) throw new Error(`read: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { messages: Message[]; next_cursor: string; has_more: boolean };
}

/** The visitor's web chat tickets, newest last (agents find them in their queue; the test reads them directly). */
async function ticketsOf(ws: Workspace, visitorId: string): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`select id from tickets where tenant_id = ${ws.tenantId} and conversation_key = ${visitorId} order by created_at`.execute(ctx.db);
  return rows.map((r) => r.id);
}

async function agentReply(ws: Workspace, ticketId: string, body: string) {
  await ctx.http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(ws.ownerKey)).send({ body }).expect(201);
}
async function agentNote(ws: Workspace, ticketId: string, body: string) {
  await ctx.http.post(`/v1/tickets/${ticketId}/notes`).set(bearer(ws.ownerKey)).send({ body }).expect(201);
}

function stream(o: { session?: Session; queryToken?: string; query?: string; lastEventId?: string; headers?: Record<string, string> }): SseClient {
  const { port } = ctx.server.address() as AddressInfo;
  const query = [o.query, o.queryToken ? `visitor_token=${q(o.queryToken)}` : undefined].filter(Boolean).join('&');
  return connectSse(`http://127.0.0.1:${port}`, o.session?.visitor_token ?? null, {
    path: '/v1/web-chat/messages',
    ...(query ? { query: `?${query}` } : {}),
    ...(o.lastEventId ? { lastEventId: o.lastEventId } : {}),
    ...(o.headers ? { headers: o.headers } : {}),
  });
}
const messagesOf = (c: SseClient) => c.events().filter((e) => e.event === 'message').map((e) => ({ id: e.id!, message: JSON.parse(e.data!) as Message }));
const waitFor = (c: SseClient, n: number, what: string) => eventually(async () => (messagesOf(c).length >= n ? true : undefined), 10_000, what);

// ------------------------------------------------------------------------------------------------ sessions

describe('sessions', () => {
  test('the inbound token opens a session: a fresh visitor id and a signed token with its expiry', async () => {
    const s = await openSession(tokenA);
    expect(s.visitor_id).toMatch(/^wv_[A-Za-z0-9_-]{22}$/);
    expect(s.visitor_token.startsWith('wvt1.')).toBe(true);
    expect(s.resumed).toBe(false);
    const ttl = new Date(s.expires_at).getTime() - Date.now();
    expect(ttl).toBeGreaterThan(7 * 86400_000 - 60_000);
    expect(ttl).toBeLessThanOrEqual(7 * 86400_000);
    expect((await openSession(tokenA)).visitor_id).not.toBe(s.visitor_id);
  });

  test('an unknown token, another channel\'s token or a disabled connection: 404', async () => {
    const unknown = await ctx.http.post('/v1/web-chat/sessions?token=itk_not-a-token').send({});
    expect(unknown.status).toBe(404);
    expect(unknown.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(unknown.body.code).toBe('not_found');
    const w = await createWorkspace(ctx);
    const sms = (await connect(ctx, w, 'sms')).details.inbound_token!;
    expect((await ctx.http.post(`/v1/web-chat/sessions?token=${q(sms)}`).send({})).status).toBe(404);
    const chat = (await connect(ctx, w, 'web_chat')).details.inbound_token!;
    await openSession(chat);
    await connect(ctx, w, 'web_chat', { enabled: false });
    await sleep(CACHE_MS + 100);
    expect((await ctx.http.post(`/v1/web-chat/sessions?token=${q(chat)}`).send({})).status).toBe(404);
  });

  test('a remembered visitor is resumed only with that visitor\'s still-valid token; a visitor id alone starts a new visitor', async () => {
    const s = await openSession(tokenA);
    await say(s, 'Remember me?');
    const resumed = await openSession(tokenA, { visitorId: s.visitor_id, visitorToken: s.visitor_token });
    expect(resumed).toMatchObject({ visitor_id: s.visitor_id, resumed: true });
    expect((await conversation(resumed)).messages.map((m) => m.text)).toEqual(['Remember me?']);

    // The id alone, the id with another visitor's token, or with a token of another workspace: a new visitor.
    const other = await openSession(tokenA);
    const foreign = await openSession(tokenB);
    for (const attempt of [{ visitorId: s.visitor_id }, { visitorId: s.visitor_id, visitorToken: other.visitor_token }, { visitorId: s.visitor_id, visitorToken: foreign.visitor_token }]) {
      const fresh = await openSession(tokenA, attempt);
      expect(fresh.resumed).toBe(false);
      expect(fresh.visitor_id).not.toBe(s.visitor_id);
      expect((await conversation(fresh)).messages).toEqual([]);
    }
    // A token of this workspace's visitor presented at another workspace's token starts a visitor there.
    expect((await openSession(tokenB, { visitorId: s.visitor_id, visitorToken: s.visitor_token })).resumed).toBe(false);
  });
});

// ------------------------------------------------------------------------------------------------ both ways

describe('posting and reading', () => {
  test('the visitor sees their messages and the agents\' replies, oldest first; never a note or any other event', async () => {
    const s = await openSession(tokenA);
    const first = await say(s, 'Hi! Do you ship to Canada?', 'm_first');
    expect(first).toEqual({ channel: 'web_chat', message_id: 'm_first', was_created: true, was_duplicate: false });
    const [ticket] = await ticketsOf(a, s.visitor_id);
    await agentNote(a, ticket!, 'SECRET: customer flagged for fraud review');
    await agentReply(a, ticket!, 'Yes, 3 to 5 working days.');
    await ctx.http.patch(`/v1/tickets/${ticket}`).set(bearer(a.ownerKey)).send({ status: 'pending', tags: ['vip'] }).expect(200);
    await say(s, 'Great, thanks!');

    const { messages, has_more } = await conversation(s);
    expect(has_more).toBe(false);
    expect(messages.map((m) => [m.author, m.text])).toEqual([
      ['visitor', 'Hi! Do you ship to Canada?'],
      ['agent', 'Yes, 3 to 5 working days.'],
      ['visitor', 'Great, thanks!'],
    ]);
    expect(messages[0]).toMatchObject({ message_id: 'm_first' });
    expect(messages[1]).toMatchObject({ agent_name: 'Olive Owner' });
    expect(messages[1]).not.toHaveProperty('message_id');
    expect(Object.keys(messages[0]!).sort()).toEqual(['author', 'created_at', 'id', 'message_id', 'text']);
    expect(JSON.stringify(messages)).not.toContain('SECRET');
    // The answers are the visitor's view: no ticket or customer ids.
    expect(first).not.toHaveProperty('ticket_id');
  });

  test('message_id is the dedupe key per visitor: a retry is written once, another visitor\'s same id is their own message', async () => {
    const s = await openSession(tokenA);
    await say(s, 'Order 1234 never arrived', 'm_1');
    expect(await say(s, 'Order 1234 never arrived', 'm_1')).toMatchObject({ was_duplicate: true, was_created: false });
    const t = await openSession(tokenA);
    expect(await say(t, 'Me too', 'm_1')).toMatchObject({ was_duplicate: false, was_created: true });
    expect((await conversation(s)).messages.map((m) => m.text)).toEqual(['Order 1234 never arrived']);
    expect((await conversation(t)).messages.map((m) => m.text)).toEqual(['Me too']);
  });

  test('the visitor comes from the token, never from the body; bodies are checked', async () => {
    const s = await openSession(tokenA);
    const other = await openSession(tokenA);
    const res = await ctx.http.post('/v1/web-chat/messages').set(bearer(s.visitor_token)).send({ message_id: 'm_x', text: 'hi', visitor_id: other.visitor_id });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    for (const body of [{ message_id: 'm_x', text: '   ' }, { message_id: '', text: 'hi' }, { message_id: 'm_x', text: 'x'.repeat(65537) }, { text: 'hi' }]) {
      expect((await ctx.http.post('/v1/web-chat/messages').set(bearer(s.visitor_token)).send(body)).status).toBe(400);
    }
    expect((await ctx.http.post('/v1/web-chat/messages').set(bearer(s.visitor_token)).send({ message_id: 'm_long', text: 'x'.repeat(65536) })).status).toBe(200);
  });

  test('intake by payload cannot write into a session visitor\'s conversation (their ids are reserved)', async () => {
    const s = await openSession(tokenA);
    const res = await ingest(ctx, 'web_chat', webChatPayload({ visitorId: s.visitor_id, text: 'I am the visitor, honest' }), { token: tokenA });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('channel_payload_invalid');
    expect((await ingest(ctx, 'web_chat', webChatPayload({ messageId: `${s.visitor_id}:m_1` }), { token: tokenA })).status).toBe(400);
    expect((await conversation(s)).messages).toEqual([]);
  });

  test('a visitor\'s conversation spans their tickets: a message after the ticket is closed opens a new one, and both show', async () => {
    const s = await openSession(tokenA);
    await say(s, 'First question');
    const [first] = await ticketsOf(a, s.visitor_id);
    await agentReply(a, first!, 'First answer');
    await ctx.http.patch(`/v1/tickets/${first}`).set(bearer(a.ownerKey)).send({ status: 'closed' }).expect(200);
    expect((await say(s, 'Second question')).was_created).toBe(true);
    const tickets = await ticketsOf(a, s.visitor_id);
    expect(tickets).toHaveLength(2);
    await agentReply(a, tickets[1]!, 'Second answer');
    expect((await conversation(s)).messages.map((m) => m.text)).toEqual(['First question', 'First answer', 'Second question', 'Second answer']);
  });
});

// ------------------------------------------------------------------------------------------------ isolation

describe('isolation', () => {
  test('another visitor, of this workspace or another, never reaches this visitor\'s conversation', async () => {
    const s = await openSession(tokenA);
    await say(s, 'My address is 12 Private Lane');
    const [ticket] = await ticketsOf(a, s.visitor_id);
    await agentReply(a, ticket!, 'Thanks, noted your address');
    const mine = await conversation(s);
    expect(mine.messages).toHaveLength(2);

    const neighbour = await openSession(tokenA);
    const stranger = await openSession(tokenB);
    for (const v of [neighbour, stranger]) {
      await say(v, 'hello');
      const theirs = await conversation(v);
      expect(theirs.messages.map((m) => m.text)).toEqual(['hello']);
      // This visitor's cursor names nothing for them: refused, not read.
      const res = await read(v, `?after=${q(mine.next_cursor)}`);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
    }
    // A stream of the stranger carries nothing of this visitor's either.
    const c = stream({ session: stranger });
    try {
      await waitFor(c, 1, 'the stranger\'s own message');
      await agentReply(a, ticket!, 'Another private detail');
      await say(stranger, 'still here');
      await waitFor(c, 2, 'the stranger\'s second message');
      expect(messagesOf(c).map((m) => m.message.text)).toEqual(['hello', 'still here']);
    } finally {
      c.close();
    }
    // Workspace B's agent cannot see A's ticket, nor can A's visitor see B's (the same id is not found there).
    expect((await ctx.http.get(`/v1/tickets/${ticket}`).set(bearer(b.ownerKey))).status).toBe(404);
  });

  test('a missing, tampered, foreign or expired visitor token: 401 with a stable code', async () => {
    const s = await openSession(tokenA);
    const none = await ctx.http.get('/v1/web-chat/messages');
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('visitor_token_invalid');
    expect(none.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(none.headers['content-type']).toMatch(/^application\/problem\+json/);
    const [mark, kid, payload, mac] = s.visitor_token.split('.') as [string, string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as { v: string };
    const forged = Buffer.from(JSON.stringify({ ...claims, v: 'wv_AAAAAAAAAAAAAAAAAAAAAA' })).toString('base64url');
    for (const bad of [`${mark}.${kid}.${forged}.${mac}`, `${s.visitor_token}x`, a.ownerKey, 'wvt1.nokey.e30.AAAA']) {
      const res = await read(bad);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('visitor_token_invalid');
      expect((await post(bad, 'hi')).body.code).toBe('visitor_token_invalid');
    }
    // A token this deployment signed, whose time is up.
    const { rows } = await sql<{ h: Buffer }>`select inbound_token_hash as h from channel_connections where tenant_id = ${a.tenantId} and channel = 'web_chat'`.execute(ctx.db);
    const expired = createVisitorTokens(ctx.config.ENCRYPTION_KEYS).mint(a.tenantId, s.visitor_id, Date.now() - 1000, rows[0]!.h);
    const res = await read(expired);
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('visitor_token_expired');
  });
});

// ------------------------------------------------------------------------------------------------ cursor

describe('paging', () => {
  test('pages follow the cursor, oldest first; next_cursor is always a place to resume, also at the end', async () => {
    const s = await openSession(tokenA);
    for (let i = 1; i <= 5; i += 1) await say(s, `message ${i}`);
    const seen: string[] = [];
    let page = await conversation(s, '?limit=2');
    seen.push(...page.messages.map((m) => m.text));
    expect(page.has_more).toBe(true);
    while (page.has_more) {
      page = await conversation(s, `?limit=2&after=${q(page.next_cursor)}`);
      seen.push(...page.messages.map((m) => m.text));
    }
    expect(seen).toEqual(['message 1', 'message 2', 'message 3', 'message 4', 'message 5']);
    // At the end: nothing new, and the same cursor goes on once something arrives.
    const end = await conversation(s, `?after=${q(page.next_cursor)}`);
    expect(end.messages).toEqual([]);
    const [ticket] = await ticketsOf(a, s.visitor_id);
    await agentNote(a, ticket!, 'internal only');
    await agentReply(a, ticket!, 'All five received');
    const after = await conversation(s, `?after=${q(end.next_cursor)}`);
    expect(after.messages.map((m) => m.text)).toEqual(['All five received']);
    expect((await conversation(s, `?after=${q(after.next_cursor)}`)).messages).toEqual([]);
  });

  test('a malformed cursor or limit is refused (400), never a 500', async () => {
    const s = await openSession(tokenA);
    for (const query of ['?after=nonsense', '?after=v1.dev.AAAA.AAAA.AAAA', '?limit=0', '?limit=201', '?limit=abc', '?unknown=1']) {
      const res = await read(s, query);
      expect([query, res.status]).toEqual([query, 400]);
    }
  });
});

// ------------------------------------------------------------------------------------------------ live

describe('the live stream', () => {
  test('agent replies and the visitor\'s own messages arrive as frames; a note never does; Last-Event-ID resumes with no gap and no repeat', async () => {
    const s = await openSession(tokenA);
    await say(s, 'Is anyone there?');
    const [ticket] = await ticketsOf(a, s.visitor_id);
    const c = stream({ session: s });
    let last: string;
    try {
      await waitFor(c, 1, 'the history');
      expect(c.contentType()).toMatch(/^text\/event-stream/);
      await agentNote(a, ticket!, 'do not show this');
      await agentReply(a, ticket!, 'Hello! How can I help?');
      await say(s, 'My parcel is late');
      await waitFor(c, 3, 'the reply and the visitor\'s message');
      const got = messagesOf(c);
      expect(got.map((m) => [m.message.author, m.message.text])).toEqual([
        ['visitor', 'Is anyone there?'],
        ['agent', 'Hello! How can I help?'],
        ['visitor', 'My parcel is late'],
      ]);
      expect(c.events().some((e) => (e.data ?? '').includes('do not show this'))).toBe(false);
      last = got[2]!.id;
    } finally {
      c.close();
    }
    // While the widget is away: a reply, a note, another reply.
    await agentReply(a, ticket!, 'Let me check');
    await agentNote(a, ticket!, 'carrier says lost');
    await agentReply(a, ticket!, 'It is on its way again');
    const again = stream({ session: s, lastEventId: last });
    try {
      await waitFor(again, 2, 'the replies sent while away');
      await sleep(300);
      expect(messagesOf(again).map((m) => m.message.text)).toEqual(['Let me check', 'It is on its way again']);
    } finally {
      again.close();
    }
    // A cursor from the list is where a stream starts too (what the widget does after loading the history).
    const page = await conversation(s);
    const fromList = stream({ session: s, query: `after=${q(page.next_cursor)}` });
    try {
      await agentReply(a, ticket!, 'Anything else?');
      await waitFor(fromList, 1, 'the reply after the list');
      await sleep(300);
      expect(messagesOf(fromList).map((m) => m.message.text)).toEqual(['Anything else?']);
    } finally {
      fromList.close();
    }
  });

  test('EventSource\'s ?visitor_token= opens the stream only; the request log never holds the token', async () => {
    const s = await openSession(tokenA);
    await say(s, 'token in the URL');
    ctx.logs.clear();
    const c = stream({ queryToken: s.visitor_token });
    try {
      await waitFor(c, 1, 'the stream by query token');
    } finally {
      c.close();
    }
    const list = await ctx.http.get(`/v1/web-chat/messages?visitor_token=${q(s.visitor_token)}`);
    expect(list.status).toBe(400);
    expect(list.body.errors).toEqual([expect.objectContaining({ path: 'query.visitor_token' })]);
    await sleep(200);
    expect(ctx.logs.text).toContain('/v1/web-chat/messages');
    const [, , , mac] = s.visitor_token.split('.');
    expect(ctx.logs.text).not.toContain(mac);
  });

  test('a stream ends when its visitor token expires, saying so', async () => {
    const s = await openSession(tokenA);
    await say(s, 'short session');
    const { rows } = await sql<{ h: Buffer }>`select inbound_token_hash as h from channel_connections where tenant_id = ${a.tenantId} and channel = 'web_chat'`.execute(ctx.db);
    const brief = createVisitorTokens(ctx.config.ENCRYPTION_KEYS).mint(a.tenantId, s.visitor_id, Date.now() + 2500, rows[0]!.h);
    const c = stream({ session: { ...s, visitor_token: brief } });
    try {
      await waitFor(c, 1, 'the history');
      await eventually(async () => (c.ended() ? true : undefined), 10_000, 'the stream to end at expiry');
      const last = c.blocks().at(-1)!;
      expect(last.event).toBe('session_ended');
      expect(JSON.parse(last.data!)).toMatchObject({ code: 'visitor_token_expired' });
    } finally {
      c.close();
    }
  });

  test('an idle stream moves the client\'s Last-Event-ID on with its heartbeat, so a reconnect does not read back', async () => {
    const s = await openSession(tokenA);
    await say(s, 'hello');
    const c = stream({ session: s });
    try {
      await waitFor(c, 1, 'the history');
      // Other visitors' traffic moves the workspace's log on; this visitor's position moves with it.
      const other = await openSession(tokenA);
      await say(other, 'someone else');
      await eventually(async () => (c.blocks().some((b) => b.comment === 'heartbeat' && b.id !== undefined) ? true : undefined), 10_000, 'a heartbeat with an id');
      const moved = c.blocks().filter((b) => b.comment === 'heartbeat' && b.id !== undefined).at(-1)!.id!;
      expect(moved).not.toBe(messagesOf(c)[0]!.id);
      // The moved id is a cursor like any other: the list resumes there with nothing new.
      expect((await conversation(s, `?after=${q(moved)}`)).messages).toEqual([]);
    } finally {
      c.close();
    }
  });

  test('streams per visitor are capped (429 too_many_streams)', async () => {
    const s = await openSession(tokenA);
    const open = [stream({ session: s }), stream({ session: s })];
    try {
      await eventually(async () => (open.every((c) => c.status() === 200) ? true : undefined), 5000, 'two streams');
      const third = stream({ session: s });
      await eventually(async () => (third.ended() ? true : undefined), 5000, 'the third refused');
      expect(third.status()).toBe(429);
      expect(JSON.parse(third.text()).code).toBe('too_many_streams');
      expect(third.headers()['retry-after']).toBeDefined();
    } finally {
      for (const c of open) c.close();
    }
  });
});

// ------------------------------------------------------------------------------------------------ rotation

describe('rotating the inbound token', () => {
  test('ends every session and every stream of the connection; the new token opens new ones', async () => {
    const w = await createWorkspace(ctx);
    const token = (await connect(ctx, w, 'web_chat', { config: { allowed_origins: [SHOP] } })).details.inbound_token!;
    const s = await openSession(token);
    await say(s, 'before the rotation');
    const c = stream({ session: s });
    try {
      await waitFor(c, 1, 'the stream');
      const rotated = await ctx.http.post('/v1/channels/web_chat/inbound-token/rotate').set(bearer(w.ownerKey)).send({});
      expect(rotated.status).toBe(200);
      const fresh = rotated.body.inbound_token as string;
      await eventually(async () => (c.ended() ? true : undefined), 10_000, 'the stream to end');
      // Its last frame says why (EventSource's reconnect would then be answered 401).
      const last = c.blocks().at(-1)!;
      expect(last.event).toBe('session_ended');
      expect(JSON.parse(last.data!)).toMatchObject({ code: 'visitor_session_ended' });
      for (const res of [await read(s), await post(s, 'after the rotation')]) {
        expect(res.status).toBe(401);
        expect(res.body.code).toBe('visitor_session_ended');
      }
      expect((await ctx.http.post(`/v1/web-chat/sessions?token=${q(token)}`).send({})).status).toBe(404);
      // Resuming with the ended token starts a new visitor under the new token.
      const next = await openSession(fresh, { visitorId: s.visitor_id, visitorToken: s.visitor_token });
      expect(next.resumed).toBe(false);
      await say(next, 'after the rotation');
      expect((await conversation(next)).messages.map((m) => m.text)).toEqual(['after the rotation']);
    } finally {
      c.close();
    }
  });
});

// ------------------------------------------------------------------------------------------------ CORS

describe('CORS', () => {
  const preflight = (path: string, origin: string, headers = 'authorization, content-type', method = 'POST') =>
    ctx.http.options(path).set({ Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers });

  test('preflights are answered for the connection\'s allowed origins only, named by ?token= (or ?visitor_token=)', async () => {
    const s = await openSession(tokenA);
    for (const path of [`/v1/web-chat/sessions?token=${q(tokenA)}`, `/v1/web-chat/messages?token=${q(tokenA)}`, `/v1/web-chat/messages?visitor_token=${q(s.visitor_token)}`]) {
      const ok = await preflight(path, SHOP);
      expect(ok.status).toBe(204);
      expect(ok.headers['access-control-allow-origin']).toBe(SHOP);
      expect(ok.headers['access-control-allow-methods']).toBe('GET, POST');
      expect(ok.headers['access-control-allow-headers']).toMatch(/authorization/i);
      expect(ok.headers['access-control-allow-headers']).toMatch(/last-event-id/i);
      const evil = await preflight(path, 'https://evil.example');
      expect(evil.headers['access-control-allow-origin']).toBeUndefined();
      expect(evil.headers['access-control-allow-methods']).toBeUndefined();
    }
    // Without anything naming the connection a preflight is not approved.
    expect((await preflight('/v1/web-chat/messages', SHOP)).headers['access-control-allow-origin']).toBeUndefined();
  });

  test('requests from an allowed origin can be read by the page; other origins get no CORS headers', async () => {
    const s = await openSession(tokenA);
    await say(s, 'cors');
    const session = await ctx.http.post(`/v1/web-chat/sessions?token=${q(tokenA)}`).set('Origin', SHOP).send({});
    expect(session.headers['access-control-allow-origin']).toBe(SHOP);
    const page = await ctx.http.get(`/v1/web-chat/messages?token=${q(tokenA)}`).set('Origin', SHOP).set(bearer(s.visitor_token));
    expect(page.status).toBe(200);
    expect(page.headers['access-control-allow-origin']).toBe(SHOP);
    expect(page.headers['access-control-expose-headers']).toMatch(/Retry-After/);
    // By the Authorization header alone, too.
    expect((await read(s).set('Origin', SHOP)).headers['access-control-allow-origin']).toBe(SHOP);
    const evil = await read(s).set('Origin', 'https://evil.example');
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
    // Workspace B allows the same origin for its own connection, not for A's visitors through B's token.
    const mixed = await ctx.http.get(`/v1/web-chat/messages?token=${q(tokenB)}`).set('Origin', SHOP).set(bearer(s.visitor_token));
    expect(mixed.status).toBe(401);
    expect(mixed.body.code).toBe('visitor_token_invalid');
  });

  test('the stream opened by ?visitor_token= carries the CORS header for an allowed origin', async () => {
    const s = await openSession(tokenA);
    await say(s, 'stream cors');
    const c = stream({ queryToken: s.visitor_token, headers: { Origin: SHOP } });
    const evil = stream({ queryToken: s.visitor_token, headers: { Origin: 'https://evil.example' } });
    try {
      await waitFor(c, 1, 'the stream');
      expect(c.headers()['access-control-allow-origin']).toBe(SHOP);
      await eventually(async () => (evil.status() === 200 ? true : undefined), 5000, 'the other stream');
      expect(evil.headers()['access-control-allow-origin']).toBeUndefined();
    } finally {
      c.close();
      evil.close();
    }
  });
});
