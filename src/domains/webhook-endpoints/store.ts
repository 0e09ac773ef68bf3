import { sql } from 'kysely';
import type { Executor } from '../../db';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { EventDeliveryAttemptsTable, EventDeliveryRow, WebhookEndpointRow } from '../../db/types';
import type { Cursor } from '../../lib/paging';

// ---------------------------------------------------------------------------------------------- endpoints

/** The log's last committed position (an endpoint's cursor starts there: it gets what commits from now on). */
const LOG_END = (tenantId: string) => sql<string>`(SELECT coalesce(max(position), 0) FROM events WHERE tenant_id = ${tenantId})`;

export interface EndpointInsert {
  id: string;
  url: string;
  description: string;
  event_types: string[];
  enabled: boolean;
  secret_sealed: string;
}

/** The endpoint's cursor starts after every event committed so far: it receives what happens from now on. */
export async function insertEndpoint(db: Executor, tenantId: string, e: EndpointInsert): Promise<WebhookEndpointRow> {
  return db
    .insertInto('webhook_endpoints')
    .values({
      ...e,
      tenant_id: tenantId,
      disabled_reason: e.enabled ? null : 'admin',
      sent_through: LOG_END(tenantId),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listEndpoints(db: Executor, tenantId: string): Promise<WebhookEndpointRow[]> {
  return db.selectFrom('webhook_endpoints').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
}

export async function getEndpoint(db: Executor, tenantId: string, id: string, opts: { lock?: boolean } = {}): Promise<WebhookEndpointRow | undefined> {
  let q = db.selectFrom('webhook_endpoints').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id);
  if (opts.lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export interface EndpointPatch {
  url?: string;
  description?: string;
  event_types?: string[];
  enabled?: boolean;
  disabled_reason?: 'admin' | 'failures' | null;
  consecutive_failures?: number;
  secret_sealed?: string;
  previous_secret_sealed?: string | null;
  previous_secret_expires_at?: Date | null;
}

export async function updateEndpoint(db: Executor, tenantId: string, id: string, patch: EndpointPatch): Promise<WebhookEndpointRow | undefined> {
  return db
    .updateTable('webhook_endpoints')
    .set({ ...patch, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteEndpoint(db: Executor, tenantId: string, id: string): Promise<boolean> {
  const r = await db.deleteFrom('webhook_endpoints').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** The workspace's endpoints (the cap, OUTBOUND_WEBHOOK_ENDPOINTS_PER_WORKSPACE, counts them under the workspace lock). */
export async function countEndpoints(db: Executor, tenantId: string): Promise<number> {
  const r = await db.selectFrom('webhook_endpoints').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', tenantId).executeTakeFirstOrThrow();
  return Number(r.n);
}

/** Failed events: `n` more in a row; returns the endpoint as it now stands. */
export async function countFailures(db: Executor, tenantId: string, id: string, n: number): Promise<WebhookEndpointRow | undefined> {
  return db
    .updateTable('webhook_endpoints')
    .set({ consecutive_failures: sql`consecutive_failures + ${n}::int` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** A delivered event ends a run of failures (written only when there was one, to spare the row). */
export async function resetFailures(db: Executor, tenantId: string, id: string): Promise<void> {
  await db.updateTable('webhook_endpoints').set({ consecutive_failures: 0 }).where('tenant_id', '=', tenantId).where('id', '=', id).where('consecutive_failures', '>', 0).execute();
}

// ------------------------------------------------------------------------------------------------ cursor

/** A delivery's ordering key: one ticket's events go out in order, one at a time; other events wait for nothing. */
const ORDERING_KEY = sql<string>`CASE WHEN e.ticket_id IS NULL THEN 'event:' || e.id::text ELSE 'ticket:' || e.ticket_id::text END`;

export interface ScannedEvent {
  id: string;
  type: string;
  position: string;
  ordering_key: string;
  /** Of one of the endpoint's types. */
  wanted: boolean;
  /** Its key has a parked (pending) delivery for the endpoint: it must queue behind it. */
  blocked: boolean;
}

/**
 * The log past the endpoint's cursor, in commit order (`limit` rows, whatever their type, so the cursor can
 * move past events the endpoint does not take). Positions are assigned at commit under the workspace's log
 * lock, so no event can later appear behind a position read here.
 */
export async function scanAfter(db: Executor, tenantId: string, endpointId: string, cursor: string, eventTypes: string[], limit: number): Promise<ScannedEvent[]> {
  const r = await sql<{ id: string; type: string; position: string; ordering_key: string; blocked: boolean | null }>`
    SELECT e.id, e.type, e.position::text AS position, ${ORDERING_KEY} AS ordering_key,
      CASE WHEN e.type = ANY(${eventTypes}::text[]) THEN EXISTS (
        SELECT 1 FROM event_deliveries o
        WHERE o.tenant_id = e.tenant_id AND o.endpoint_id = ${endpointId} AND o.ordering_key = ${ORDERING_KEY} AND o.status = 'pending'
      ) END AS blocked
    FROM events e
    WHERE e.tenant_id = ${tenantId} AND e.position > ${cursor}::bigint
    ORDER BY e.position
    LIMIT ${limit}`.execute(db);
  return r.rows.map((x) => ({ ...x, wanted: x.blocked !== null, blocked: x.blocked === true }));
}

export interface LoggedEvent {
  id: string;
  type: string;
  occurred_at: Date;
  tenant_id: string;
  data: unknown;
}

/** The events to send, as stored in the log. */
export async function eventsByIds(db: Executor, tenantId: string, ids: string[]): Promise<LoggedEvent[]> {
  if (ids.length === 0) return [];
  return db.selectFrom('events').select(['id', 'type', 'occurred_at', 'tenant_id', 'data']).where('tenant_id', '=', tenantId).where('id', 'in', ids).execute();
}

/**
 * Disabling: what the endpoint has not been sent yet (past its cursor, of its types) is parked as pending
 * deliveries, and the cursor moves to the log's end; events committed while it is disabled are never
 * queued for it, and what was parked goes out once it is enabled again.
 */
export async function parkBacklog(db: Executor, tenantId: string, endpointId: string): Promise<number> {
  const r = await sql<{ n: number }>`
    WITH ep AS (
      SELECT sent_through, event_types FROM webhook_endpoints WHERE tenant_id = ${tenantId} AND id = ${endpointId}
    ), parked AS (
      INSERT INTO event_deliveries (tenant_id, id, endpoint_id, event_id, event_type, position, ordering_key)
      SELECT e.tenant_id, gen_random_uuid(), ${endpointId}::uuid, e.id, e.type, e.position, ${ORDERING_KEY}
      FROM events e, ep
      WHERE e.tenant_id = ${tenantId} AND e.position > ep.sent_through AND e.type = ANY(ep.event_types)
      ON CONFLICT (tenant_id, endpoint_id, event_id) DO NOTHING
      RETURNING 1
    ), moved AS (
      UPDATE webhook_endpoints SET sent_through = ${LOG_END(tenantId)} WHERE tenant_id = ${tenantId} AND id = ${endpointId}
    )
    SELECT count(*)::int AS n FROM parked`.execute(db);
  return r.rows[0]?.n ?? 0;
}

/** Enabling: the cursor skips what committed while the endpoint was disabled. */
export async function skipToLogEnd(db: Executor, tenantId: string, endpointId: string): Promise<void> {
  await db.updateTable('webhook_endpoints').set({ sent_through: LOG_END(tenantId) }).where('tenant_id', '=', tenantId).where('id', '=', endpointId).execute();
}

/**
 * Replay: the endpoint's events of its types that committed since `since` are (re)queued. A delivered or
 * failed delivery goes back to pending with a fresh retry window (same row, same event id); one still
 * pending is left alone. An event past the cursor queued here is sent once: the cursor finds its key parked.
 */
export async function requeueSince(db: Executor, tenantId: string, endpointId: string, since: Date, eventTypes: string[]): Promise<number> {
  const r = await sql<{ n: number }>`
    WITH upserted AS (
      INSERT INTO event_deliveries (tenant_id, id, endpoint_id, event_id, event_type, position, ordering_key)
      SELECT e.tenant_id, gen_random_uuid(), ${endpointId}::uuid, e.id, e.type, e.position, ${ORDERING_KEY}
      FROM events e
      WHERE e.tenant_id = ${tenantId} AND e.position IS NOT NULL AND e.occurred_at >= ${since}
        AND e.type = ANY(${eventTypes}::text[])
      ON CONFLICT (tenant_id, endpoint_id, event_id) DO UPDATE
        SET status = 'pending', next_attempt_at = now(), window_started_at = now(), updated_at = now()
        WHERE event_deliveries.status <> 'pending'
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM upserted`.execute(db);
  return r.rows[0]?.n ?? 0;
}

// ------------------------------------------------------------------------------------------------ senders

/**
 * Takes the endpoint's sender lease when it is free (or ran out: its holder died), or else marks the
 * endpoint wanted so the holder sends another round before letting go. Returns whether this caller is now
 * its sender (never when the endpoint is gone or disabled).
 */
/**
 * Serialises the sender leases of one workspace for the rest of the transaction: counting them and taking
 * one must not interleave with another worker doing the same (READ COMMITTED would let both see room). Tried,
 * never waited for: a hundred wake-ups of one workspace queued on its lock held a hundred of the worker's
 * connections, and every other workspace's sends waited for one. False when another worker holds it now.
 */
export async function trySenderLock(db: Executor, tenantId: string): Promise<boolean> {
  const r = await sql<{ locked: boolean }>`SELECT pg_try_advisory_xact_lock(hashtextextended('webhook-senders|' || ${tenantId}::text, 0)) AS locked`.execute(db);
  return r.rows[0]?.locked === true;
}

/**
 * The endpoint waits for one of its workspace's sender slots (another worker was deciding the slots just now):
 * the hand-over of the next sender to let go wakes it, or the sweep when a slot is free. Its lease must be free.
 */
export async function markWaiting(db: Executor, tenantId: string, endpointId: string): Promise<void> {
  await sql`
    UPDATE webhook_endpoints SET slot_wanted_at = coalesce(slot_wanted_at, now())
    WHERE tenant_id = ${tenantId} AND id = ${endpointId} AND enabled AND (sender_until IS NULL OR sender_until < now())`.execute(db);
}

/**
 * Takes the endpoint's sender lease when it is free and its workspace has fewer than `slots` live leases:
 * 'acquired'. A lease held by another sender tells it to send another round before letting go: 'held'. A free
 * lease in a workspace whose slots are all busy marks the endpoint waiting (since when, for the hand-over):
 * 'waiting'. Disabled or gone: 'off'. Run under trySenderLock.
 */
export async function acquireSender(db: Executor, tenantId: string, endpointId: string, token: string, leaseMs: number, slots: number): Promise<'acquired' | 'held' | 'waiting' | 'off'> {
  const r = await sql<{ acquired: boolean; waiting: boolean }>`
    WITH busy AS (
      SELECT count(*)::int AS n FROM webhook_endpoints
      WHERE tenant_id = ${tenantId} AND id <> ${endpointId} AND sender_until >= now()
    ), e AS (
      SELECT w.id, (w.sender_until IS NULL OR w.sender_until < now()) AS free, busy.n < ${slots} AS room
      FROM webhook_endpoints w, busy
      WHERE w.tenant_id = ${tenantId} AND w.id = ${endpointId} AND w.enabled
    )
    UPDATE webhook_endpoints w SET
      sender_wanted = NOT e.free,
      sender_token = CASE WHEN e.free AND e.room THEN ${token}::uuid ELSE w.sender_token END,
      sender_until = CASE WHEN e.free AND e.room THEN now() + ${leaseMs} * interval '1 millisecond' ELSE w.sender_until END,
      slot_wanted_at = CASE WHEN e.free AND e.room THEN NULL WHEN e.free THEN coalesce(w.slot_wanted_at, now()) ELSE w.slot_wanted_at END
    FROM e
    WHERE w.tenant_id = ${tenantId} AND w.id = e.id
    RETURNING w.sender_token = ${token}::uuid AS acquired, w.slot_wanted_at IS NOT NULL AS waiting`.execute(db);
  const row = r.rows[0];
  return !row ? 'off' : row.acquired ? 'acquired' : row.waiting ? 'waiting' : 'held';
}

/**
 * A sender let go: the endpoint of the workspace that has waited longest for a slot (and can send: enabled, no
 * lease, circuit not open) stops waiting, to be woken by the caller. Undefined when none waits.
 */
export async function handOverSlot(db: Executor, tenantId: string): Promise<string | undefined> {
  const r = await sql<{ id: string }>`
    UPDATE webhook_endpoints SET slot_wanted_at = NULL
    WHERE tenant_id = ${tenantId} AND id = (
      SELECT id FROM webhook_endpoints
      WHERE tenant_id = ${tenantId} AND slot_wanted_at IS NOT NULL AND enabled
        AND (sender_until IS NULL OR sender_until < now()) AND (circuit_open_until IS NULL OR circuit_open_until <= now())
      ORDER BY slot_wanted_at
      LIMIT 1
      FOR UPDATE SKIP LOCKED
    )
    RETURNING id`.execute(db);
  return r.rows[0]?.id;
}

/**
 * A round's outcome for the endpoint's circuit breaker: a delivery closes it; `failed` attempts in a row (with
 * earlier ones) reaching `threshold`, or any failure of the probe sent after it was open, open it for
 * `openMs` × 2^(times opened since the last delivery), at most `maxOpenMs`, ±25 % at random (endpoints that
 * failed together are not all probed, and woken, at the same moment). Returns until when it is open now (null
 * when closed).
 */
export async function recordCircuit(
  db: Executor,
  tenantId: string,
  endpointId: string,
  round: { delivered: boolean; failed: number; threshold: number; openMs: number; maxOpenMs: number },
): Promise<Date | null> {
  const opening = sql`(NOT ${round.delivered} AND (circuit_opens > 0 OR circuit_failures + ${round.failed}::int >= ${round.threshold}::int))`;
  const r = await sql<{ circuit_open_until: Date | null }>`
    UPDATE webhook_endpoints SET
      circuit_open_until = CASE WHEN ${round.delivered} THEN NULL
        WHEN ${opening} THEN now() + least(${round.openMs}::float8 * power(2, least(circuit_opens, 30)), ${round.maxOpenMs}::float8) * (0.75 + random() * 0.5) * interval '1 millisecond'
        ELSE circuit_open_until END,
      circuit_opens = CASE WHEN ${round.delivered} THEN 0 WHEN ${opening} THEN circuit_opens + 1 ELSE circuit_opens END,
      circuit_failures = CASE WHEN ${round.delivered} OR ${opening} THEN 0 ELSE circuit_failures + ${round.failed}::int END
    WHERE tenant_id = ${tenantId} AND id = ${endpointId}
    RETURNING circuit_open_until`.execute(db);
  return r.rows[0]?.circuit_open_until ?? null;
}

/**
 * The sender's lease, extended for one more round, with the endpoint as it stands now (a new URL or secret
 * applies from the next round). Clears `sender_wanted`: the round's claim sees whatever the wake-up was for.
 * Undefined when the lease was lost or the endpoint disabled or deleted.
 */
export async function renewSender(db: Executor, tenantId: string, endpointId: string, token: string, leaseMs: number): Promise<WebhookEndpointRow | undefined> {
  const r = await sql<WebhookEndpointRow>`
    UPDATE webhook_endpoints SET sender_until = now() + ${leaseMs} * interval '1 millisecond', sender_wanted = false
    WHERE tenant_id = ${tenantId} AND id = ${endpointId} AND sender_token = ${token}::uuid AND enabled
    RETURNING *`.execute(db);
  return r.rows[0];
}

/**
 * Extends the lease while a round is in flight (a chain of slow answers can outlast one lease), without
 * touching `sender_wanted`: a wake-up that arrives meanwhile still asks for another round. False when lost.
 */
export async function extendSender(db: Executor, tenantId: string, endpointId: string, token: string, leaseMs: number): Promise<boolean> {
  const r = await sql<{ id: string }>`
    UPDATE webhook_endpoints SET sender_until = now() + ${leaseMs} * interval '1 millisecond'
    WHERE tenant_id = ${tenantId} AND id = ${endpointId} AND sender_token = ${token}::uuid AND enabled
    RETURNING id`.execute(db);
  return r.rows.length > 0;
}

/**
 * Lets the lease go, unless a wake-up arrived since the last round (`force` lets go regardless, for a
 * hand-over to a fresh job). Returns false when the caller still holds the lease and must send again.
 */
export async function releaseSender(db: Executor, tenantId: string, endpointId: string, token: string, force = false): Promise<boolean> {
  const r = await db
    .updateTable('webhook_endpoints')
    .set({ sender_token: null, sender_until: null })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', endpointId)
    .where('sender_token', '=', token)
    .$if(!force, (q) => q.where('sender_wanted', '=', false))
    .returning('id')
    .executeTakeFirst();
  if (r) return true;
  // Not released: either a wake-up is waiting for this holder, or the lease is no longer this caller's.
  const still = await db.selectFrom('webhook_endpoints').select('id').where('tenant_id', '=', tenantId).where('id', '=', endpointId).where('sender_token', '=', token).executeTakeFirst();
  return !still;
}

/**
 * New events committed in the workspace: each enabled endpoint whose sender is running is told to send
 * another round (written only when not told already, so a busy log does not rewrite the row per commit);
 * returns the enabled endpoints with no sender, which need a wake-up.
 */
export async function wantSenders(db: Executor, tenantId: string): Promise<string[]> {
  // Endpoints waiting for a slot are woken by the hand-over, and open circuits when they reopen: not by commits.
  const r = await sql<{ id: string }>`
    WITH marked AS (
      UPDATE webhook_endpoints SET sender_wanted = true
      WHERE tenant_id = ${tenantId} AND enabled AND sender_until >= now() AND NOT sender_wanted
    )
    SELECT id FROM webhook_endpoints
    WHERE tenant_id = ${tenantId} AND enabled AND (sender_until IS NULL OR sender_until < now())
      AND slot_wanted_at IS NULL AND (circuit_open_until IS NULL OR circuit_open_until <= now())`.execute(db);
  return r.rows.map((x) => x.id);
}

/** A leased delivery with the event it carries (`event` is null when the log's retention pruned it first). */
export type ClaimedDelivery = EventDeliveryRow & {
  event: { id: string; type: string; occurred_at: Date; tenant_id: string; data: unknown } | null;
};

/**
 * Leases up to the endpoint's free slots (`concurrency` less the deliveries in flight) of due deliveries,
 * oldest first, each the head of its ordering key (no older pending delivery of the same ticket, which may
 * be waiting for a retry or in flight), so one batch never holds two of one ticket's events. Returns them
 * with their attempt numbers and their events, in position order, in one statement. Only the endpoint's
 * sender claims (acquireSender), so the free-slot count cannot race another claimer; leases left by a dead
 * sender still count until they run out.
 */
export async function claimHeads(db: Executor, tenantId: string, endpointId: string, leaseMs: number, concurrency: number): Promise<ClaimedDelivery[]> {
  const r = await sql<EventDeliveryRow & { e_id: string | null; e_type: string; e_occurred_at: Date; e_data: unknown }>`
    WITH claimed AS (
      UPDATE event_deliveries SET lease_until = now() + ${leaseMs} * interval '1 millisecond', attempts = attempts + 1, updated_at = now()
      WHERE tenant_id = ${tenantId} AND id IN (
        SELECT d.id FROM event_deliveries d
        WHERE d.tenant_id = ${tenantId} AND d.endpoint_id = ${endpointId} AND d.status = 'pending'
          AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())
          -- The head of its key: one index probe per candidate (as a scalar subquery the planner cannot turn
          -- it into an anti-join that walks the endpoint's whole backlog per row, which it did on fresh stats).
          AND d.position = (
            SELECT o.position FROM event_deliveries o
            WHERE o.tenant_id = d.tenant_id AND o.endpoint_id = d.endpoint_id AND o.ordering_key = d.ordering_key AND o.status = 'pending'
            ORDER BY o.position LIMIT 1
          )
        ORDER BY d.position
        LIMIT greatest(0, ${concurrency}::int - (
          SELECT count(*) FROM event_deliveries f
          WHERE f.tenant_id = ${tenantId} AND f.endpoint_id = ${endpointId} AND f.status = 'pending' AND f.lease_until > now()
        ))
        FOR UPDATE SKIP LOCKED
      )
      RETURNING *
    )
    SELECT c.*, e.id AS e_id, e.type AS e_type, e.occurred_at AS e_occurred_at, e.data AS e_data
    FROM claimed c LEFT JOIN events e ON e.tenant_id = c.tenant_id AND e.id = c.event_id
    ORDER BY c.position`.execute(db);
  return r.rows.map(({ e_id, e_type, e_occurred_at, e_data, ...d }) => ({
    ...d,
    event: e_id === null ? null : { id: e_id, type: e_type, occurred_at: e_occurred_at, tenant_id: tenantId, data: e_data },
  }));
}

/** An attempt row as the sender writes it (the workspace, sequence and time are the store's). */
export type AttemptInsert = Omit<EventDeliveryAttemptsTable, 'tenant_id' | 'seq' | 'created_at'>;

/** A parked delivery's attempt settled: delivered, failed, or pending again at `nextAttemptAt`. */
export interface Settlement {
  id: string;
  /** The attempt number the lease was taken with: only its holder settles. */
  attempt: number;
  status: 'delivered' | 'failed' | 'pending';
  nextAttemptAt: Date | null;
}

/** An event past the cursor that becomes a delivery row: it failed its first try, or its key was parked. */
export interface Parked {
  id: string;
  event_id: string;
  event_type: string;
  position: string;
  ordering_key: string;
  status: 'pending' | 'failed';
  attempts: number;
  nextAttemptAt: Date | null;
}

export interface Round {
  token: string;
  /** The cursor the round started from, and where it ends. */
  from: string;
  to: string;
  settlements: Settlement[];
  parked: Parked[];
  /** Every attempt made; `fresh` ones are of events past the cursor, recorded only if the cursor moves. */
  attempts: (AttemptInsert & { fresh: boolean })[];
}

/**
 * Settles a sender's round in one statement. The cursor moves from `from` to `to` only while this sender
 * holds the lease and nobody moved it meanwhile (disabling parks the backlog and moves it); the round's
 * events past the cursor are parked and recorded only if it moved, so a sender that lost its lease changes
 * nothing and its events go out again under the same ids. Parked deliveries settle under their own leases.
 * A delivered event ends the endpoint's run of failures. Returns whether the cursor moved and the parked
 * deliveries settled.
 */
export async function settleRound(db: Executor, tenantId: string, endpointId: string, round: Round): Promise<{ advanced: boolean; settled: Set<string> }> {
  const s = round.settlements;
  const p = round.parked;
  const a = round.attempts;
  const col = <K extends keyof (AttemptInsert & { fresh: boolean })>(k: K) => a.map((x) => x[k]);
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  const anyDelivered = a.some((x) => x.outcome === 'delivered');
  const r = await sql<{ advanced: boolean; settled: string[] }>`
    WITH adv AS (
      UPDATE webhook_endpoints SET sent_through = ${round.to}::bigint
      WHERE tenant_id = ${tenantId} AND id = ${endpointId} AND sender_token = ${round.token}::uuid AND sent_through = ${round.from}::bigint
      RETURNING id
    ), settled AS (
      UPDATE event_deliveries d
      SET status = v.status, lease_until = NULL, updated_at = now(), next_attempt_at = coalesce(v.next_attempt_at, d.next_attempt_at)
      FROM unnest(${s.map((x) => x.id)}::uuid[], ${s.map((x) => x.attempt)}::int[], ${s.map((x) => x.status)}::text[], ${s.map((x) => iso(x.nextAttemptAt))}::timestamptz[])
        AS v(id, attempt, status, next_attempt_at)
      WHERE d.tenant_id = ${tenantId} AND d.id = v.id AND d.attempts = v.attempt AND d.status = 'pending'
      RETURNING d.id
    ), parked AS (
      INSERT INTO event_deliveries (tenant_id, id, endpoint_id, event_id, event_type, position, ordering_key, status, attempts, next_attempt_at)
      SELECT ${tenantId}, x.id, ${endpointId}::uuid, x.event_id, x.event_type, x.position, x.ordering_key, x.status, x.attempts, coalesce(x.next_attempt_at, now())
      FROM unnest(${p.map((x) => x.id)}::uuid[], ${p.map((x) => x.event_id)}::uuid[], ${p.map((x) => x.event_type)}::text[], ${p.map((x) => x.position)}::bigint[],
                  ${p.map((x) => x.ordering_key)}::text[], ${p.map((x) => x.status)}::text[], ${p.map((x) => x.attempts)}::int[], ${p.map((x) => iso(x.nextAttemptAt))}::timestamptz[])
        AS x(id, event_id, event_type, position, ordering_key, status, attempts, next_attempt_at)
      WHERE EXISTS (SELECT 1 FROM adv)
      ON CONFLICT (tenant_id, endpoint_id, event_id) DO NOTHING
    ), recorded AS (
      INSERT INTO event_delivery_attempts (tenant_id, id, endpoint_id, delivery_id, event_id, event_type, attempt, outcome, status_code, duration_ms, error, next_retry_at)
      SELECT ${tenantId}, t.id, ${endpointId}::uuid, t.delivery_id, t.event_id, t.event_type, t.attempt, t.outcome, t.status_code, t.duration_ms, t.error, t.next_retry_at
      FROM unnest(${col('id')}::uuid[], ${col('delivery_id')}::uuid[], ${col('event_id')}::uuid[], ${col('event_type')}::text[], ${col('attempt')}::int[],
                  ${col('outcome')}::text[], ${col('status_code')}::int[], ${col('duration_ms')}::int[], ${col('error')}::text[],
                  ${col('next_retry_at').map(iso)}::timestamptz[], ${col('fresh')}::boolean[])
        AS t(id, delivery_id, event_id, event_type, attempt, outcome, status_code, duration_ms, error, next_retry_at, fresh)
      WHERE CASE WHEN t.fresh THEN EXISTS (SELECT 1 FROM adv) ELSE t.delivery_id IN (SELECT id FROM settled) END
    ), reset AS (
      UPDATE webhook_endpoints SET consecutive_failures = 0
      WHERE ${anyDelivered} AND tenant_id = ${tenantId} AND id = ${endpointId} AND consecutive_failures > 0
        AND (EXISTS (SELECT 1 FROM adv) OR EXISTS (SELECT 1 FROM settled))
    )
    SELECT EXISTS (SELECT 1 FROM adv) AS advanced, ARRAY(SELECT id::text FROM settled) AS settled`.execute(db);
  const row = r.rows[0]!;
  return { advanced: row.advanced, settled: new Set(row.settled) };
}

const ATTEMPT_PAGES: Keyset = { key: 'seq', kind: 'sequence', direction: 'desc' };

/** An endpoint's attempts, newest first, one keyset page read with one extra row. */
export async function listAttempts(db: Executor, tenantId: string, endpointId: string, page: { limit: number; after?: Cursor }) {
  let q = db
    .selectFrom('event_delivery_attempts')
    .selectAll()
    .select(pageKey(ATTEMPT_PAGES).as('page_key'))
    .where('tenant_id', '=', tenantId)
    .where('endpoint_id', '=', endpointId);
  if (page.after) q = q.where(pastCursor(ATTEMPT_PAGES, page.after));
  return q.orderBy('seq', 'desc').limit(page.limit + 1).execute();
}

// ------------------------------------------------------------------------------------------------ sweep

/**
 * Enabled endpoints with work and no live sender: the log past their cursor, or a parked delivery that is due
 * and not in flight (a lost wake-up, a dead worker's lease run out).
 */
export async function crossTenantEndpointsDue(db: Executor, slots: number): Promise<{ tenant_id: string; endpoint_id: string }[]> {
  // An endpoint waiting for a sender slot is woken here only while its workspace has one free (a lost hand-over).
  const r = await sql<{ tenant_id: string; endpoint_id: string }>`
    SELECT w.tenant_id, w.id AS endpoint_id FROM webhook_endpoints w
    WHERE w.enabled AND (w.sender_until IS NULL OR w.sender_until < now()) AND (w.circuit_open_until IS NULL OR w.circuit_open_until <= now())
      AND (w.slot_wanted_at IS NULL OR (SELECT count(*) FROM webhook_endpoints x WHERE x.tenant_id = w.tenant_id AND x.sender_until >= now()) < ${slots})
      AND (
      EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = w.tenant_id AND e.position > w.sent_through)
      OR EXISTS (
        SELECT 1 FROM event_deliveries d
        WHERE d.tenant_id = w.tenant_id AND d.endpoint_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until < now())
      )
    )
    LIMIT 10000`.execute(db);
  return r.rows;
}
