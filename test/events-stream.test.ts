/**
 * The live event stream (issue 19): GET /v1/events/stream as Server-Sent Events. Events arrive as they
 * commit, each with `id:` its event id; a client reconnecting with Last-Event-ID resumes with no gap and no
 * repeat; an idle stream sends heartbeats. An API process killed mid-stream and a client resuming on another
 * process: test/faults/events-stream-restart.test.ts.
 */
import type { AddressInfo } from 'node:net';
import { bearer, createWorkspace, mintKey } from './helpers/factories';
import { connectSse, type Sse } from './helpers/sse';
import { createTicket } from './helpers/tickets';
import { eventually } from './helpers/wait';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ env: { EVENT_STREAM_POLL_MS: '50', EVENT_STREAM_HEARTBEAT_SECONDS: '1' }, workspaces: 1 });

/** The SSE client (test/helpers/sse.ts) on this suite's in-process app. */
function connect(token: string, opts: { query?: string; lastEventId?: string } = {}) {
  const { port } = ctx.server.address() as AddressInfo;
  return connectSse(`http://127.0.0.1:${port}`, token, opts);
}

const ticketIdOf = (b: Sse) => (JSON.parse(b.data!) as { data: { ticket?: { id: string } } }).data.ticket?.id;

test('events arrive as they commit, each with id: its event id and event: its type, and the data as the log shows it', async () => {
  const w = await createWorkspace(ctx);
  const s = connect(w.ownerKey);
  try {
    await eventually(async () => (s.status() === 200 ? true : undefined), 5000, 'the stream to open');
    expect(s.contentType()).toMatch(/^text\/event-stream/);
    const t = (await createTicket(ctx, w)) as { id: string };
    await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(w.ownerKey)).send({ body: 'On it' }).expect(201);
    const log = (await ctx.http.get('/v1/events').set(bearer(w.ownerKey))).body.events as { id: string; type: string }[];
    expect(log.map((e) => e.type)).toEqual(['customer.created', 'ticket.created', 'message.created']);
    await eventually(async () => (s.events().length >= log.length ? true : undefined), 5000, 'every event on the stream');
    expect(s.events().map((b) => [b.id, b.event])).toEqual(log.map((e) => [e.id, e.type]));
    expect(JSON.parse(s.events()[0]!.data!)).toEqual((await ctx.http.get('/v1/events').set(bearer(w.ownerKey))).body.events[0]);
  } finally {
    s.close();
  }
});

test('a reconnect with Last-Event-ID resumes right after it: no gap, no repeat', async () => {
  const w = await createWorkspace(ctx);
  const made: string[] = [];
  for (let i = 0; i < 3; i += 1) made.push(((await createTicket(ctx, w)) as { id: string }).id);
  const first = connect(w.ownerKey, { query: '?types=ticket.created' });
  await eventually(async () => (first.events().length >= 3 ? true : undefined), 5000, 'three events');
  first.close();
  const last = first.events()[1]!.id!;
  for (let i = 0; i < 2; i += 1) made.push(((await createTicket(ctx, w)) as { id: string }).id);
  const again = connect(w.ownerKey, { query: '?types=ticket.created', lastEventId: last });
  try {
    await eventually(async () => (again.events().length >= 3 ? true : undefined), 5000, 'the events after the last one seen');
    await new Promise((r) => setTimeout(r, 200));
    expect(again.events().map(ticketIdOf)).toEqual(made.slice(2));
  } finally {
    again.close();
  }
});

test('an idle stream sends heartbeats', async () => {
  const w = await createWorkspace(ctx);
  const s = connect(w.ownerKey);
  try {
    await eventually(async () => (s.heartbeats() >= 2 ? true : undefined), 6000, 'two heartbeats');
    expect(s.events()).toEqual([]);
  } finally {
    s.close();
  }
});

test('a workspace\'s stream shows only its own events, and needs events:read', async () => {
  const mine = connect(ws.ownerKey, { query: '?types=ticket.created' });
  const other = await createWorkspace(ctx);
  try {
    await eventually(async () => (mine.status() === 200 ? true : undefined), 5000, 'the stream to open');
    const theirs = (await createTicket(ctx, other)) as { id: string };
    const ours = (await createTicket(ctx, ws)) as { id: string };
    await eventually(async () => (mine.events().some((b) => ticketIdOf(b) === ours.id) ? true : undefined), 5000, 'our event');
    expect(mine.events().map(ticketIdOf)).not.toContain(theirs.id);
  } finally {
    mine.close();
  }
  const key = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:read'] });
  const refused = await ctx.http.get('/v1/events/stream').set(bearer(key.secret));
  expect(refused.status).toBe(403);
  const bad = await ctx.http.get('/v1/events/stream').set({ ...bearer(ws.ownerKey), 'Last-Event-ID': 'not-an-id' });
  expect(bad.status).toBe(400);
});
