/**
 * The connected mailbox in other deployments: no worker running, a daily send limit of 1, only Google
 * configured, and a short OAuth state lifetime.
 */
import type { Job } from 'bullmq';
import { startTestApp, type TestContext } from './helpers/context';
import { createWorkspace } from './helpers/factories';
import { createTicket } from './helpers/tickets';
import { eventually } from './helpers/wait';
import { PROVIDERS, SENTENCE, checkOf, helpers, providerEnv, tag, tokenCalls, useMailProviderDouble, useMailboxApp } from './helpers/mailbox';

const double = useMailProviderDouble();

// =========================================================================================================

describe('Connected mailbox, no worker running', () => {
  const { ctx, h } = useMailboxApp({ JOB_WAIT_MS: '300', OUTBOUND_ATTEMPTS: '7', OUTBOUND_RETRY_BASE_MS: '10' }, { workers: false });

  const waitingJobs = async (queue: 'mailbox' | 'outbound', name: string): Promise<Job[]> => {
    const jobs = await ctx.runtime.queues.queue(queue).getJobs(['waiting', 'active', 'delayed', 'prioritized']);
    return jobs.filter((j): j is Job => j !== undefined && j !== null && j.name === name);
  };
  const forTenant = (jobs: Job[], tenantId: string) => jobs.filter((j) => (j.data as { tenant_id?: string }).tenant_id === tenantId);

  test('the scheduled sweep, run five times at once, leaves exactly one mailbox.refresh job per mailbox that is due; an on-demand refresh joins it', async () => {
    const due = await createWorkspace(ctx);
    const dueToo = await createWorkspace(ctx);
    const fresh = await createWorkspace(ctx);
    await h.connect(due, 'google');
    await h.connect(dueToo, 'microsoft');
    await h.connect(fresh, 'google');
    await ctx.db
      .updateTable('mailboxes')
      .set({ last_checked_at: new Date(Date.now() - 2 * ctx.config.MAILBOX_REFRESH_SECONDS * 1000) })
      .where('tenant_id', 'in', [due.tenantId, dueToo.tenantId])
      .execute();

    await Promise.all(Array.from({ length: 5 }, () => ctx.services.mailbox.sweep()));

    const refreshes = await waitingJobs('mailbox', 'mailbox.refresh');
    expect(forTenant(refreshes, due.tenantId)).toHaveLength(1);
    expect(forTenant(refreshes, dueToo.tenantId)).toHaveLength(1);
    expect(forTenant(refreshes, fresh.tenantId)).toHaveLength(0);
    const polls = await waitingJobs('mailbox', 'mailbox.poll');
    for (const ws of [due, dueToo, fresh]) expect(forTenant(polls, ws.tenantId)).toHaveLength(1);

    // An admin's refresh while the scheduled one waits is the same job, not a second one.
    const res = await h.refresh(due.ownerKey);
    expect(res.status).toBe(200);
    expect(res.body.connected).toBe(true);
    expect(forTenant(await waitingJobs('mailbox', 'mailbox.refresh'), due.tenantId)).toHaveLength(1);
  });

  test.each(PROVIDERS)('%s: with the provider down, each attempt says on the ticket that it will retry, and the last one (OUTBOUND_ATTEMPTS) records the reply as failed; nothing is sent, and a late run sends nothing', async (p) => {
    const ws = await createWorkspace(ctx);
    const { email: mailbox } = await h.connect(ws, p);
    const mail = await h.emailTicket(ws, p, mailbox);
    const last = ctx.config.OUTBOUND_ATTEMPTS;
    double.setDown(p, true);
    let eventId: string;
    try {
      ({ eventId } = await h.reply(ws, mail.ticketId, 'This will not get through.'));
      // No workers run here: the test is the worker, running each attempt once its backoff has passed.
      await eventually(async () => {
        await ctx.services.outbound.send(ws.tenantId, eventId);
        return (await h.outbound(ws.tenantId, eventId))?.state === 'failed' ? true : undefined;
      }, 20_000, 'the reply to fail');
    } finally {
      double.setDown(p, false);
    }
    const row = await h.outbound(ws.tenantId, eventId);
    expect(row).toMatchObject({ state: 'failed', attempts: last, sent_at: null });
    expect(row!.last_error).toEqual(expect.any(String));
    const deliveries = await h.deliveries(ws, mail.ticketId);
    expect(deliveries.map((d) => d.meta.state)).toEqual([...Array.from({ length: last - 1 }, () => 'retrying'), 'failed']);
    expect(deliveries[0]!.body).toMatch(new RegExp(`Attempt 1 of ${last}; retrying`));
    expect(deliveries.at(-1)!.meta).toMatchObject({ state: 'failed', reply_event_id: eventId, attempts: last });
    expect(deliveries.at(-1)!.body).toMatch(/Gave up after/);

    // Once failed it stays failed: a late run with the provider back sends nothing.
    expect(await ctx.services.outbound.send(ws.tenantId, eventId)).toEqual({ state: 'not_due' });
    expect(double.sent(p, mailbox)).toEqual([]);
    expect((await h.statusOk(ws)).sent_today).toBe(0);
  });

  test('the OAuth state lives OAUTH_STATE_TTL_SECONDS: ten minutes unless configured', async () => {
    const ws = await createWorkspace(ctx);
    const before = Date.now();
    const { expires_at } = await h.startOk(ws, 'google');
    expect(ctx.config.OAUTH_STATE_TTL_SECONDS).toBe(600);
    expect(new Date(expires_at).getTime()).toBeGreaterThanOrEqual(before + 600_000 - 1000);
    expect(new Date(expires_at).getTime()).toBeLessThanOrEqual(Date.now() + 600_000 + 1000);
  });

  test('a reply on a ticket that did not come by email queues nothing', async () => {
    const ws = await createWorkspace(ctx);
    await h.connect(ws, 'google');
    const t = await createTicket(ctx, ws);
    expect(t.source).not.toBe('email');
    const { eventId, event } = await h.reply(ws, t.id, 'Replying in the app.');
    expect(event.meta).not.toHaveProperty('delivery');
    expect(await h.outbound(ws.tenantId, eventId)).toBeUndefined();
    expect(await h.count('outbound_messages', ws.tenantId)).toBe(0);
    expect(await ctx.runtime.queues.queue('outbound').getJob(`send-${eventId}-0`)).toBeUndefined();
    expect(forTenant(await waitingJobs('outbound', 'outbound.send'), ws.tenantId)).toEqual([]);
  });
});

