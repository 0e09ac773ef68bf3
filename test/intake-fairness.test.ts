/**
 * Fair sharing of live intake between workspaces (issue 21): a workspace's burst waits in its own lane, so a
 * quiet workspace's message is queued at once and answered while the loud one's backlog is still deep; the
 * lanes' own rules (a share queued at a time, a bounded wait, 429 past it) hold exactly.
 */
import { createHostSaturation, createLanes, SHARE_RAMP_MS } from '../src/intake/priority';
import { DomainError } from '../src/lib/errors';
import { startTestApp, type TestContext } from './helpers/context';
import { createWorkspace, type Workspace } from './helpers/factories';
import { connect, countRows } from './helpers/ingest';
import { newSmsSid, smsPayload } from './helpers/payloads';

const tick = () => new Promise((r) => setImmediate(r));

describe('lanes per workspace', () => {
  test('a workspace queues at most its share; the rest waits in its lane and goes, in order, as answers come back', async () => {
    const fair = createLanes({ perWorkspace: 3, maxWaiting: 100 });
    const entered: number[] = [];
    const releases: (() => void)[] = [];
    const bulk: boolean[] = [];
    for (let i = 0; i < 6; i++) void fair.enter('a', 1).then((e) => (entered.push(i), releases.push(e.release), bulk.push(e.bulk)));
    await tick();
    expect(entered).toEqual([0, 1, 2]);
    expect(fair.lanes().get('a')).toEqual({ queued: 3, waiting: 3 });
    releases[1]!();
    releases[1]!(); // a second call changes nothing
    await tick();
    expect(entered).toEqual([0, 1, 2, 3]);
    releases[0]!();
    releases[2]!();
    await tick();
    expect(entered).toEqual([0, 1, 2, 3, 4, 5]);
    // The first item of a lane is live; once half its share is queued, and for whatever waited, it is bulk.
    expect(bulk).toEqual([false, false, true, true, true, true]);
    for (const r of releases) r();
    expect(fair.lanes().size).toBe(0);
  });

  test('while the host is saturated and another workspace sends too, a workspace gets only the shared share; alone, or with CPU to spare, its whole share', async () => {
    let saturated = true;
    const fair = createLanes({ perWorkspace: 4, maxWaiting: 100, sharedQueued: 1, contended: () => saturated });
    const entered = (tenant: string, n: number) => {
      const got: (() => void)[] = [];
      for (let i = 0; i < n; i++) void fair.enter(tenant, 1).then((e) => got.push(e.release));
      return got;
    };
    // Alone: saturated or not, its whole share.
    const alone = entered('loud', 6);
    await tick();
    expect(alone).toHaveLength(4);
    for (const r of alone.splice(0)) r();
    await tick();
    expect(alone).toHaveLength(2);
    for (const r of alone.splice(0)) r();
    // Another workspace sends: the loud one gets half its share while it has no backlog (2 of 4); once requests
    // wait in its lane it is held to one item queued. The quiet one goes at once.
    await fair.enter('quiet', 1).then((e) => e.release());
    const shared = entered('loud', 5);
    await tick();
    expect(shared).toHaveLength(2);
    for (const r of shared.splice(0)) r();
    await tick();
    expect(shared).toHaveLength(1);
    // CPU to spare again: its share grows back, doubling once a ramp step has passed.
    saturated = false;
    await fair.enter('quiet', 1).then((e) => e.release());
    await new Promise((r) => setTimeout(r, SHARE_RAMP_MS + 20));
    shared.splice(0)[0]!();
    await tick();
    expect(shared).toHaveLength(2);
    for (const r of shared) r();
  });

  test('after saturation a burst\'s share doubles back step by step while others send, not all at once, and drops at the next saturation', async () => {
    let saturated = true;
    const fair = createLanes({ perWorkspace: 8, maxWaiting: 100, sharedQueued: 1, contended: () => saturated });
    const inFlight: (() => void)[] = [];
    const burst = () => void fair.enter('loud', 1).then((e) => inFlight.push(e.release));
    await fair.enter('quiet', 1).then((e) => e.release());
    for (let i = 0; i < 30; i++) burst();
    await tick();
    // Half its share before it has a backlog, then the shared share (1) for as long as it has one.
    expect(inFlight).toHaveLength(4);
    saturated = false;
    // Each step: answer everything in flight; the lane lets in what the share allows now.
    const step = async () => {
      await fair.enter('quiet', 1).then((e) => e.release());
      await new Promise((r) => setTimeout(r, SHARE_RAMP_MS + 20));
      const done = inFlight.splice(0);
      for (const r of done) r();
      await tick();
      return inFlight.length;
    };
    expect(await step()).toBe(2);
    expect(await step()).toBe(4);
    expect(await step()).toBe(8);
    expect(await step()).toBe(8);
    // Saturated again: back to the shared share at once.
    saturated = true;
    const done = inFlight.splice(0);
    for (const r of done) r();
    await tick();
    expect(inFlight).toHaveLength(1);
    for (const r of inFlight.splice(0)) r();
  });

  test('on a saturated host a steady sender with nothing waiting keeps up to half its share, while the flood beside it, with a backlog, gets the shared share', async () => {
    const fair = createLanes({ perWorkspace: 8, maxWaiting: 100, sharedQueued: 1, contended: () => true });
    const flood: (() => void)[] = [];
    for (let i = 0; i < 30; i++) void fair.enter('flood', 1).then((e) => flood.push(e.release));
    await tick();
    // Three of the steady sender's messages in flight at once (answers slowed by the load): none waits.
    const steady = await Promise.all([fair.enter('steady', 1), fair.enter('steady', 1), fair.enter('steady', 1)]);
    expect(steady.map((e) => e.bulk)).toEqual([false, false, false]);
    expect(fair.lanes().get('steady')).toEqual({ queued: 3, waiting: 0 });
    // The flood, with 26 waiting, goes one at a time as its answers come back.
    for (const r of flood.splice(0)) r();
    await tick();
    expect(flood).toHaveLength(1);
    expect(fair.lanes().get('flood')).toMatchObject({ queued: 1 });
    for (const e of steady) e.release();
    for (const r of flood) r();
  });

  test('host saturation: on after a busy window, held a second after the last busy sample, off when calm', async () => {
    let busy = 0;
    let total = 0;
    let share = 0.95;
    // A fake kernel counter: each read advances 100 ms of two CPUs at the current busy share.
    const host = createHostSaturation({ cpu: () => ((total += 200), (busy += 200 * share), { busy, total }) });
    expect(host.saturated()).toBe(false);
    await new Promise((r) => setTimeout(r, 450));
    expect(host.saturated()).toBe(true);
    share = 0.1;
    await new Promise((r) => setTimeout(r, 600));
    expect(host.saturated()).toBe(true);
    await new Promise((r) => setTimeout(r, 1200));
    expect(host.saturated()).toBe(false);
    host.close();
  });

  test('another workspace is never held up by a full lane', async () => {
    const fair = createLanes({ perWorkspace: 2, maxWaiting: 100 });
    for (let i = 0; i < 10; i++) void fair.enter('loud', 1);
    await tick();
    const quiet = await Promise.race([fair.enter('quiet', 1).then(() => 'entered'), new Promise((r) => setTimeout(() => r('held'), 50))]);
    expect(quiet).toBe('entered');
  });

  test('past maxWaiting items the request is refused 429 throttled with a Retry-After, and the lane is unchanged', async () => {
    const fair = createLanes({ perWorkspace: 1, maxWaiting: 2 });
    void fair.enter('a', 1);
    void fair.enter('a', 1);
    void fair.enter('a', 1);
    await tick();
    const err = await fair.enter('a', 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).code).toBe('throttled');
    expect((err as DomainError).extra).toMatchObject({ retryAfterSeconds: 1 });
    expect(fair.lanes().get('a')).toEqual({ queued: 1, waiting: 2 });
  });

  test('a message larger than the share goes alone once its lane is empty', async () => {
    const fair = createLanes({ perWorkspace: 2, maxWaiting: 100 });
    const { release: first } = await fair.enter('a', 1);
    let big = false;
    void fair.enter('a', 5).then(() => (big = true));
    await tick();
    expect(big).toBe(false);
    first();
    await tick();
    expect(big).toBe(true);
  });
});

