/**
 * Fault test for the live event stream (issue 19): the API process a client streams from is killed (SIGKILL
 * of its process group: no drain, the stream is cut), events commit while no API process runs, and the client
 * reconnects to a new API process with Last-Event-ID. The resume point is the event's position in the
 * database, not anything the dead process held, so the client gets exactly the log: no gap, no repeat, in
 * commit order.
 */
import { startTestApp, type TestContext } from '../helpers/context';
import { bearer, createWorkspace, type Workspace } from '../helpers/factories';
import { exited, killGroup, spawnApi, type ApiProcess } from '../helpers/processes';
import { connectSse, type SseClient } from '../helpers/sse';
import { createTicket } from '../helpers/tickets';
import { eventually, sleep } from '../helpers/wait';

jest.setTimeout(60_000);

const ENV = { EVENT_STREAM_POLL_MS: '50', EVENT_STREAM_HEARTBEAT_SECONDS: '1' };

let ctx: TestContext;
const apis: ApiProcess[] = [];
const clients: SseClient[] = [];

beforeAll(async () => {
  // The test's own app (in process) on the database the API processes share: it makes the workspace, and
  // the events that commit while no API process runs.
  ctx = await startTestApp({ env: ENV });
});
afterAll(async () => {
  for (const c of clients) c.close();
  for (const a of apis) killGroup(a.proc);
  await Promise.all(apis.map((a) => exited(a.proc)));
  await ctx?.close();
});

async function api(): Promise<ApiProcess> {
  const a = await spawnApi(ctx.config, { env: ENV });
  apis.push(a);
  return a;
}

function stream(a: ApiProcess, ws: Workspace, lastEventId?: string): SseClient {
  const c = connectSse(a.url, ws.ownerKey, lastEventId ? { lastEventId } : {});
  clients.push(c);
  return c;
}

let n = 0;
/** A ticket (customer.created, ticket.created) and a reply on it (message.created), through an API process. */
async function ticketWithReply(a: ApiProcess, ws: Workspace): Promise<void> {
  n += 1;
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${a.url}${path}`, { method: 'POST', headers: { ...bearer(ws.ownerKey), 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as { id: string };
  };
  const t = await post('/v1/tickets', { subject: `Stream restart ${n}`, description: 'Still on fire.', customer_email: `restart${n}@example.test` });
  await post(`/v1/tickets/${t.id}/replies`, { body: `Reply ${n}` });
}

/** The workspace's whole log as GET /v1/events pages it (small pages, so the cursor is followed). */
async function readLog(a: ApiProcess, ws: Workspace): Promise<{ id: string; type: string }[]> {
  const log: { id: string; type: string }[] = [];
  let after: string | null = null;
  for (;;) {
    const res = await fetch(`${a.url}/v1/events?limit=4${after ? `&after=${encodeURIComponent(after)}` : ''}`, { headers: bearer(ws.ownerKey) });
    if (res.status !== 200) throw new Error(`GET /v1/events: ${res.status} ${await res.text()}`);
    const page = (await res.json()) as { events: { id: string; type: string }[]; next_cursor: string | null; has_more: boolean };
    log.push(...page.events.map((e) => ({ id: e.id, type: e.type })));
    if (!page.has_more) return log;
    after = page.next_cursor;
  }
}

test('a client resumes from Last-Event-ID on a restarted API (after SIGKILL) with no gap and no repeat', async () => {
  const ws = await createWorkspace(ctx);

  // 1. Streaming from API process A while events commit through it.
  const a = await api();
  const first = stream(a, ws);
  await eventually(async () => (first.status() ? true : undefined), 5000, 'A\'s stream to open');
  expect(first.status()).toBe(200);
  expect(first.contentType()).toMatch(/^text\/event-stream/);
  for (let i = 0; i < 2; i += 1) await ticketWithReply(a, ws);
  await eventually(async () => (first.events().length >= 6 ? true : undefined), 5000, 'A\'s events on the stream');

  // 2. A dies hard with the stream open; more events commit while no API process runs.
  expect(first.ended()).toBe(false);
  killGroup(a.proc, 'SIGKILL');
  await exited(a.proc);
  expect(a.proc.signalCode).toBe('SIGKILL');
  expect(a.stdout()).not.toMatch(/API shutting down/);
  await eventually(async () => (first.ended() ? true : undefined), 5000, 'the client to see its stream cut');
  const fromA = first.events().map((b) => ({ id: b.id!, type: b.event! }));
  const lastFromA = fromA.at(-1)!.id;
  for (let i = 0; i < 2; i += 1) {
    const t = (await createTicket(ctx, ws)) as { id: string };
    await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'While the API was down' }).expect(201);
  }

  // 3. A new API process B; the client reconnects to it with the last id it got from A; more events commit.
  const b = await api();
  const again = stream(b, ws, lastFromA);
  await eventually(async () => (again.status() ? true : undefined), 5000, 'B\'s stream to open');
  expect(again.status()).toBe(200);
  expect(again.contentType()).toMatch(/^text\/event-stream/);
  await eventually(async () => (again.events().length >= 6 ? true : undefined), 5000, 'the events committed while down, on B\'s stream');
  for (let i = 0; i < 2; i += 1) await ticketWithReply(b, ws);

  // 4. Across both connections, exactly the log from the first event received: same events, same order.
  const log = await readLog(b, ws);
  expect(log).toHaveLength(18);
  await eventually(async () => (fromA.length + again.events().length >= log.length ? true : undefined), 5000, 'every event on B\'s stream');
  await sleep(300); // a few polls more: a repeat would show up now
  const fromB = again.events().map((e) => ({ id: e.id!, type: e.event! }));
  const received = [...fromA, ...fromB];
  const start = log.findIndex((e) => e.id === received[0]!.id);
  expect(start).toBe(0); // A's stream began at the start of the log (no Last-Event-ID, no `after`)
  expect(received).toEqual(log.slice(start));
  expect(new Set(received.map((e) => e.id)).size).toBe(received.length);
  expect(fromA.length).toBe(6);
  expect(again.ended()).toBe(false);
});
