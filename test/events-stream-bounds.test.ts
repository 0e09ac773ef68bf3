/**
 * The live stream's bounds (issue 32, findings 1, 2 and 7): a viewer could crash an API process with streams
 * that never read (each buffered ~52 MiB of large events), open streams without limit, and keep receiving
 * events after their credential was revoked; cursors carried a position shared by every workspace.
 */
import type { AddressInfo } from 'node:net';
import { startTestApp, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { connectSse, type Sse, type SseClient } from './helpers/sse';
import { createTicket } from './helpers/tickets';
import { eventually, sleep } from './helpers/wait';
import { createIntegration, deliver, KITS, newSecret } from './helpers/webhook-intake';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp({ env: {
      EVENT_STREAM_POLL_MS: '50',
      EVENT_STREAM_HEARTBEAT_SECONDS: '1',
      EVENT_STREAM_RECHECK_SECONDS: '1',
      EVENT_STREAMS_PER_CALLER: '2',
      EVENT_STREAMS_PER_WORKSPACE: '3',
    } });

const connect = (c: TestContext, token: string, opts: { query?: string; lastEventId?: string; paused?: boolean } = {}) =>
  connectSse(`http://127.0.0.1:${(c.server.address() as AddressInfo).port}`, token, opts);

const opened = (s: SseClient) => eventually(async () => (s.status() !== 0 ? s.status() : undefined), 5000, 'the stream to answer');
const ticketIdOf = (b: Sse) => (JSON.parse(b.data!) as { data?: { ticket?: { id: string } } }).data?.ticket?.id;
/** 65,000 × '€': 195 KB of UTF-8, the largest body a reply takes; a message.created event of it is ~390 KB. */
const LARGE = '€'.repeat(65_000);

async function largeTicket(c: TestContext, w: Workspace, replies: number): Promise<string> {
  const t = (await createTicket(c, w, { description: LARGE })) as { id: string };
  for (let i = 0; i < replies; i += 1) await c.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(w.ownerKey)).send({ body: `${i} ${LARGE}` }).expect(201);
  return t.id;
}

type LoggedEvent = { id: string; type: string; data: Record<string, unknown> };
async function wholeLog(c: TestContext, token: string, q = ''): Promise<LoggedEvent[]> {
  const out: LoggedEvent[] = [];
  let after: string | null = null;
  for (;;) {
    const res: { status: number; body: { events: LoggedEvent[]; next_cursor: string | null; has_more: boolean } } = await c.http.get(`/v1/events?limit=500${q}${after ? `&after=${after}` : ''}`).set(bearer(token));
    expect(res.status).toBe(200);
    out.push(...res.body.events);
    after = res.body.next_cursor;
    if (!res.body.has_more) return out;
  }
}