// =========================================================================================================

describe('Connected mailbox with a daily send limit of 1', () => {
  const { ctx, h } = useMailboxApp({ MAILBOX_DAILY_SEND_LIMIT: '1' });

  test.each(PROVIDERS)('%s: the second reply of the day is blocked with a clear delivery event and a failing daily_send_quota check', async (p) => {
    const ws = await createWorkspace(ctx);
    const { email: mailbox } = await h.connect(ws, p);
    const mail = await h.emailTicket(ws, p, mailbox);
    const first = await h.reply(ws, mail.ticketId, 'First reply.');
    await eventually(async () => ((await h.outbound(ws.tenantId, first.eventId))?.state === 'sent' ? true : undefined), 10_000, 'the first reply to be sent');

    const second = await h.reply(ws, mail.ticketId, 'Second reply.');
    const row = await eventually(async () => {
      const o = await h.outbound(ws.tenantId, second.eventId);
      return o && o.state !== 'queued' && o.state !== 'sending' ? o : undefined;
    }, 10_000, 'the second reply to be settled');
    expect(row).toMatchObject({ state: 'blocked', sent_at: null });
    expect(double.sent(p, mailbox)).toHaveLength(1);

    const deliveries = await h.deliveries(ws, mail.ticketId);
    expect(deliveries.map((d) => d.meta.state)).toEqual(['sent', 'blocked']);
    const blocked = deliveries[1]!;
    expect(blocked.meta.reply_event_id).toBe(second.eventId);
    expect(blocked.body).toMatch(/quota/i);

    const s = await h.statusOk(ws);
    expect(s.sent_today).toBe(1);
    const quota = checkOf(s, 'daily_send_quota');
    expect(quota.status).toBe('failing');
    expect(quota.remediation).toMatch(SENTENCE);
  });
});

// =========================================================================================================

describe('A deployment with only Google configured', () => {
  let ctx: TestContext;
  const h = helpers(() => ctx);
  beforeAll(async () => {
    const { MICROSOFT_CLIENT_ID: _id, MICROSOFT_CLIENT_SECRET: _secret, ...rest } = providerEnv();
    ctx = await startTestApp({ env: rest });
  });
  afterAll(async () => {
    await ctx.close();
  });

  test('microsoft start and complete are 409 mail_provider_not_configured; google still starts', async () => {
    const ws = await createWorkspace(ctx);
    const start = await h.start(ws.ownerKey, 'microsoft');
    expect(start.status).toBe(409);
    expect(start.body.code).toBe('mail_provider_not_configured');
    const complete = await h.complete(ws.ownerKey, 'microsoft', { code: 'c', state: 's' });
    expect(complete.status).toBe(409);
    expect(complete.body.code).toBe('mail_provider_not_configured');
    expect(await h.count('oauth_states', ws.tenantId)).toBe(0);
    expect((await h.start(ws.ownerKey, 'google')).status).toBe(200);
  });
});

// =========================================================================================================

describe('A deployment with OAUTH_STATE_TTL_SECONDS=2', () => {
  const { ctx, h } = useMailboxApp({ OAUTH_STATE_TTL_SECONDS: '2' }, { workers: false });

  test('a state completes within its two seconds; one completed after them is 400 oauth_state_invalid and its code is not exchanged', async () => {
    const ws = await createWorkspace(ctx);
    const before = Date.now();
    const early = await h.startOk(ws, 'google');
    expect(new Date(early.expires_at).getTime()).toBeLessThanOrEqual(Date.now() + 2000 + 1000);
    expect(new Date(early.expires_at).getTime()).toBeGreaterThanOrEqual(before + 2000 - 1000);
    const late = await h.startOk(ws, 'microsoft');
    const ok = await h.complete(ws.ownerKey, 'google', { code: h.code('google', `early-${tag()}@acme.test`), state: early.state });
    expect(ok.status).toBe(200);

    await new Promise((r) => setTimeout(r, Math.max(0, new Date(late.expires_at).getTime() - Date.now()) + 100));
    const mark = double.requests.length;
    const res = await h.complete(ws.ownerKey, 'microsoft', { code: h.code('microsoft', `late-${tag()}@acme.test`), state: late.state });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('oauth_state_invalid');
    expect(tokenCalls(mark, 'microsoft')).toEqual([]);
    expect((await h.statusOk(ws)).provider).toBe('google');
  });
});
