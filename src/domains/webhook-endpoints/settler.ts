import type { ConfigSection } from '../../config';
import type { WebhookEndpointRow } from '../../db/types';
import type { RoundPlan } from './planner';
import type { AttemptInsert, Parked, Round, ScannedEvent, Settlement } from './store';

/**
 * What a sender round's answers decide (issue 35): pure, no I/O (the clock, the ids and the random draws come
 * in). delivery.ts sends what planner.ts planned, hands the answers here, and writes the verdict in its one
 * settling statement.
 */

/** The longest backoff ceiling between two tries. */
const MAX_BACKOFF_MS = 6 * 3600 * 1000;
const MAX_ERROR_CHARS = 300;
/** An endpoint's circuit stays open at most this many times its first wait (30 s → 8 minutes). */
const MAX_OPEN_FACTOR = 16;

/** One POST's result (or an event that could not be sent). */
export interface Outcome {
  ok: boolean;
  status: number | null;
  error: string | null;
  durationMs: number;
  /** False when the failure is not the receiver's (it does not stop a chain, retry or trip the breaker). */
  countsAsFailure?: boolean;
}

/** Pruned by the log's retention before it could be delivered: nothing left to send, and not the receiver's fault. */
export const PRUNED: Outcome = { ok: false, status: null, error: 'the event is no longer in the log', durationMs: 0, countsAsFailure: false };

/** A failure the receiver answered for: the rest of its chain is not sent (it is parked behind it). */
export const failedByReceiver = (r: Outcome) => !r.ok && r.countsAsFailure !== false;

/** What a round sent: one outcome per head, and per chain each event's outcome (null: not sent, behind a failure). */
export interface Sent {
  heads: Outcome[];
  chains: { e: ScannedEvent; r: Outcome | null }[][];
}

export type SettlerConfig = Pick<
  ConfigSection<'outboundWebhooks'>,
  'OUTBOUND_WEBHOOK_RETRY_BASE_MS' | 'OUTBOUND_WEBHOOK_RETRY_HOURS' | 'OUTBOUND_WEBHOOK_CIRCUIT_FAILURES' | 'OUTBOUND_WEBHOOK_CIRCUIT_OPEN_SECONDS'
>;

/** A round's verdict: the settling statement's rows, and what to do after it. */
export interface RoundSettlement {
  /** The settling statement's rows (store.settleRound, with the token and the cursor range). */
  rows: Pick<Round, 'settlements' | 'parked' | 'attempts'>;
  /** Deliveries failed for good, which count toward disabling the endpoint once settled: heads by id, fresh events by number. */
  failures: { heads: Set<string>; fresh: number };
  /** The earliest retry of the round (epoch ms), when the sender is woken again; null when none. */
  retryAt: number | null;
  /** What the circuit breaker records (store.recordCircuit); null when the round changes nothing there. */
  circuit: { delivered: boolean; failed: number; threshold: number; openMs: number; maxOpenMs: number } | null;
}

/**
 * Exponential backoff with full jitter (a uniform draw below a ceiling that doubles per try): retries of
 * many deliveries that failed together spread out instead of arriving at a recovering receiver at once.
 */
export function backoffMs(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, baseMs * 2 ** Math.min(attempt - 1, 40));
  return Math.floor(random() * ceiling);
}

/** What went wrong, without the URL (it may carry the receiver's own token) and bounded in size. */
export function describe(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; code?: string; cause?: { code?: string } };
  if (e?.name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
  const code = e?.code ?? e?.cause?.code;
  // Nothing about the address, a port or a connection: the deliveries list must not map this host's network.
  if (code === 'EADDRNOTALLOWED') return 'refused by policy: the endpoint resolves to an address this deployment does not deliver to';
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ECONNRESET') return 'connection reset';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code) return `network error ${code}`.slice(0, MAX_ERROR_CHARS);
  return 'network error';
}

/**
 * Judges a round's answers: the parked deliveries settle (delivered, retried with backoff, or failed after the
 * retry window, counted toward disabling the endpoint), the round's first-try failures are parked with their
 * retry time, events behind a failure or a parked delivery are parked unsent, and every attempt is recorded.
 */