describe('large events and slow readers', () => {
  test('an event larger than a frame is sent as a reference, and its url reads it whole', async () => {
    const w = await createWorkspace(ctx);
    const s = connect(ctx, w.ownerKey, { query: '?types=ticket.created,message.created' });
    try {
      expect(await opened(s)).toBe(200);
      const t = (await createTicket(ctx, w)) as { id: string };
      await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(w.ownerKey)).send({ body: LARGE }).expect(201);
      await eventually(async () => (s.events().length >= 2 ? true : undefined), 5000, 'both events');
      const [small, large] = s.events().map((b) => JSON.parse(b.data!) as Record<string, unknown> & { data_ref?: { url: string; bytes: number } });
      expect(small!.data).toBeDefined();
      expect(large!.data).toBeUndefined();
      expect(large!.type).toBe('message.created');
      expect(large!.data_ref!.bytes).toBeGreaterThan(64 * 1024);
      expect(s.events()[1]!.data!.length).toBeLessThan(1024);
      const whole = await ctx.http.get(large!.data_ref!.url).set(bearer(w.ownerKey));
      expect(whole.status).toBe(200);
      expect((whole.body.data.event as { body: string }).body).toBe(LARGE);
      const logged = (await wholeLog(ctx, w.ownerKey)).find((e) => e.id === large!.id);
      expect(whole.body).toEqual(logged);
    } finally {
      s.close();
    }
  });

  test('GET /v1/events/{id} answers 404 for another workspace\'s event', async () => {
    const [a, b] = [await createWorkspace(ctx), await createWorkspace(ctx)];
    await createTicket(ctx, a);
    const theirs = (await wholeLog(ctx, a.ownerKey))[0]!;
    expect((await ctx.http.get(`/v1/events/${theirs.id}`).set(bearer(b.ownerKey))).status).toBe(404);
    expect((await ctx.http.get(`/v1/events/${theirs.id}`).set(bearer(a.ownerKey))).status).toBe(200);
  });

  test('a page of the log holds at most 4 MiB of events however large they are, and following it misses nothing', async () => {
    const w = await createWorkspace(ctx);
    await largeTicket(ctx, w, 12);
    const first = await ctx.http.get('/v1/events?limit=500').set(bearer(w.ownerKey));
    expect(first.status).toBe(200);
    expect(first.body.has_more).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(first.body.events))).toBeLessThanOrEqual(4.5 * 1024 * 1024);
    const all = await wholeLog(ctx, w.ownerKey);
    expect(all.filter((e) => e.type === 'message.created')).toHaveLength(12);
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
  });

  test('a client that stops reading is cut off after EVENT_STREAM_STALL_SECONDS, and resumes with Last-Event-ID losing and repeating nothing', async () => {
    // Frames up to 1 MiB here, so ~20 events of ~390 KB overrun what the kernel buffers for a paused reader (~4 MiB).
    const slow = await startTestApp({ env: { EVENT_STREAM_POLL_MS: '50', EVENT_STREAM_STALL_SECONDS: '1', EVENT_STREAM_MAX_EVENT_BYTES: String(1024 * 1024) } });
    try {
      const w = await createWorkspace(slow);
      const s = connect(slow, w.ownerKey, { paused: true });
      expect(await opened(s)).toBe(200);
      await eventually(async () => (slow.services.events.openStreams() === 1 ? true : undefined), 5000, 'the stream to be open');
      await largeTicket(slow, w, 20);
      // The server stops reading the log for it, then drops it: its stream (and what it buffered) is gone.
      await eventually(async () => (slow.services.events.openStreams() === 0 ? true : undefined), 15_000, 'the stalled stream to be dropped');
      s.resume();
      await eventually(async () => (s.ended() ? true : undefined), 10_000, 'the client to read what reached it, then the end');
      const got = s.events().map((b) => b.id!);
      const log = (await wholeLog(slow, w.ownerKey)).map((e) => e.id);
      expect(got.length).toBeGreaterThan(0);
      expect(got.length).toBeLessThan(log.length);
      const again = connect(slow, w.ownerKey, { lastEventId: got.at(-1)! });
      try {
        await eventually(async () => (got.length + again.events().length >= log.length ? true : undefined), 15_000, 'the rest after Last-Event-ID');
        await sleep(200);
        expect([...got, ...again.events().map((b) => b.id!)]).toEqual(log);
      } finally {
        again.close();
      }
    } finally {
      await slow.close();
    }
  }, 60_000);
});

