/**
 * The outbound webhook round's pure halves (issue 35): the planner (what a round sends, parks and moves the
 * cursor over) and the settler (what the answers decide). No database, no network, no clock: the round's
 * reads, time, ids and random draws are given.
 */
import { CHAIN_MAX, planRound, roundSize, type ClaimedHead, type RoundPlan } from '../src/domains/webhook-endpoints/planner';
import { backoffMs, countedFailures, describe as describeError, PRUNED, settle, type Outcome, type Sent, type SettlerConfig } from '../src/domains/webhook-endpoints/settler';
import type { ScannedEvent } from '../src/domains/webhook-endpoints/store';

const HOUR = 3600 * 1000;
const NOW = Date.UTC(2025, 0, 1, 12);
const CONFIG: SettlerConfig = {
  OUTBOUND_WEBHOOK_RETRY_BASE_MS: 1000,
  OUTBOUND_WEBHOOK_RETRY_HOURS: 72,
  OUTBOUND_WEBHOOK_CIRCUIT_FAILURES: 5,
  OUTBOUND_WEBHOOK_CIRCUIT_OPEN_SECONDS: 30,
};
const HEALTHY = { id: 'ep', circuit_failures: 0, circuit_opens: 0 };

/** A log row past the cursor: of the endpoint's types unless told, on ticket `ticket`. */
const ev = (position: number, ticket: string, opts: { wanted?: boolean; blocked?: boolean } = {}): ScannedEvent => ({
  id: `e${position}`,
  type: 'ticket.updated',
  position: String(position),
  ordering_key: `ticket:${ticket}`,
  wanted: opts.wanted ?? true,
  blocked: opts.blocked ?? false,
});
const head = (id: string, attempts: number, windowStartedAt = NOW - HOUR): ClaimedHead => ({ id, event_id: `ev-${id}`, event_type: 'ticket.created', attempts, window_started_at: new Date(windowStartedAt) });
const ids = (chains: ScannedEvent[][]) => chains.map((c) => c.map((e) => e.id));

const DELIVERED: Outcome = { ok: true, status: 204, error: null, durationMs: 12 };
const HTTP_500: Outcome = { ok: false, status: 500, error: 'HTTP 500', durationMs: 30 };

/** Settles `sent` for `plan` with a half-way random draw and ids id-1, id-2, … in the order asked. */
function settleWith(plan: RoundPlan, sent: Sent, ep: { id: string; circuit_failures: number; circuit_opens: number } = HEALTHY) {
  let n = 0;
  return settle({ ep, plan, sent, now: NOW, config: CONFIG, random: () => 0.5, newId: () => `id-${++n}` });
}
const plan = (p: Partial<RoundPlan>): RoundPlan => ({ heads: [], chains: [], behind: [], from: '0', to: '0', ...p });

describe('the round planner', () => {
  test("sends one ticket's events one after another and other tickets' side by side", () => {
    const p = planRound({ cursor: '10', slots: 4, heads: [], scanned: [ev(11, 'a'), ev(12, 'b'), ev(13, 'a'), ev(14, 'c')] })!;
    expect(ids(p.chains)).toEqual([['e11', 'e13'], ['e12'], ['e14']]);
    expect(p.behind).toEqual([]);
    expect(p).toMatchObject({ from: '10', to: '14' });
  });

  test("parks an event behind its ticket's parked retry unsent, and the ticket's later events behind it", () => {
    const p = planRound({ cursor: '10', slots: 4, heads: [], scanned: [ev(11, 'a', { blocked: true }), ev(12, 'b'), ev(13, 'a')] })!;
    expect(p.behind.map((e) => e.id)).toEqual(['e11', 'e13']);
    expect(ids(p.chains)).toEqual([['e12']]);
    expect(p.to).toBe('13');
  });

  test('ends a ticket chain at CHAIN_MAX events and leaves the rest of the log, from there, to the next round', () => {
    const scanned = Array.from({ length: CHAIN_MAX + 3 }, (_, i) => ev(11 + i, 'a'));
    const p = planRound({ cursor: '10', slots: 4, heads: [], scanned: [...scanned, ev(99, 'b')] })!;
    expect(ids(p.chains)).toEqual([scanned.slice(0, CHAIN_MAX).map((e) => e.id)]);
    expect(p.to).toBe(String(10 + CHAIN_MAX));
  });

  test('takes no more tickets than the slots the claimed heads leave, and stops the cursor before the first left out', () => {
    const heads = [head('d1', 2)];
    const p = planRound({ cursor: '10', slots: 2, heads, scanned: [ev(11, 'a'), ev(12, 'a'), ev(13, 'b'), ev(14, 'a')] })!;
    expect(p.heads).toBe(heads);
    expect(ids(p.chains)).toEqual([['e11', 'e12']]);
    expect(p.to).toBe('12');
  });

  test('moves the cursor over events of types the endpoint does not take, sending nothing', () => {
    const p = planRound({ cursor: '10', slots: 4, heads: [], scanned: [ev(11, 'a', { wanted: false }), ev(12, 'b', { wanted: false })] })!;
    expect(p).toEqual({ heads: [], chains: [], behind: [], from: '10', to: '12' });
  });

  test('has nothing to do with no head due and nothing past the cursor; sends the heads alone when they take every slot', () => {
    expect(planRound({ cursor: '10', slots: 4, heads: [], scanned: [] })).toBeNull();
    // Every slot taken by heads: the log waits, the cursor stays, the heads still go.
    expect(planRound({ cursor: '10', slots: 1, heads: [head('d1', 2)], scanned: [ev(11, 'a')] })).toMatchObject({ chains: [], to: '10' });
    expect(planRound({ cursor: '10', slots: 1, heads: [], scanned: [ev(11, 'a')] })).toMatchObject({ chains: [[ev(11, 'a')]], to: '11' });
  });

  test('probes an endpoint whose circuit was open with one event, and reads the log in proportion to its slots', () => {
    expect(roundSize({ circuit_opens: 0 }, 8)).toEqual({ slots: 8, scanRows: 32 });
    expect(roundSize({ circuit_opens: 2 }, 8)).toEqual({ slots: 1, scanRows: 4 });
  });
});

