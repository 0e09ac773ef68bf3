/**
 * Fault test for the reply outbox (issue 33): replies posted through two API processes are sent by worker
 * processes to a Twilio double that hangs on some sends; a worker is SIGKILLed with sends in flight, twice,
 * while every reply's send job is also delivered 20 times more (and run directly, concurrently). Whatever the
 * interleaving, the double counts exactly one send per reply except replies recorded `unknown` (the sweep's
 * verdict on a dead worker's claim: the provider may have the message, so it is never sent again on its own),
 * and at the end no reply is left `sending` or `queued`.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { startTestApp, type TestContext } from '../helpers/context';
import { bearer, createWorkspace, type Workspace } from '../helpers/factories';
import { smsPayload } from '../helpers/payloads';
import { exited, killGroup, spawnApi, spawnWorker, workerStarted, type ApiProcess, type WorkerProcess } from '../helpers/processes';
import { startProviderDoubles, type ProviderDoubles } from '../helpers/provider-doubles';
import { eventually, sleep } from '../helpers/wait';

const AC = `AC${'9c'.repeat(16)}`;
const TWILIO_TOKEN = 'twilio-fault-auth-token-0001';
const OUR_SMS = '+15550003333';
const REPLIES = 30;
const CLAIM_SECONDS = 2;

let doubles: ProviderDoubles;
let ctx: TestContext;
const children: ChildProcess[] = [];
let workerEnv: Record<string, string>;

beforeAll(async () => {
  doubles = await startProviderDoubles();
  doubles.addTwilioAccount(AC, TWILIO_TOKEN);
  workerEnv = {
    TWILIO_API_URL: doubles.urls.twilio,
    // Long enough that a hung send is still in flight when its worker is killed.
    OUTBOUND_SEND_TIMEOUT_MS: '20000',
    OUTBOUND_CLAIM_SECONDS: String(CLAIM_SECONDS),
    OUTBOUND_RETRY_BASE_MS: '50',
    OUTBOUND_CONCURRENCY: '4',
  };
  // In process: the database and the queues, for the test's own reads and redeliveries; no workers.
  ctx = await startTestApp({ env: workerEnv });
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) killGroup(c);
  await ctx?.close();
  await doubles?.close();
});

function worker(): WorkerProcess {
  const w = spawnWorker(ctx.config, { detached: true, env: workerEnv });
  children.push(w.proc);
  return w;
}
async function api(): Promise<ApiProcess> {
  const a = await spawnApi(ctx.config, { env: workerEnv });
  children.push(a.proc);
  return a;
}
async function kill(w: WorkerProcess) {
  killGroup(w.proc);
  await exited(w.proc);
}

async function post(base: string, p: string, body: unknown, key?: string) {
  const res = await fetch(`${base}${p}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(key ? bearer(key) : {}) }, body: JSON.stringify(body) });
  const json = (await res.json()) as Record<string, any>;
  if (res.status >= 300) throw new Error(`${p}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const rows = (tenantId: string) => ctx.db.selectFrom('outbound_messages').selectAll().where('tenant_id', '=', tenantId).execute();
const hung = () => doubles.sends('twilio').filter((s) => s.answeredStatus === null);

/** Every reply's send job queued `times` more (distinct job ids, so BullMQ runs each one). */
async function redeliver(tenantId: string, eventIds: string[], times: number, from: number) {
  await Promise.all(eventIds.flatMap((id) => Array.from({ length: times }, (_, i) => ctx.runtime.queues.enqueue('outbound.send', { tenant_id: tenantId, event_id: id, attempt: from + i }))));
}

