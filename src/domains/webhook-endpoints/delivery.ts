import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { listen, type Listener } from '../../db/notifications';
import type { EventDeliveryRow, WebhookEndpointRow } from '../../db/types';
import { newId } from '../../lib/ids';
import type { QueueHub } from '../../queue/hub';
import type { AuditService } from '../audit/service';
import { createEndpointSecrets } from './service';
import { signedHeaders } from './signing';
import { postJson, type AddressPolicy } from './transport';
import * as store from './store';

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

  /** Records the attempt and settles the delivery; a failed event counts toward disabling the endpoint. */
  async function settle(d: EventDeliveryRow, r: { ok: boolean; status: number | null; error: string | null; durationMs: number }, countsAsFailure = true) {
    const tenantId = d.tenant_id;
    let nextAt: Date | null = null;
    if (!r.ok) {
      const at = Date.now() + backoffMs(d.attempts, config.WEBHOOK_RETRY_BASE_MS);
      const deadline = d.window_started_at.getTime() + config.WEBHOOK_RETRY_HOURS * 3600 * 1000;
      if (countsAsFailure && at <= deadline) nextAt = new Date(at);
    }
    const outcome = r.ok ? 'delivered' : nextAt ? 'retrying' : 'failed';
    await db.transaction().execute(async (tx) => {
      const settled = await store.settleDelivery(tx, tenantId, d.id, d.attempts, outcome === 'retrying' ? { status: 'pending', nextAttemptAt: nextAt! } : { status: outcome });
      // Deleted endpoint, or the lease was handed over after it expired: the newer holder records its own.
      if (!settled) return;
      await store.insertAttempt(tx, tenantId, {
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
      });
      if (outcome === 'delivered') await store.resetFailures(tx, tenantId, d.endpoint_id);
      if (outcome === 'failed' && countsAsFailure) {
        const now = await store.countFailure(tx, tenantId, d.endpoint_id);
        if (now?.enabled && now.consecutive_failures >= config.WEBHOOK_DISABLE_AFTER_FAILURES) {
          await store.updateEndpoint(tx, tenantId, d.endpoint_id, { enabled: false, disabled_reason: 'failures' });
          await audit.recordBySystem(tx, tenantId, 'endpoint.disabled', { type: 'webhook_endpoint', id: d.endpoint_id }, { reason: 'failures', consecutive_failures: now.consecutive_failures });
          logger.warn({ tenant_id: tenantId, endpoint_id: d.endpoint_id, consecutive_failures: now.consecutive_failures }, 'webhook endpoint disabled after consecutive failed events');
        }
      }
    });
    if (nextAt) await wake(tenantId, d.endpoint_id, nextAt.getTime());
  }

  /** Leases the endpoint's next due head, within its concurrency; undefined when there is none to take. */
  async function claim(tenantId: string, endpointId: string) {
    return db.transaction().execute(async (tx) => {
      // The endpoint row lock makes the in-flight count and the lease one step for concurrent jobs.
      const ep = await store.getEndpoint(tx, tenantId, endpointId, { lock: true });
      if (!ep || !ep.enabled) return undefined;
      if ((await store.inFlight(tx, tenantId, endpointId)) >= config.WEBHOOK_ENDPOINT_CONCURRENCY) return undefined;
      const d = await store.claimHead(tx, tenantId, endpointId, leaseMs);
      return d ? { ep, d } : undefined;
    });
  }

  return {
    /** Fans the workspace's new events out to its endpoints; wakes a sender per endpoint given work. */
    async fanout(tenantId: string): Promise<{ deliveries: number }> {
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
          const created = await store.insertDeliveries(tx, tenantId, rows);
          await store.advanceFanoutCursor(tx, tenantId, events.at(-1)!.position);
          return { created, more: events.length === FANOUT_BATCH };
        });
        if (busy) {
          // Another fan-out of this workspace is running; it may have read the log before this wake-up's
          // commit, so look again shortly rather than not at all.
          await queues.enqueue('events.fanout', { tenant_id: tenantId }, { delayMs: FANOUT_BUSY_RETRY_MS });
          return { deliveries: total };
        }
        total += created.length;
        // As many senders as the endpoint may run at once (no more than it got new deliveries).
        const perEndpoint = new Map<string, number>();
        for (const id of created) perEndpoint.set(id, (perEndpoint.get(id) ?? 0) + 1);
        for (const [id, n] of perEndpoint) for (let i = 0; i < Math.min(n, config.WEBHOOK_ENDPOINT_CONCURRENCY); i++) await wake(tenantId, id);
        if (!more) return { deliveries: total };
      }
    },

    /** Sends the endpoint's due deliveries until none is left to take (or its share of the slot is used). */
    async deliver(tenantId: string, endpointId: string): Promise<{ sent: number }> {
      let sent = 0;
      while (sent < SENDS_PER_JOB) {
        const claimed = await claim(tenantId, endpointId);
        if (!claimed) return { sent };
        const { ep, d } = claimed;
        sent += 1;
        const event = await store.eventById(db, tenantId, d.event_id);
        if (!event) {
          // Pruned by the log's retention before it could be delivered: nothing left to send, and not the receiver's fault.
          await settle(d, { ok: false, status: null, error: 'the event is no longer in the log', durationMs: 0 }, false);
          continue;
        }
        await settle(d, await post(ep, present(event) as Record<string, unknown> & { id: string }));
      }
      await wake(tenantId, endpointId);
      return { sent };
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
