import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { listen, type Listener } from '../../db/notifications';
import type { WebhookEndpointRow } from '../../db/types';
import { createFieldSealer } from '../../lib/crypto';
import { newId } from '../../lib/ids';
import type { QueueHub } from '../../queue/hub';
import type { BackgroundYield } from '../../intake/priority/yield';
import type { AuditService } from '../audit/service';
import { planRound, roundSize, type RoundPlan } from './planner';
import { countedFailures, describe, failedByReceiver, PRUNED, settle, type Outcome, type Sent } from './settler';
import { endpointSecretContext } from './service';
import { signedHeaders } from './signing';
import { postJson, type AddressPolicy } from './transport';
import * as store from './store';
import type { ClaimedDelivery, LoggedEvent } from './store';

/** Sends per deliver job before it hands over to a fresh job, so one busy endpoint cannot keep a slot forever. */
const SENDS_PER_JOB = 200;
/** A lease outlives the request's own time-out by this much (reading the event, signing, settling). */
const LEASE_MARGIN_MS = 5000;
/** The BullMQ priority of wake-ups that are not for new events (1 is the highest; none goes before any). */
const LATER = 10;
/** Commit notifications this close together wake a workspace's senders once. */
const WAKE_FOLD_MS = 10;

type Present = (row: { id: string; type: string; occurred_at: Date; tenant_id: string; data: unknown }) => Record<string, unknown>;

/**
 * The outbound webhook engine (issue 19), run by the workers. One sender per endpoint at a time (a lease on
 * the endpoint row) sends in rounds, each one renew, one or two reads, the sends, and one settling statement:
 *
 * - a round takes up to OUTBOUND_WEBHOOK_ENDPOINT_CONCURRENCY events: first the parked deliveries that are due and
 *   head their ticket (retries, replays, events queued behind a retry), then events from the log past the
 *   endpoint's cursor, in commit order, as one chain per ticket (a chain's events go one after another, the
 *   chains side by side), covering a contiguous stretch of the log;
 * - an event past the cursor whose ticket has a parked delivery is parked behind it unsent, so one ticket's
 *   events reach the receiver in order while others flow;
 * - the settling statement records every attempt, moves the cursor past what the round sent or parked,
 *   parks the round's first-try failures with their retry time, and settles the parked deliveries: delivered,
 *   retried with backoff, or failed after the retry window (counted toward disabling the endpoint);
 * - commits wake the workspace's senders (the events NOTIFY), and the sweep re-wakes whatever a lost
 *   wake-up or a dead worker left behind. A dead sender's round is sent again under the same ids.
 *
 * A round reads here, planner.ts decides what it sends, the sends are here, settler.ts judges the answers, and
 * the one settling statement (store.settleRound) writes the verdict.
 */
