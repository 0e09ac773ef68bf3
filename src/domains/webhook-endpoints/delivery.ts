import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { listen, type Listener } from '../../db/notifications';
import type { WebhookEndpointRow } from '../../db/types';
import { newId } from '../../lib/ids';
import type { QueueHub } from '../../queue/hub';
import type { AuditService } from '../audit/service';
import { createEndpointSecrets } from './service';
import { signedHeaders } from './signing';
import { postJson, type AddressPolicy } from './transport';
import * as store from './store';
import type { ClaimedDelivery } from './store';

/** Events fanned out per transaction: bounded, so one burst never holds the cursor lock for long. */
const FANOUT_BATCH = 500;
/** When another fan-out of the workspace holds its cursor, look again after this. */
const FANOUT_BUSY_RETRY_MS = 100;
/** Sends per deliver job before it hands over to a fresh job, so one busy endpoint cannot keep a slot forever. */
const SENDS_PER_JOB = 200;
/** A lease outlives the request's own time-out by this much (reading the event, signing, settling). */
const LEASE_MARGIN_MS = 5000;
/** The longest backoff ceiling between two tries. */
const MAX_BACKOFF_MS = 6 * 3600 * 1000;
const MAX_ERROR_CHARS = 300;
/** Commit notifications this close together wake one fan-out per workspace. */
const WAKE_FOLD_MS = 10;

type Present = (row: { id: string; type: string; occurred_at: Date; tenant_id: string; data: unknown }) => Record<string, unknown>;

/**
 * Exponential backoff with full jitter (a uniform draw below a ceiling that doubles per try): retries of
 * many deliveries that failed together spread out instead of arriving at a recovering receiver at once.
 */
export function backoffMs(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, baseMs * 2 ** Math.min(attempt - 1, 40));
  return Math.floor(random() * ceiling);
}

/** What went wrong, without the URL (it may carry the receiver's own token) and bounded in size. */
function describe(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; code?: string; cause?: { code?: string } };
  if (e?.name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
  const code = e?.code ?? e?.cause?.code;
  if (code === 'EADDRNOTALLOWED') return 'the endpoint resolves to a private or loopback address, which this deployment does not allow';
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ECONNRESET') return 'connection reset';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code) return `network error ${code}`.slice(0, MAX_ERROR_CHARS);
  return 'network error';
}

/**
 * The outbound webhook engine (issue 19), run by the workers:
 *
 * - fan-out walks a workspace's events log by commit position from a stored cursor and, in the same
 *   transaction as the cursor's advance, creates one delivery row per matching enabled endpoint (unique per
 *   endpoint and event, so a repeated fan-out adds nothing);
 * - deliver leases the oldest due delivery that heads its ticket (no older pending delivery of the same
 *   ticket), POSTs it signed, and settles it: delivered, retried later with backoff, or failed after the
 *   retry window; at most WEBHOOK_ENDPOINT_CONCURRENCY leases per endpoint at once;
 * - sweep re-wakes whatever a lost wake-up or a dead worker left behind.
 */