describe('caps on open streams', () => {
  test('per API key: the next stream is 429 too_many_streams with Retry-After, and closing one frees its place', async () => {
    const w = await createWorkspace(ctx);
    const [a, b] = [connect(ctx, w.ownerKey), connect(ctx, w.ownerKey)];
    try {
      expect([await opened(a), await opened(b)]).toEqual([200, 200]);
      const c = connect(ctx, w.ownerKey);
      expect(await opened(c)).toBe(429);
      await eventually(async () => (c.ended() ? true : undefined), 5000, 'the refusal to end');
      expect(Number(c.headers()['retry-after'])).toBeGreaterThan(0);
      expect(JSON.parse(c.text()).code).toBe('too_many_streams');
      a.close();
      await eventually(async () => {
        const d = connect(ctx, w.ownerKey);
        const status = await opened(d);
        d.close();
        return status === 200 ? true : undefined;
      }, 5000, 'a place freed by the closed stream');
    } finally {
      a.close();
      b.close();
    }
  });

  test('per workspace: other keys of the same workspace are refused past its cap, other workspaces are not', async () => {
    const w = await createWorkspace(ctx);
    const keys = await Promise.all([0, 1].map(() => mintKey(ctx, w.ownerKey, { scopes: ['events:read'] })));
    const open = [connect(ctx, w.ownerKey), connect(ctx, keys[0]!.secret), connect(ctx, keys[0]!.secret)];
    try {
      expect(await Promise.all(open.map(opened))).toEqual([200, 200, 200]);
      const refused = connect(ctx, keys[1]!.secret);
      expect(await opened(refused)).toBe(429);
      const elsewhere = connect(ctx, (await createWorkspace(ctx)).ownerKey);
      expect(await opened(elsewhere)).toBe(200);
      elsewhere.close();
    } finally {
      open.forEach((s) => s.close());
    }
  });

  test('per process: past EVENT_STREAMS_PER_PROCESS a process refuses any workspace\'s stream', async () => {
    const small = await startTestApp({ env: { EVENT_STREAMS_PER_PROCESS: '2' } });
    const open: SseClient[] = [];
    try {
      for (let i = 0; i < 2; i += 1) open.push(connect(small, (await createWorkspace(small)).ownerKey));
      expect(await Promise.all(open.map(opened))).toEqual([200, 200]);
      const third = connect(small, (await createWorkspace(small)).ownerKey);
      open.push(third);
      expect(await opened(third)).toBe(429);
    } finally {
      open.forEach((s) => s.close());
      await small.close();
    }
  });
});

describe('a stream never outlives its credential', () => {
  /** Opens a stream, then `cut`s the credential, then writes a ticket: the stream ends and never carries it. */
  async function cutThenWrite(w: Workspace, token: string, cut: () => Promise<unknown>) {
    const s = connect(ctx, token, { query: '?types=ticket.created' });
    try {
      expect(await opened(s)).toBe(200);
      const before = (await createTicket(ctx, w)) as { id: string };
      await eventually(async () => (s.events().some((b) => ticketIdOf(b) === before.id) ? true : undefined), 5000, 'an event before the cut');
      await cut();
      const after = (await createTicket(ctx, w)) as { id: string };
      await eventually(async () => (s.ended() ? true : undefined), 5000, 'the stream to end');
      expect(s.events().map(ticketIdOf)).not.toContain(after.id);
    } finally {
      s.close();
    }
  }

  test('a revoked key\'s stream ends and delivers nothing committed after the revocation', async () => {
    const w = await createWorkspace(ctx);
    const key = await mintKey(ctx, w.ownerKey, { scopes: ['events:read'] });
    await cutThenWrite(w, key.secret, () => ctx.http.post(`/v1/api-keys/${key.id}/revoke`).set(bearer(w.ownerKey)).expect(200));
  });

  test('a removed member\'s stream ends and delivers nothing committed after the removal', async () => {
    const w = await createWorkspace(ctx);
    const member = await addMember(ctx, w, 'viewer');
    await cutThenWrite(w, member.token, () => ctx.http.delete(`/v1/members/${member.userId}`).set(bearer(w.ownerKey)).expect(204));
  });

  test('an idle stream ends within EVENT_STREAM_RECHECK_SECONDS of its key\'s revocation', async () => {
    const w = await createWorkspace(ctx);
    const key = await mintKey(ctx, w.ownerKey, { scopes: ['events:read'] });
    const s = connect(ctx, key.secret);
    try {
      expect(await opened(s)).toBe(200);
      await ctx.http.post(`/v1/api-keys/${key.id}/revoke`).set(bearer(w.ownerKey)).expect(200);
      const revokedAt = Date.now();
      await eventually(async () => (s.ended() ? true : undefined), 5000, 'the stream to end');
      expect(Date.now() - revokedAt).toBeLessThan(3000);
    } finally {
      s.close();
    }
  });

  test('a stream ends when its access token expires', async () => {
    const w = await createWorkspace(ctx);
    const token = await ctx.realm.sign({ sub: w.ownerSubject, tenant_id: w.tenantId }, { expiresIn: '3s' });
    const s = connect(ctx, token);
    try {
      expect(await opened(s)).toBe(200);
      await eventually(async () => (s.ended() ? true : undefined), 8000, 'the stream to end at the token\'s expiry');
    } finally {
      s.close();
    }
  });

  test('an access token without an expiry is refused', async () => {
    const w = await createWorkspace(ctx);
    const { SignJWT } = await import('jose');
    const forever = await new SignJWT({ sub: w.ownerSubject, tenant_id: w.tenantId })
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuedAt()
      .setIssuer('https://realm.test/')
      .setAudience('helpdesk-api')
      .sign(ctx.realm.privateKey);
    const res = await ctx.http.get('/v1/members').set(bearer(forever));
    expect(res.status).toBe(401);
    expect(res.body.detail).toMatch(/expiry/);
    const ok = await ctx.http.get('/v1/members').set(bearer(await ctx.realm.sign({ sub: w.ownerSubject, tenant_id: w.tenantId })));
    expect(ok.status).toBe(200);
  });
});