describe('a quiet workspace during another workspace\'s burst', () => {
  let ctx: TestContext;
  let loud: Workspace;
  let quiet: Workspace;
  beforeAll(async () => {
    // No worker yet: the loud workspace's burst piles up before anything is worked off.
    ctx = await startTestApp({ env: { INTAKE_WORKSPACE_QUEUED: '8', INTAKE_WORKSPACE_WAITING: '1000', JOB_WAIT_MS: '30000', INGEST_RATE_POINTS: '100000' } });
    loud = await createWorkspace(ctx);
    quiet = await createWorkspace(ctx);
    await connect(ctx, loud, 'sms');
    await connect(ctx, quiet, 'sms');
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const send = (w: Workspace, i: number) => {
    const started = Date.now();
    return ctx.http
      .post('/v1/ingest/sms')
      .send({ tenant_id: w.tenantId, payload: smsPayload({ sid: newSmsSid(), from: `+1777${String(i).padStart(7, '0')}`, body: `message ${i}` }) })
      .then((res) => ({ status: res.status, at: Date.now(), ms: Date.now() - started }));
  };

  test('its message is answered after at most one share of the loud workspace\'s backlog, and every message of both is written once', async () => {
    const BURST = 120;
    const loudAnswers = Array.from({ length: BURST }, (_, i) => send(loud, i));
    // The burst is in: 8 of its messages queued, the rest waiting in its lane.
    await new Promise((r) => setTimeout(r, 500));
    const quietAnswer = send(quiet, 9000);
    await new Promise((r) => setTimeout(r, 200));
    await ctx.startWorkers();
    const q = await quietAnswer;
    const answered = await Promise.all(loudAnswers);
    expect(q.status).toBe(200);
    expect(answered.every((a) => a.status === 200)).toBe(true);
    // Answered before all but the loud workspace's first share (and the batch it was written with).
    const loudBefore = answered.filter((a) => a.at < q.at).length;
    expect(loudBefore).toBeLessThanOrEqual(8 + 8);
    expect((await countRows(ctx, loud.tenantId)).ingest_deliveries).toBe(BURST);
    expect((await countRows(ctx, quiet.tenantId)).ingest_deliveries).toBe(1);
  });
});