export function createWebhookDelivery(deps: {
  db: Db;
  config: ConfigSection<'outboundWebhooks' | 'secrets'>;
  audit: AuditService;
  queues: QueueHub;
  logger: Logger;
  present: Present;
}) {
  const { db, config, audit, queues, logger, present } = deps;
  const secrets = createEndpointSecrets(config);
  const leaseMs = config.WEBHOOK_DELIVERY_TIMEOUT_MS + LEASE_MARGIN_MS;
  const policy: AddressPolicy = { allowLoopback: config.WEBHOOK_ALLOW_HTTP_LOOPBACK, allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS };

  const wake = (tenantId: string, endpointId: string, dueAt?: number) =>
    queues.enqueue('events.deliver', { tenant_id: tenantId, endpoint_id: endpointId }, dueAt === undefined ? {} : { dueAt });

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
      status = await postJson(ep.url, { 'content-type': 'application/json', 'user-agent': 'helpdesk-webhooks/1', ...headers }, body, config.WEBHOOK_DELIVERY_TIMEOUT_MS, policy);
    } catch (err) {
      error = describe(err, config.WEBHOOK_DELIVERY_TIMEOUT_MS);
    }
    const ok = status !== null && status >= 200 && status < 300;
    if (!ok && error === null) error = `HTTP ${status}`;
    return { ok, status, error, durationMs: Math.round(performance.now() - started) };
  }

  type Outcome = { ok: boolean; status: number | null; error: string | null; durationMs: number; countsAsFailure?: boolean };

  /**
   * Records a round's attempts and settles its deliveries (one statement for the whole round): delivered,
   * retried later with backoff, or failed after the retry window. Failed events count toward disabling the
   * endpoint (a transaction of its own, on that rarer path). Retries wake a sender when they fall due.
   */
  async function settle(tenantId: string, endpointId: string, round: { d: ClaimedDelivery; r: Outcome }[]) {
    const now = Date.now();
    const decided = round.map(({ d, r }) => {
      let nextAt: Date | null = null;
      const counts = r.countsAsFailure ?? true;
      if (!r.ok && counts) {
        const at = now + backoffMs(d.attempts, config.WEBHOOK_RETRY_BASE_MS);
        if (at <= d.window_started_at.getTime() + config.WEBHOOK_RETRY_HOURS * 3600 * 1000) nextAt = new Date(at);
      }
      const outcome = r.ok ? ('delivered' as const) : nextAt ? ('retrying' as const) : ('failed' as const);
      return { d, r, nextAt, outcome, counts };
    });
    const settled = await store.settleRound(
      db,
      tenantId,
      endpointId,
      decided.map(({ d, r, nextAt, outcome }) => ({
        id: d.id,
        attempt: d.attempts,
        status: outcome === 'retrying' ? 'pending' : outcome,
        nextAttemptAt: nextAt,
        attemptRow: {
          id: newId(),
          endpoint_id: d.endpoint_id,
          delivery_id: d.id,
          event_id: d.event_id,
          event_type: d.event_type,
          attempt: d.attempts,
          outcome,
          status_code: r.status,
          duration_ms: r.durationMs,
          error: r.error,
          next_retry_at: nextAt,
        },
      })),
    );
    // Deleted endpoint, or a lease handed over after it expired: the newer holder records its own.
    const mine = decided.filter((x) => settled.has(x.d.id));
    const failed = mine.filter((x) => x.outcome === 'failed' && x.counts).length;
    if (failed > 0) {
      await db.transaction().execute(async (tx) => {
        const ep = await store.countFailures(tx, tenantId, endpointId, failed);
        if (ep?.enabled && ep.consecutive_failures >= config.WEBHOOK_DISABLE_AFTER_FAILURES) {
          await store.updateEndpoint(tx, tenantId, endpointId, { enabled: false, disabled_reason: 'failures' });
          await audit.recordBySystem(tx, tenantId, 'endpoint.disabled', { type: 'webhook_endpoint', id: endpointId }, { reason: 'failures', consecutive_failures: ep.consecutive_failures });
          logger.warn({ tenant_id: tenantId, endpoint_id: endpointId, consecutive_failures: ep.consecutive_failures }, 'webhook endpoint disabled after consecutive failed events');
        }
      });
    }
    const retries = mine.flatMap((x) => (x.nextAt ? [x.nextAt.getTime()] : []));
    if (retries.length > 0) await wake(tenantId, endpointId, Math.min(...retries));
  }

  /** Pruned by the log's retention before it could be delivered: nothing left to send, and not the receiver's fault. */
  const PRUNED: Outcome = { ok: false, status: null, error: 'the event is no longer in the log', durationMs: 0, countsAsFailure: false };

  return {
    /** Fans the workspace's new events out to its endpoints; wakes a sender per endpoint given work. */
    async fanout(tenantId: string): Promise<{ woken: number }> {
      let total = 0;
      for (;;) {
        const { created, more, busy } = await db.transaction().execute(async (tx) => {
          const cursor = await store.lockFanoutCursor(tx, tenantId);
          if (cursor === undefined) return { created: [] as string[], more: false, busy: true };
          const endpoints = await store.enabledEndpoints(tx, tenantId);
          if (endpoints.length === 0) {
            // Nobody listens: skip to the end, so an endpoint created later does not walk this stretch.
            await store.advanceFanoutCursor(tx, tenantId, await store.lastPosition(tx, tenantId));
            return { created: [] as string[], more: false };
          }
          const events = await store.eventsAfter(tx, tenantId, cursor, FANOUT_BATCH);
          if (events.length === 0) return { created: [] as string[], more: false };
          const rows = events.flatMap((e) =>
            endpoints
              .filter((ep) => ep.event_types.includes(e.type) && Number(e.position) > Number(ep.starts_after))
              .map((ep) => ({
                id: newId(),
                endpoint_id: ep.id,
                event_id: e.id,
                event_type: e.type,
                position: e.position,
                ordering_key: e.ticket_id ? `ticket:${e.ticket_id}` : `event:${e.id}`,
              })),
          );
          const given = [...new Set(await store.insertDeliveries(tx, tenantId, rows))];
          // An endpoint whose sender is running is told to send another round; the others need a wake-up.
          const running = await store.markSendersWanted(tx, tenantId, given);
          await store.advanceFanoutCursor(tx, tenantId, events.at(-1)!.position);
          return { created: given.filter((id) => !running.has(id)), more: events.length === FANOUT_BATCH };
        });
        if (busy) {
          // Another fan-out of this workspace is running; it may have read the log before this wake-up's
          // commit, so look again shortly rather than not at all.
          await queues.enqueue('events.fanout', { tenant_id: tenantId }, { delayMs: FANOUT_BUSY_RETRY_MS });
          return { woken: total };
        }
        total += created.length;
        for (const id of created) await wake(tenantId, id);
        if (!more) return { woken: total };
      }
    },

    /**
     * Sends the endpoint's due deliveries, when this job can take the endpoint's sender lease (otherwise the
     * holder is told to send another round, and this job ends). Rounds of up to the endpoint's concurrency
     * at once, at most one per ticket per round, until none is due or the job's share of its slot is used.
     */
    async deliver(tenantId: string, endpointId: string): Promise<{ sent: number }> {
      const token = newId();
      const held = await store.acquireSender(db, tenantId, endpointId, token, leaseMs);
      if (!held?.acquired) return { sent: 0 };
      let sent = 0;
      for (;;) {
        if (sent >= SENDS_PER_JOB) {
          // Hand over to a fresh job at the queue's tail, so one busy endpoint cannot keep a slot forever.
          await store.releaseSender(db, tenantId, endpointId, token, true);
          await wake(tenantId, endpointId);
          return { sent };
        }
        const ep = await store.renewSender(db, tenantId, endpointId, token, leaseMs);
        if (!ep) return { sent };
        const round = await store.claimHeads(db, tenantId, endpointId, leaseMs, config.WEBHOOK_ENDPOINT_CONCURRENCY);
        if (round.length === 0) {
          if (await store.releaseSender(db, tenantId, endpointId, token)) return { sent };
          continue;
        }
        sent += round.length;
        const outcomes = await Promise.all(round.map((d) => (d.event ? post(ep, present(d.event) as Record<string, unknown> & { id: string }) : PRUNED)));
        await settle(tenantId, endpointId, round.map((d, i) => ({ d, r: outcomes[i]! })));
      }
    },

    /** The safety net: fan-out behind the log, and due deliveries nobody is sending. */
    async sweep(): Promise<{ fanouts: number; endpoints: number }> {
      const behind = await store.crossTenantFanoutBehind(db);
      for (const tenantId of behind) await queues.enqueue('events.fanout', { tenant_id: tenantId });
      const due = await store.crossTenantEndpointsDue(db);
      for (const d of due) await wake(d.tenant_id, d.endpoint_id);
      return { fanouts: behind.length, endpoints: due.length };
    },

    /**
     * Wakes fan-out when a workspace's events commit (the outbox trigger's NOTIFY, sent at commit only).
     * Notifications within a few milliseconds are folded into one job per workspace; a lost one (the
     * listening connection down, Redis refusing the job) is the sweep's to find.
     */
    listenForCommits(databaseUrl: string): Listener {
      const pending = new Set<string>();
      let timer: NodeJS.Timeout | undefined;
      const flush = () => {
        timer = undefined;
        const tenants = [...pending];
        pending.clear();
        for (const tenantId of tenants) {
          queues.enqueue('events.fanout', { tenant_id: tenantId }).catch((err: Error) => logger.warn({ err: err.message, tenant_id: tenantId }, 'fan-out wake-up not queued; the sweep will catch up'));
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