export function createWebhookDelivery(deps: {
  db: Db;
  config: ConfigSection<'outboundWebhooks' | 'secrets'>;
  audit: AuditService;
  queues: QueueHub;
  logger: Logger;
  present: Present;
  /** The one yield of background work to live intake (src/intake/priority/). */
  background: BackgroundYield;
}) {
  const { db, config, audit, queues, logger, present, background } = deps;
  const secrets = createFieldSealer(config.ENCRYPTION_KEYS, endpointSecretContext);
  const leaseMs = config.OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS + LEASE_MARGIN_MS;
  const policy: AddressPolicy = { allowLoopback: config.OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK, allowPrivate: config.OUTBOUND_WEBHOOK_ALLOW_PRIVATE_NETWORKS };

  /**
   * Queues a sender job. A wake-up for new events goes first; `later` ones (a retry's, a breaker's probe, a slot
   * handed over, the sweep's) are queued behind every wake-up for new events (a BullMQ priority), so a workspace
   * whose hundred endpoints wait on retries and probes never sits in front of another's fresh events.
   */
  const wake = (tenantId: string, endpointId: string, opts: { dueAt?: number; later?: boolean } = {}) =>
    queues.enqueue('events.deliver', { tenant_id: tenantId, endpoint_id: endpointId }, { ...(opts.dueAt !== undefined ? { dueAt: opts.dueAt } : {}), ...(opts.later ? { priority: LATER } : {}) });

  /** The current secret, and the previous one while its overlap lasts. */
  function signingSecrets(ep: WebhookEndpointRow): string[] {
    const out = [secrets.open(ep.tenant_id, ep.id, ep.secret_sealed)];
    if (ep.previous_secret_sealed && ep.previous_secret_expires_at && ep.previous_secret_expires_at.getTime() > Date.now()) {
      out.push(secrets.open(ep.tenant_id, ep.id, ep.previous_secret_sealed));
    }
    return out;
  }

  /** One POST of one event; never throws (every outcome is an attempt to record). */
  async function post(ep: WebhookEndpointRow, event: Record<string, unknown> & { id: string }) {
    const body = JSON.stringify(event);
    const headers = signedHeaders(signingSecrets(ep), event.id, Math.floor(Date.now() / 1000), body);
    const started = performance.now();
    let status: number | null = null;
    let error: string | null = null;
    try {
      // A redirect (3xx) is not a delivery: the receiver must answer at the URL it registered.
      status = await postJson(ep.url, { 'content-type': 'application/json', 'user-agent': 'helpdesk-webhooks/1', ...headers }, body, config.OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS, policy);
    } catch (err) {
      error = describe(err, config.OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS);
    }
    const ok = status !== null && status >= 200 && status < 300;
    if (!ok && error === null) error = `HTTP ${status}`;
    return { ok, status, error, durationMs: Math.round(performance.now() - started) };
  }

  /** Failed events count toward disabling the endpoint (a transaction of its own, on that rarer path). */
  async function countFailed(tenantId: string, endpointId: string, failed: number) {
    await db.transaction().execute(async (tx) => {
      const ep = await store.countFailures(tx, tenantId, endpointId, failed);
      if (ep?.enabled && ep.consecutive_failures >= config.OUTBOUND_WEBHOOK_DISABLE_AFTER_FAILURES) {
        await store.parkBacklog(tx, tenantId, endpointId);
        await store.updateEndpoint(tx, tenantId, endpointId, { enabled: false, disabled_reason: 'failures' });
        await audit.recordBySystem(tx, tenantId, 'endpoint.disabled', { type: 'webhook_endpoint', id: endpointId }, { reason: 'failures', consecutive_failures: ep.consecutive_failures });
        logger.warn({ tenant_id: tenantId, endpoint_id: endpointId, consecutive_failures: ep.consecutive_failures }, 'webhook endpoint disabled after consecutive failed events');
      }
    });
  }

  /** Sends a round's plan: the heads and the chains side by side. Throws nothing a receiver can cause: every outcome is an attempt to record. */
  async function send(ep: WebhookEndpointRow, plan: RoundPlan<ClaimedDelivery>): Promise<Sent> {
    const logged = new Map((await store.eventsByIds(db, ep.tenant_id, plan.chains.flat().map((e) => e.id))).map((e) => [e.id, e]));
    const sendOne = (event: LoggedEvent | null | undefined): Promise<Outcome> => (event ? post(ep, present(event) as Record<string, unknown> & { id: string }) : Promise.resolve(PRUNED));
    /** A chain's events one after another; after a failure the rest of the chain is not sent (it is parked behind it). */
    const sendChain = async (chain: store.ScannedEvent[]) => {
      const out: Sent['chains'][number] = [];
      let ok = true;
      for (const e of chain) {
        const r = ok ? await sendOne(logged.get(e.id)) : null;
        if (r && failedByReceiver(r)) ok = false;
        out.push({ e, r });
      }
      return out;
    };
    const [heads, chains] = await Promise.all([Promise.all(plan.heads.map((d) => sendOne(d.event))), Promise.all(plan.chains.map(sendChain))]);
    return { heads, chains };
  }

  /**
   * One round for the endpoint; false when there was nothing to do. Throws nothing a receiver can cause:
   * every answer, time-out or refusal is an attempt to record.
   */
  async function round(ep: WebhookEndpointRow, token: string): Promise<{ sent: number; lost: boolean; openUntil?: Date } | undefined> {
    const tenantId = ep.tenant_id;
    const { slots, scanRows } = roundSize(ep, config.OUTBOUND_WEBHOOK_ENDPOINT_CONCURRENCY);
    const heads = await store.claimHeads(db, tenantId, ep.id, leaseMs, slots);
    const scanned = await store.scanAfter(db, tenantId, ep.id, ep.sent_through, ep.event_types, scanRows);
    const plan = planRound({ cursor: ep.sent_through, slots, heads, scanned });
    if (!plan) return undefined;
    const sent = await send(ep, plan);
    const verdict = settle({ ep, plan, sent, now: Date.now(), config, random: Math.random, newId });
    const settled = await store.settleRound(db, tenantId, ep.id, { token, from: plan.from, to: plan.to, ...verdict.rows });
    const failed = countedFailures(verdict, settled);
    if (failed > 0) await countFailed(tenantId, ep.id, failed);
    const openUntil = verdict.circuit ? await store.recordCircuit(db, tenantId, ep.id, verdict.circuit) : null;
    const result = { sent: verdict.rows.attempts.length, lost: !settled.advanced };
    if (openUntil) {
      // Held back by its own breaker: nothing is sent until it reopens, when one event probes it.
      await wake(tenantId, ep.id, { dueAt: openUntil.getTime(), later: true });
      return { ...result, openUntil };
    }
    if (verdict.retryAt !== null) await wake(tenantId, ep.id, { dueAt: verdict.retryAt, later: true });
    return result;
  }

  /** A workspace's sender slot is free: the endpoint that waited longest for one is woken. */
  async function handOver(tenantId: string): Promise<void> {
    const next = await store.handOverSlot(db, tenantId);
    if (next) await wake(tenantId, next, { later: true });
  }

  /** New events committed in the workspace: its running senders send another round, the idle ones are woken. */
  async function wakeSenders(tenantId: string): Promise<{ woken: number }> {
    const idle = await store.wantSenders(db, tenantId);
    for (const id of idle) await wake(tenantId, id);
    return { woken: idle.length };
  }

  /**
   * Outbound sends are background work: while live intake saturates the host's CPUs, a sender waits before
   * its next round (up to BACKGROUND_INTAKE_YIELD_MS, src/intake/priority/yield.ts), so intake keeps the cores and
   * the backlog is sent when intake eases. The wait is bounded, so a sustained saturation still gets a round per
   * endpoint per wait.
   */
  const makeWay = () => background.makeWay();

  /** Keeps the sender's lease alive while it waits or sends (a chain of slow answers outlasts one lease). */
  function keepLease(tenantId: string, endpointId: string, token: string) {
    const timer = setInterval(() => {
      store.extendSender(db, tenantId, endpointId, token, leaseMs).catch((err: Error) => logger.warn({ err: err.message, endpoint_id: endpointId }, 'webhook sender lease not extended'));
    }, leaseMs / 3);
    return () => clearInterval(timer);
  }

  return {
    /**
     * Sends the endpoint's due events, when this job can take the endpoint's sender lease (otherwise the
     * holder is told to send another round, and this job ends), round after round until none is due or
     * the job's share of its slot is used.
     */
    async deliver(tenantId: string, endpointId: string): Promise<{ sent: number }> {
      const token = newId();
      // One of the workspace's OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY sender slots, or a place in its queue for one.
      const got = await db.transaction().execute(async (tx) => {
        if (!(await store.trySenderLock(tx, tenantId))) {
          await store.markWaiting(tx, tenantId, endpointId);
          return 'waiting' as const;
        }
        return store.acquireSender(tx, tenantId, endpointId, token, leaseMs, config.OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY);
      });
      if (got !== 'acquired') return { sent: 0 };
      const stopKeeping = keepLease(tenantId, endpointId, token);
      /** Lets go of the lease and, when it did, hands the workspace's slot to the endpoint waiting longest. */
      const letGo = async (force = false) => {
        const released = await store.releaseSender(db, tenantId, endpointId, token, force);
        if (released) await handOver(tenantId);
        return released;
      };
      try {
        let sent = 0;
        for (;;) {
          if (sent >= SENDS_PER_JOB) {
            // Hand over to a fresh job at the queue's tail, so one busy endpoint cannot keep a slot forever.
            await letGo(true);
            await wake(tenantId, endpointId);
            return { sent };
          }
          await makeWay();
          const ep = await store.renewSender(db, tenantId, endpointId, token, leaseMs);
          if (!ep) {
            await handOver(tenantId);
            return { sent };
          }
          // Woken while its circuit is open (a retry's wake-up, say): it waits for its probe.
          if (ep.circuit_open_until && ep.circuit_open_until.getTime() > Date.now()) {
            await letGo(true);
            return { sent };
          }
          const done = await round(ep, token);
          if (!done) {
            if (await letGo()) return { sent };
            continue;
          }
          sent += done.sent;
          if (done.openUntil) {
            await letGo(true);
            return { sent };
          }
          if (done.lost) {
            await handOver(tenantId);
            return { sent };
          }
        }
      } finally {
        stopKeeping();
      }
    },

    wakeSenders,

    /** The safety net: endpoints with work and no live sender (a lost wake-up, a dead worker). */
    async sweep(): Promise<{ endpoints: number }> {
      const due = await store.crossTenantEndpointsDue(db, config.OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY);
      for (const d of due) await wake(d.tenant_id, d.endpoint_id, { later: true });
      return { endpoints: due.length };
    },

    /**
     * Wakes a workspace's senders when its events commit (the outbox trigger's NOTIFY, sent at commit only).
     * Notifications within a few milliseconds are folded into one wake-up per workspace; a lost one (the
     * listening connection down, the database or Redis refusing) is the sweep's to find.
     */
    listenForCommits(databaseUrl: string): Listener {
      const pending = new Set<string>();
      let timer: NodeJS.Timeout | undefined;
      const flush = () => {
        timer = undefined;
        const tenants = [...pending];
        pending.clear();
        for (const tenantId of tenants) {
          wakeSenders(tenantId).catch((err: Error) => logger.warn({ err: err.message, tenant_id: tenantId }, 'webhook senders not woken; the sweep will catch up'));
        }
      };
      return listen(
        databaseUrl,
        'events',
        (tenantId) => {
          pending.add(tenantId);
          timer ??= setTimeout(flush, WAKE_FOLD_MS);
        },
        { onError: (err) => logger.warn({ err: err.message }, 'events LISTEN connection lost; reopening') },
      );
    },
  };
}

export type WebhookDelivery = ReturnType<typeof createWebhookDelivery>;