describe('cursors', () => {
  test('next_cursor names an event, not the log position every workspace shares; cursors given out before still work', async () => {
    const w = await createWorkspace(ctx);
    for (let i = 0; i < 3; i += 1) await createTicket(ctx, w);
    const page = await ctx.http.get('/v1/events?limit=2').set(bearer(w.ownerKey));
    const decoded = JSON.parse(Buffer.from(page.body.next_cursor, 'base64url').toString()) as { s: string; k: string; i: string };
    expect(decoded).toEqual({ s: 'event', k: '0', i: page.body.events[1].id });
    const all = await wholeLog(ctx, w.ownerKey);
    const next = await ctx.http.get(`/v1/events?limit=500&after=${page.body.next_cursor}`).set(bearer(w.ownerKey));
    expect(next.body.events.map((e: LoggedEvent) => e.id)).toEqual(all.slice(2).map((e) => e.id));
    // An old cursor carried the position itself.
    const row = await ctx.db.selectFrom('events').select('position').where('tenant_id', '=', w.tenantId).where('id', '=', page.body.events[1].id).executeTakeFirstOrThrow();
    const old = Buffer.from(JSON.stringify({ s: 'position', k: String(row.position), i: page.body.events[1].id })).toString('base64url');
    const resumed = await ctx.http.get(`/v1/events?limit=500&after=${old}`).set(bearer(w.ownerKey));
    expect(resumed.body.events.map((e: LoggedEvent) => e.id)).toEqual(all.slice(2).map((e) => e.id));
  });
});

describe('integration ids (the webhook URL secret) reach only those who may manage integrations', () => {
  test('a viewer and an events:read key see transcript events without integration_id, in the log, one event and the stream; an admin sees it', async () => {
    const wctx = await startTestApp({ env: { EVENT_STREAM_POLL_MS: '50' } });
    try {
      await wctx.startWorkers();
      const w = await createWorkspace(wctx);
      const viewer = await addMember(wctx, w, 'viewer');
      const eventsKey = await mintKey(wctx, w.ownerKey, { scopes: ['events:read'] });
      const stream = connect(wctx, viewer.token, { query: '?types=transcript.event_recorded' });
      expect(await opened(stream)).toBe(200);
      const integration = await createIntegration(wctx, w, 'zendesk', newSecret());
      expect((await deliver(wctx, integration, KITS.zendesk.ticket(KITS.zendesk.newTicketId()))).status).toBe(200);
      const q = '&types=transcript.event_recorded';
      const [asOwner] = await wholeLog(wctx, w.ownerKey, q);
      expect(asOwner!.data.integration_id).toBe(integration.id);
      for (const token of [viewer.token, eventsKey.secret]) {
        const [seen] = await wholeLog(wctx, token, q);
        expect(seen!.id).toBe(asOwner!.id);
        expect(seen!.data).not.toHaveProperty('integration_id');
        expect(seen!.data.transcript_id).toBe(asOwner!.data.transcript_id);
        const one = await wctx.http.get(`/v1/events/${asOwner!.id}`).set(bearer(token));
        expect(one.body.data).not.toHaveProperty('integration_id');
      }
      await eventually(async () => (stream.events().length === 1 ? true : undefined), 5000, 'the event on the viewer\'s stream');
      expect(stream.events()[0]!.data).not.toContain(integration.id);
      stream.close();
    } finally {
      await wctx.close();
    }
  });
});