describe('the round settler', () => {
  test('settles a delivered head and records delivered fresh events without parking them', () => {
    const p = plan({ heads: [head('d1', 3)], chains: [[ev(11, 'a')]] });
    const v = settleWith(p, { heads: [DELIVERED], chains: [[{ e: ev(11, 'a'), r: DELIVERED }]] });
    expect(v.rows.settlements).toEqual([{ id: 'd1', attempt: 3, status: 'delivered', nextAttemptAt: null }]);
    expect(v.rows.parked).toEqual([]);
    expect(v.rows.attempts).toEqual([
      { id: 'id-1', endpoint_id: 'ep', delivery_id: 'd1', event_id: 'ev-d1', event_type: 'ticket.created', attempt: 3, outcome: 'delivered', status_code: 204, duration_ms: 12, error: null, next_retry_at: null, fresh: false },
      { id: 'id-3', endpoint_id: 'ep', delivery_id: 'id-2', event_id: 'e11', event_type: 'ticket.updated', attempt: 1, outcome: 'delivered', status_code: 204, duration_ms: 12, error: null, next_retry_at: null, fresh: true },
    ]);
    expect(v).toMatchObject({ retryAt: null, circuit: null, failures: { heads: new Set(), fresh: 0 } });
  });

  test("parks a fresh event's failed first try with its backoff retry time, and the rest of its chain behind it unsent", () => {
    const p = plan({ chains: [[ev(11, 'a'), ev(12, 'a')]] });
    const v = settleWith(p, { heads: [], chains: [[{ e: ev(11, 'a'), r: HTTP_500 }, { e: ev(12, 'a'), r: null }]] });
    // Full jitter: half of the first ceiling (the base) with a half-way draw.
    const retry = new Date(NOW + 500);
    expect(v.rows.parked).toEqual([
      { id: 'id-1', event_id: 'e11', event_type: 'ticket.updated', position: '11', ordering_key: 'ticket:a', status: 'pending', attempts: 1, nextAttemptAt: retry },
      { id: 'id-3', event_id: 'e12', event_type: 'ticket.updated', position: '12', ordering_key: 'ticket:a', status: 'pending', attempts: 0, nextAttemptAt: null },
    ]);
    expect(v.rows.attempts).toMatchObject([{ delivery_id: 'id-1', outcome: 'retrying', next_retry_at: retry, error: 'HTTP 500', fresh: true }]);
    expect(v.retryAt).toBe(retry.getTime());
  });

  test("parks the plan's events behind a parked retry unsent, with no attempt", () => {
    const v = settleWith(plan({ behind: [ev(11, 'a', { blocked: true })] }), { heads: [], chains: [] });
    expect(v.rows.parked).toEqual([{ id: 'id-1', event_id: 'e11', event_type: 'ticket.updated', position: '11', ordering_key: 'ticket:a', status: 'pending', attempts: 0, nextAttemptAt: null }]);
    expect(v.rows.attempts).toEqual([]);
    expect(v.circuit).toBeNull();
  });

  test('retries a head within its retry window, at the earliest retry of the round', () => {
    const p = plan({ heads: [head('d1', 1), head('d2', 3)] });
    const v = settleWith(p, { heads: [HTTP_500, HTTP_500], chains: [] });
    // Ceilings 1 s and 4 s, half-way draws.
    expect(v.rows.settlements).toEqual([
      { id: 'd1', attempt: 1, status: 'pending', nextAttemptAt: new Date(NOW + 500) },
      { id: 'd2', attempt: 3, status: 'pending', nextAttemptAt: new Date(NOW + 2000) },
    ]);
    expect(v.retryAt).toBe(NOW + 500);
    expect(v.failures.heads.size).toBe(0);
  });

  test('fails a delivery after the retry window and counts it toward disabling once settled', () => {
    const windowStart = NOW - CONFIG.OUTBOUND_WEBHOOK_RETRY_HOURS * HOUR;
    const p = plan({ heads: [head('d1', 9, windowStart), head('d2', 9, windowStart)] });
    const v = settleWith(p, { heads: [HTTP_500, HTTP_500], chains: [] });
    expect(v.rows.settlements.map((s) => s.status)).toEqual(['failed', 'failed']);
    expect(v.rows.attempts.map((a) => [a.outcome, a.next_retry_at])).toEqual([['failed', null], ['failed', null]]);
    expect(v.retryAt).toBeNull();
    expect(v.failures.heads).toEqual(new Set(['d1', 'd2']));
    // Only what the settling statement settled counts: a head whose lease was lost meanwhile does not.
    expect(countedFailures(v, { advanced: true, settled: new Set(['d1', 'd2']) })).toBe(2);
    expect(countedFailures(v, { advanced: true, settled: new Set(['d2']) })).toBe(1);
  });

  test("counts a fresh event's failure for good only when the round moved the cursor (otherwise it is sent again)", () => {
    const zeroWindow = { ...CONFIG, OUTBOUND_WEBHOOK_RETRY_HOURS: 0 };
    let n = 0;
    const v = settle({ ep: HEALTHY, plan: plan({ chains: [[ev(11, 'a')]] }), sent: { heads: [], chains: [[{ e: ev(11, 'a'), r: HTTP_500 }]] }, now: NOW, config: zeroWindow, random: () => 0.5, newId: () => `id-${++n}` });
    expect(v.rows.parked).toMatchObject([{ status: 'failed', attempts: 1, nextAttemptAt: null }]);
    expect(v.failures.fresh).toBe(1);
    expect(countedFailures(v, { advanced: true, settled: new Set() })).toBe(1);
    expect(countedFailures(v, { advanced: false, settled: new Set() })).toBe(0);
  });

  test('fails an event pruned from the log without a retry, without counting it toward disabling, and without tripping the breaker', () => {
    const v = settleWith(plan({ heads: [head('d1', 2)] }), { heads: [PRUNED], chains: [] });
    expect(v.rows.settlements).toEqual([{ id: 'd1', attempt: 2, status: 'failed', nextAttemptAt: null }]);
    expect(v.rows.attempts).toMatchObject([{ outcome: 'failed', error: 'the event is no longer in the log' }]);
    expect(v.failures.heads.size).toBe(0);
    expect(v.circuit).toBeNull();
  });

  test("hands the round's failed attempts to the circuit breaker with the N in a row that open it and its capped wait", () => {
    const p = plan({ heads: [head('d1', 2)], chains: [[ev(11, 'a')]] });
    const v = settleWith(p, { heads: [HTTP_500], chains: [[{ e: ev(11, 'a'), r: { ok: false, status: null, error: 'connection refused', durationMs: 3 } }]] });
    expect(v.circuit).toEqual({ delivered: false, failed: 2, threshold: 5, openMs: 30_000, maxOpenMs: 16 * 30_000 });
  });

  test('closes the circuit on a delivered probe; a healthy round writes nothing to the breaker', () => {
    const p = plan({ chains: [[ev(11, 'a')]] });
    const sent = { heads: [], chains: [[{ e: ev(11, 'a'), r: DELIVERED }]] };
    expect(settleWith(p, sent).circuit).toBeNull();
    expect(settleWith(p, sent, { id: 'ep', circuit_failures: 0, circuit_opens: 1 }).circuit).toMatchObject({ delivered: true, failed: 0 });
    expect(settleWith(p, sent, { id: 'ep', circuit_failures: 3, circuit_opens: 0 }).circuit).toMatchObject({ delivered: true, failed: 0 });
  });

  test('backs off with full jitter below a ceiling that doubles per try, at most six hours', () => {
    expect(backoffMs(1, 1000, () => 0.999)).toBe(999);
    expect(backoffMs(4, 1000, () => 0.5)).toBe(4000);
    expect(backoffMs(60, 1000, () => 0.5)).toBe(3 * HOUR);
    expect(backoffMs(3, 1000, () => 0)).toBe(0);
  });

  test('describes a failure without the address it was sent to', () => {
    expect(describeError(Object.assign(new Error('x'), { name: 'TimeoutError' }), 1000)).toBe('no answer within 1000 ms');
    expect(describeError({ code: 'EADDRNOTALLOWED' }, 1000)).toMatch(/^refused by policy/);
    expect(describeError({ cause: { code: 'ECONNREFUSED' }, message: 'connect ECONNREFUSED 10.0.0.7:443' }, 1000)).toBe('connection refused');
    expect(describeError({ code: 'ENOTFOUND' }, 1000)).toBe('host not found');
    expect(describeError({ code: 'X'.repeat(400) }, 1000)).toHaveLength(300);
    expect(describeError(new Error('https://user:token@hook.example/x'), 1000)).toBe('network error');
  });
});
