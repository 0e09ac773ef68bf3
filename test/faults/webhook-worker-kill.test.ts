/**
 * Fault test for outbound webhooks (issue 19): the worker process is killed (SIGKILL of its process group)
 * while a delivery is in flight, with the receiver holding the request open. A new worker delivers the event
 * once the dead worker's lease expires, with the same webhook-id; no request ever carries another id.
 */
import type { ChildProcess } from 'node:child_process';
import { startTestApp, type TestContext } from '../helpers/context';
import { bearer, createWorkspace } from '../helpers/factories';
import { exited, killGroup, spawnWorker, workerStarted } from '../helpers/processes';
import { createTicket } from '../helpers/tickets';
import { eventually } from '../helpers/wait';
import { startReceiver, verify } from '../helpers/webhook-receiver';

const ENV = {
  OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
  OUTBOUND_WEBHOOK_RETRY_BASE_MS: '50',
  OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS: '1000',
  OUTBOUND_WEBHOOK_SWEEP_MS: '300',
};

let ctx: TestContext;
const children: ChildProcess[] = [];

beforeAll(async () => {
  // The API in process (no workers); the workers are real child processes.
  ctx = await startTestApp({ env: ENV });
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) killGroup(c);
  await ctx?.close();
});

function worker() {
  const w = spawnWorker(ctx.config, { detached: true, env: ENV });
  children.push(w.proc);
  return w;
}

test('SIGKILL of the worker mid-delivery: a new worker delivers the event, with the same webhook-id', async () => {
  const ws = await createWorkspace(ctx);
  // The first request is held open (the worker is killed while it waits); every later one is answered.
  const rx = await startReceiver((_r, n) => (n === 1 ? 'hang' : 200));
  try {
    const ep = (await ctx.http.post('/v1/webhook-endpoints').set(bearer(ws.ownerKey)).send({ url: rx.url, event_types: ['ticket.created', 'ticket.updated'] }).expect(201)).body as { id: string; secret: string };
    const first = worker();
    await workerStarted(first);
    const t = (await createTicket(ctx, ws)) as { id: string };
    await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ tags: ['later'] }).expect(200);

    await eventually(async () => (rx.received.length >= 1 ? true : undefined), 15_000, 'the first request to be in flight', 10);
    killGroup(first.proc);
    await exited(first.proc);
    const inFlightId = String(rx.received[0]!.headers['webhook-id']);

    const second = worker();
    await workerStarted(second);
    const log = ((await ctx.http.get('/v1/events?types=ticket.created,ticket.updated').set(bearer(ws.ownerKey))).body.events as { id: string; type: string }[]).map((e) => e.id);
    expect(log).toHaveLength(2);
    // Both events delivered: the interrupted one again (after its lease expired), then the ticket's next.
    await eventually(async () => (rx.received.length >= 3 ? true : undefined), 20_000, 'the redelivery and the next event', 50);
    const ids = rx.received.map((r) => String(r.headers['webhook-id']));
    expect(ids).toEqual([log[0], log[0], log[1]]);
    expect(inFlightId).toBe(log[0]);
    for (const r of rx.received) {
      verify(ep.secret, r);
      expect(r.event.id).toBe(r.headers['webhook-id']);
    }
    const attempts = (await ctx.http.get(`/v1/webhook-endpoints/${ep.id}/deliveries`).set(bearer(ws.ownerKey))).body.deliveries as { event_id: string; attempt: number; outcome: string }[];
    // The killed round left no record and did not move the endpoint's cursor: the new worker's send of the
    // same event is recorded as its first attempt (the receiver saw the id twice, which webhook-id lets it
    // fold), and the next event follows it.
    expect(attempts.map((a) => [a.event_id, a.attempt, a.outcome])).toEqual([
      [log[1], 1, 'delivered'],
      [log[0], 1, 'delivered'],
    ]);
    killGroup(second.proc, 'SIGTERM');
    await exited(second.proc);
  } finally {
    await rx.stop();
  }
});