test('SIGKILL of workers mid-send, with 20× redelivery of every send job: one send per reply except those recorded unknown; none left sending or queued', async () => {
  const [apiA, apiB] = await Promise.all([api(), api()]);
  const apis = [apiA.url, apiB.url];
  const ws: Workspace = await createWorkspace(ctx);
  await ctx.http.put('/v1/channels/sms').set(bearer(ws.ownerKey)).send({ config: { account_sid: AC, auth_token: TWILIO_TOKEN, phone_number: OUR_SMS } }).expect(200);

  // Worker A takes the customers' messages in, then the replies: its four send slots all hang at the provider.
  const a = worker();
  await workerStarted(a);
  const run = randomBytes(3).toString('hex');
  const customers = Array.from({ length: REPLIES }, (_, i) => `+1444${String(randomInt(0, 1e5)).padStart(5, '0')}${String(i).padStart(2, '0')}`);
  const tickets = await Promise.all(
    customers.map((from, i) => post(apis[i % 2]!, '/v1/ingest/sms', { tenant_id: ws.tenantId, payload: smsPayload({ from, to: OUR_SMS, body: `fault ${run} question ${i}` }) }).then((r) => r.ticket_id as string)),
  );
  expect(new Set(tickets).size).toBe(REPLIES);

  doubles.failNext('twilio', { kind: 'hang' }, 4);
  const replies = await Promise.all(
    tickets.map((id, i) =>
      post(apis[i % 2]!, `/v1/tickets/${id}/replies`, { body: `fault ${run} answer ${i}` }, ws.ownerKey).then((r) => (r.new_events as { id: string; kind: string }[]).find((e) => e.kind === 'reply')!.id),
    ),
  );
  const customerOf = new Map(replies.map((id, i) => [id, customers[i]!]));

  // Killed with four requests in flight at the provider, which has them all.
  await eventually(async () => (hung().length >= 4 ? true : undefined), 15_000, 'worker A to be mid-send on four replies', 10);
  await kill(a);
  // Its four claims stay open (a sweep that ran meanwhile may already have called them unknown); nothing else moved.
  const afterA = await rows(ws.tenantId);
  expect(afterA.filter((r) => r.state === 'sending' || r.state === 'unknown')).toHaveLength(4);
  expect(afterA.filter((r) => r.state === 'queued')).toHaveLength(REPLIES - 4);

  // Worker B, with every job delivered 20 times more; two more sends hang, and B is killed mid-burst.
  doubles.failNext('twilio', { kind: 'hang' }, 2);
  const b = worker();
  await Promise.all([workerStarted(b), redeliver(ws.tenantId, replies, 20, 100)]);
  await eventually(async () => (hung().length >= 6 ? true : undefined), 15_000, 'worker B to be mid-send', 5);
  await kill(b);
  const sentBeforeC = doubles.sends('twilio').length;

  // Two fresh workers starting on the 20 waiting jobs per reply, another 20 per reply, and meanwhile 5 direct
  // runs from this process for every other reply, all racing for the replies still queued.
  const [c, d] = [worker(), worker()];
  const [, , direct] = await Promise.all([
    Promise.all([workerStarted(c), workerStarted(d)]),
    redeliver(ws.tenantId, replies, 20, 200),
    Promise.all(replies.filter((_, i) => i % 2 === 0).flatMap((id) => Array.from({ length: 5 }, () => ctx.services.outbound.send(ws.tenantId, id)))),
  ]);

  // The sweep (run by a worker, as its schedule would) declares the dead workers' claims unknown once they are
  // older than OUTBOUND_CLAIM_SECONDS; until every reply has ended somewhere.
  let sweeps = 0;
  let open: { event_id: string; state: string }[] = [];
  await eventually(
    async () => {
      open = (await rows(ws.tenantId)).filter((r) => r.state === 'sending' || r.state === 'queued');
      if (open.length === 0) return true;
      await sleep(500);
      await ctx.runtime.queues.enqueueAndAwait('outbound.sweep', {}, { waitMs: 5_000 });
      sweeps++;
      return undefined;
    },
    30_000,
    'every reply to be sent or unknown',
    250,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; still open: ${JSON.stringify(open.map((r) => r.state))}`);
  });

  const final = await rows(ws.tenantId);
  const sends = doubles.sends('twilio');
  const sendsTo = (id: string) => sends.filter((s) => s.body.To === customerOf.get(id));
  const byState = (st: string) => final.filter((r) => r.state === st);
  // eslint-disable-next-line no-console
  console.log(
    `outbound SIGKILL test: ${REPLIES} replies, ${sends.length} requests at the double (${hung().length} hung, ${sentBeforeC} before the last two workers); ` +
      `direct runs that sent ${direct.filter((r) => r.state === 'sent').length}; final states sent=${byState('sent').length} unknown=${byState('unknown').length} other=${final.length - byState('sent').length - byState('unknown').length}; sweeps ${sweeps}`,
  );

  expect(final).toHaveLength(REPLIES);
  expect(final.filter((r) => r.state === 'sending' || r.state === 'queued')).toEqual([]);
  expect(final.every((r) => r.state === 'sent' || r.state === 'unknown')).toBe(true);
  for (const r of final) {
    const mine = sendsTo(r.event_id);
    if (r.state === 'sent') {
      // Exactly one send, the answered one the row names.
      expect(mine).toHaveLength(1);
      expect(mine[0]!.answeredStatus).toBe(201);
      expect(r.provider_message_id).toBe(mine[0]!.providerMessageId);
    } else {
      // Unknown: the provider may have it (hung, or answered to a worker that died first), and nothing sent it
      // again on its own.
      expect(mine.length).toBeLessThanOrEqual(1);
    }
  }
  // Every request that hung belongs to a reply recorded unknown (its worker died before any answer).
  const hungTo = new Set(hung().map((s) => s.body.To));
  expect(hungTo.size).toBe(hung().length);
  for (const r of final) if (hungTo.has(customerOf.get(r.event_id))) expect(r.state).toBe('unknown');
  expect(byState('unknown').length).toBeGreaterThanOrEqual(6);
  // No request anywhere that was not one reply's one send.
  expect(sends.length).toBe(new Set(sends.map((s) => s.body.To)).size);

  for (const w of [c, d]) killGroup(w.proc, 'SIGTERM');
  await Promise.all([c, d].map((w) => exited(w.proc)));
}, 58_000);