export function settle(round: {
  ep: Pick<WebhookEndpointRow, 'id' | 'circuit_failures' | 'circuit_opens'>;
  plan: RoundPlan;
  sent: Sent;
  now: number;
  config: SettlerConfig;
  random: () => number;
  newId: () => string;
}): RoundSettlement {
  const { ep, plan, sent, now, config, random, newId } = round;
  const settlements: Settlement[] = [];
  const parked: Parked[] = [];
  const attempts: (AttemptInsert & { fresh: boolean })[] = [];
  const failures = { heads: new Set<string>(), fresh: 0 };
  const retries: number[] = [];
  const attempt = (x: { deliveryId: string; eventId: string; type: string; attempt: number; r: Outcome; outcome: AttemptInsert['outcome']; nextAt: Date | null; fresh: boolean }) =>
    attempts.push({
      id: newId(),
      endpoint_id: ep.id,
      delivery_id: x.deliveryId,
      event_id: x.eventId,
      event_type: x.type,
      attempt: x.attempt,
      outcome: x.outcome,
      status_code: x.r.status,
      duration_ms: x.r.durationMs,
      error: x.r.error,
      next_retry_at: x.nextAt,
      fresh: x.fresh,
    });
  /** When a failed attempt is tried again: a backoff time within the retry window, or null (failed for good). */
  const retryAt = (attemptNo: number, windowStartedAt: number): Date | null => {
    const at = now + backoffMs(attemptNo, config.OUTBOUND_WEBHOOK_RETRY_BASE_MS, random);
    return at <= windowStartedAt + config.OUTBOUND_WEBHOOK_RETRY_HOURS * 3600 * 1000 ? new Date(at) : null;
  };
  /** What an answer decides: delivered, tried again at a time within the retry window, or failed for good. */
  const judge = (r: Outcome, attemptNo: number, windowStartedAt: number) => {
    const counts = r.countsAsFailure ?? true;
    const nextAt = !r.ok && counts ? retryAt(attemptNo, windowStartedAt) : null;
    const outcome: AttemptInsert['outcome'] = r.ok ? 'delivered' : nextAt ? 'retrying' : 'failed';
    if (nextAt) retries.push(nextAt.getTime());
    return { nextAt, outcome, failedForGood: outcome === 'failed' && counts };
  };
  /** A log event becomes a delivery row: after its failed first try, or behind its ticket's parked event. */
  const parkEvent = (e: ScannedEvent, id: string, at: Pick<Parked, 'status' | 'attempts' | 'nextAttemptAt'>) =>
    parked.push({ id, event_id: e.id, event_type: e.type, position: e.position, ordering_key: e.ordering_key, ...at });
  const WAITING = { status: 'pending', attempts: 0, nextAttemptAt: null } as const;

  plan.heads.forEach((d, i) => {
    const r = sent.heads[i]!;
    const { nextAt, outcome, failedForGood } = judge(r, d.attempts, d.window_started_at.getTime());
    if (failedForGood) failures.heads.add(d.id);
    settlements.push({ id: d.id, attempt: d.attempts, status: outcome === 'retrying' ? 'pending' : outcome, nextAttemptAt: nextAt });
    attempt({ deliveryId: d.id, eventId: d.event_id, type: d.event_type, attempt: d.attempts, r, outcome, nextAt, fresh: false });
  });
  for (const { e, r } of sent.chains.flat()) {
    const deliveryId = newId();
    // Behind a failure in its own chain: parked, sent after the one before it is delivered.
    if (!r) {
      parkEvent(e, deliveryId, WAITING);
      continue;
    }
    const { nextAt, outcome, failedForGood } = judge(r, 1, now);
    if (failedForGood) failures.fresh += 1;
    if (!r.ok) parkEvent(e, deliveryId, { status: nextAt ? 'pending' : 'failed', attempts: 1, nextAttemptAt: nextAt });
    attempt({ deliveryId, eventId: e.id, type: e.type, attempt: 1, r, outcome, nextAt, fresh: true });
  }
  for (const e of plan.behind) parkEvent(e, newId(), WAITING);

  return { rows: { settlements, parked, attempts }, failures, retryAt: retries.length > 0 ? Math.min(...retries) : null, circuit: circuitOf(ep, attempts, config) };
}

/**
 * The endpoint's circuit breaker after a round: OUTBOUND_WEBHOOK_CIRCUIT_FAILURES failed attempts in a row open it for
 * OUTBOUND_WEBHOOK_CIRCUIT_OPEN_SECONDS, doubling each time it opens again before a delivery (at most 16 times that). A receiver that hangs costs its workspace one slot per probe, not a slot
 * per event for every retry, and nobody else anything. A healthy endpoint's round writes nothing here.
 */
function circuitOf(ep: Pick<WebhookEndpointRow, 'circuit_failures' | 'circuit_opens'>, attempts: { outcome: AttemptInsert['outcome']; error: string | null }[], config: SettlerConfig): RoundSettlement['circuit'] {
  const delivered = attempts.some((a) => a.outcome === 'delivered');
  // An event pruned before it was sent is not the receiver's failure.
  const failed = attempts.filter((a) => a.outcome !== 'delivered' && a.error !== PRUNED.error).length;
  if (failed === 0 && !(delivered && (ep.circuit_failures > 0 || ep.circuit_opens > 0))) return null;
  const openMs = config.OUTBOUND_WEBHOOK_CIRCUIT_OPEN_SECONDS * 1000;
  return { delivered, failed, threshold: config.OUTBOUND_WEBHOOK_CIRCUIT_FAILURES, openMs, maxOpenMs: openMs * MAX_OPEN_FACTOR };
}

/**
 * How many failed-for-good deliveries the settling statement made count: heads it settled (a lost lease
 * settles nothing), and the round's fresh events when the cursor moved (otherwise they go out again).
 */
export function countedFailures(s: RoundSettlement, settled: { advanced: boolean; settled: Set<string> }): number {
  return [...s.failures.heads].filter((id) => settled.settled.has(id)).length + (settled.advanced ? s.failures.fresh : 0);
}
