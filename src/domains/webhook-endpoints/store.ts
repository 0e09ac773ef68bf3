import { sql } from 'kysely';
import type { Executor } from '../../db';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { EventDeliveryRow, WebhookEndpointRow } from '../../db/types';
import type { Cursor } from '../../lib/paging';

// ---------------------------------------------------------------------------------------------- endpoints

export interface EndpointInsert {
  id: string;
  url: string;
  description: string;
  event_types: string[];
  enabled: boolean;
  secret_sealed: string;
}

/** The endpoint starts after every event committed so far: it receives what happens from now on. */
export async function insertEndpoint(db: Executor, tenantId: string, e: EndpointInsert): Promise<WebhookEndpointRow> {
  return db
    .insertInto('webhook_endpoints')
    .values({
      ...e,
      tenant_id: tenantId,
      disabled_reason: e.enabled ? null : 'admin',
      starts_after: sql<string>`(SELECT coalesce(max(position), 0) FROM events WHERE tenant_id = ${tenantId})`,
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

// ------------------------------------------------------------------------------------------------ fan-out

/**
 * With the workspace's first endpoint the cursor starts at the log's end, so fan-out never walks history
 * no endpoint can receive (each endpoint's `starts_after` holds the same bound).
 */
export async function startFanoutCursor(db: Executor, tenantId: string): Promise<void> {
  await db
    .insertInto('event_fanout_cursors')
    .values({ tenant_id: tenantId, position: sql<string>`(SELECT coalesce(max(position), 0) FROM events WHERE tenant_id = ${tenantId})` })
    .onConflict((oc) => oc.column('tenant_id').doNothing())
    .execute();
}

/**
 * The workspace's fan-out cursor, locked for this transaction (from the log's start when it has none yet);
 * undefined when another fan-out of the workspace holds it (it is not waited for: a waiting job would hold
 * a pooled connection doing nothing).
 */
export async function lockFanoutCursor(db: Executor, tenantId: string): Promise<string | undefined> {
  await db.insertInto('event_fanout_cursors').values({ tenant_id: tenantId, position: '0' }).onConflict((oc) => oc.column('tenant_id').doNothing()).execute();
  const row = await db.selectFrom('event_fanout_cursors').select('position').where('tenant_id', '=', tenantId).forUpdate().skipLocked().executeTakeFirst();
  return row ? String(row.position) : undefined;
}

export async function advanceFanoutCursor(db: Executor, tenantId: string, position: string): Promise<void> {
  await db
    .updateTable('event_fanout_cursors')
    .set({ position: sql<string>`greatest(position, ${position}::bigint)` })
    .where('tenant_id', '=', tenantId)
    .execute();
}

/** The log's last committed position (where fan-out skips to when no endpoint is enabled). */
export async function lastPosition(db: Executor, tenantId: string): Promise<string> {
  const r = await db.selectFrom('events').select(sql<string>`coalesce(max(position), 0)::text`.as('p')).where('tenant_id', '=', tenantId).executeTakeFirstOrThrow();
  return r.p;
}

/** Committed events past the cursor, in commit order. */
export async function eventsAfter(db: Executor, tenantId: string, position: string, limit: number) {
  return db
    .selectFrom('events')
    .select(['id', 'type', 'ticket_id', sql<string>`position::text`.as('position')])
    .where('tenant_id', '=', tenantId)
    .where('position', '>', sql<string>`${position}::bigint`)
    .orderBy('position')
    .limit(limit)
    .execute();
}

/** The enabled endpoints events are fanned out to. */
export async function enabledEndpoints(db: Executor, tenantId: string) {
  return db.selectFrom('webhook_endpoints').select(['id', 'event_types', 'starts_after']).where('tenant_id', '=', tenantId).where('enabled', '=', true).execute();
}

export interface DeliveryInsert {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  position: string;
  ordering_key: string;
}

/** New deliveries; one that exists already (a repeated fan-out) is left as it is. Returns each new row's endpoint. */
export async function insertDeliveries(db: Executor, tenantId: string, rows: DeliveryInsert[]): Promise<string[]> {
  if (rows.length === 0) return [];
  const inserted = await db
    .insertInto('event_deliveries')
    .values(rows.map((r) => ({ ...r, tenant_id: tenantId })))
    .onConflict((oc) => oc.columns(['tenant_id', 'endpoint_id', 'event_id']).doNothing())
    .returning('endpoint_id')
    .execute();
  return inserted.map((r) => r.endpoint_id);
}

/**
 * Replay: the endpoint's events of its types that committed since `since` are (re)queued. A delivered or
 * failed delivery goes back to pending with a fresh retry window (same row, same event id); one still
 * pending is left alone.
 */
export async function requeueSince(db: Executor, tenantId: string, endpointId: string, since: Date, eventTypes: string[]): Promise<number> {
  const r = await sql<{ n: number }>`
    WITH upserted AS (
      INSERT INTO event_deliveries (tenant_id, id, endpoint_id, event_id, event_type, position, ordering_key)
      SELECT e.tenant_id, gen_random_uuid(), ${endpointId}::uuid, e.id, e.type, e.position,
             CASE WHEN e.ticket_id IS NULL THEN 'event:' || e.id::text ELSE 'ticket:' || e.ticket_id::text END
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

// ------------------------------------------------------------------------------------------------ sending

// ------------------------------------------------------------------------------------------------ senders

/**
 * Takes the endpoint's sender lease when it is free (or ran out: its holder died), or else marks the
 * endpoint wanted so the holder sends another round before letting go. Returns the endpoint row and
 * whether this caller is now its sender; undefined when the endpoint is gone or disabled.
 */
export async function acquireSender(db: Executor, tenantId: string, endpointId: string, token: string, leaseMs: number): Promise<(WebhookEndpointRow & { acquired: boolean }) | undefined> {
  const r = await sql<WebhookEndpointRow & { acquired: boolean }>`
    UPDATE webhook_endpoints SET
      sender_wanted = NOT (sender_until IS NULL OR sender_until < now()),
      sender_token = CASE WHEN sender_until IS NULL OR sender_until < now() THEN ${token}::uuid ELSE sender_token END,
      sender_until = CASE WHEN sender_until IS NULL OR sender_until < now() THEN now() + ${leaseMs} * interval '1 millisecond' ELSE sender_until END
    WHERE tenant_id = ${tenantId} AND id = ${endpointId} AND enabled
    RETURNING *, sender_token = ${token}::uuid AS acquired`.execute(db);
  return r.rows[0];
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

/** Endpoints given new deliveries whose sender is running: marked wanted (no wake-up needed); returns their ids. */
export async function markSendersWanted(db: Executor, tenantId: string, endpointIds: string[]): Promise<Set<string>> {
  if (endpointIds.length === 0) return new Set();
  const r = await db
    .updateTable('webhook_endpoints')
    .set({ sender_wanted: true })
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', endpointIds)
    .where('sender_until', '>', sql<Date>`now()`)
    .returning('id')
    .execute();
  return new Set(r.map((x) => x.id));
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

export interface AttemptInsert {
  id: string;
  endpoint_id: string;
  delivery_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  outcome: 'delivered' | 'retrying' | 'failed';
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  next_retry_at: Date | null;
}

export interface Settlement {
  id: string;
  /** The attempt number the lease was taken with: only its holder settles. */
  attempt: number;
  status: 'delivered' | 'failed' | 'pending';
  /** For `pending`: when the next try is due. */
  nextAttemptAt: Date | null;
}

/**
 * Settles a round of leased deliveries and records their attempts, in one statement: delivered, failed, or
 * pending again at `nextAttemptAt`. Only the holder of an attempt's lease settles it and records it (a stale
 * worker whose lease was handed over changes nothing, and neither does one whose endpoint was deleted). A
 * delivered event ends the endpoint's run of failures. Returns the ids settled.
 */
export async function settleRound(db: Executor, tenantId: string, endpointId: string, rows: (Settlement & { attemptRow: AttemptInsert })[]): Promise<Set<string>> {
  if (rows.length === 0) return new Set();
  const col = <K extends keyof AttemptInsert>(k: K) => rows.map((x) => x.attemptRow[k]);
  const anyDelivered = rows.some((x) => x.status === 'delivered');
  const r = await sql<{ id: string }>`
    WITH settled AS (
      UPDATE event_deliveries d
      SET status = v.status, lease_until = NULL, updated_at = now(), next_attempt_at = coalesce(v.next_attempt_at, d.next_attempt_at)
      FROM unnest(${rows.map((x) => x.id)}::uuid[], ${rows.map((x) => x.attempt)}::int[], ${rows.map((x) => x.status)}::text[], ${rows.map((x) => x.nextAttemptAt?.toISOString() ?? null)}::timestamptz[])
        AS v(id, attempt, status, next_attempt_at)
      WHERE d.tenant_id = ${tenantId} AND d.id = v.id AND d.attempts = v.attempt AND d.status = 'pending'
      RETURNING d.id
    ), recorded AS (
      INSERT INTO event_delivery_attempts (tenant_id, id, endpoint_id, delivery_id, event_id, event_type, attempt, outcome, status_code, duration_ms, error, next_retry_at)
      SELECT ${tenantId}, a.id, ${endpointId}::uuid, a.delivery_id, a.event_id, a.event_type, a.attempt, a.outcome, a.status_code, a.duration_ms, a.error, a.next_retry_at
      FROM unnest(${col('id')}::uuid[], ${col('delivery_id')}::uuid[], ${col('event_id')}::uuid[], ${col('event_type')}::text[], ${col('attempt')}::int[],
                  ${col('outcome')}::text[], ${col('status_code')}::int[], ${col('duration_ms')}::int[], ${col('error')}::text[],
                  ${col('next_retry_at').map((d) => d?.toISOString() ?? null)}::timestamptz[])
        AS a(id, delivery_id, event_id, event_type, attempt, outcome, status_code, duration_ms, error, next_retry_at)
      WHERE a.delivery_id IN (SELECT id FROM settled)
    ), reset AS (
      UPDATE webhook_endpoints SET consecutive_failures = 0
      WHERE ${anyDelivered} AND tenant_id = ${tenantId} AND id = ${endpointId} AND consecutive_failures > 0
        AND EXISTS (SELECT 1 FROM settled)
    )
    SELECT id FROM settled`.execute(db);
  return new Set(r.rows.map((x) => x.id));
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

/** Workspaces whose log has moved past their fan-out cursor and that have an enabled endpoint. */
export async function crossTenantFanoutBehind(db: Executor): Promise<string[]> {
  const r = await sql<{ tenant_id: string }>`
    SELECT DISTINCT w.tenant_id FROM webhook_endpoints w
    WHERE w.enabled AND EXISTS (
      SELECT 1 FROM events e
      WHERE e.tenant_id = w.tenant_id AND e.position > coalesce((SELECT c.position FROM event_fanout_cursors c WHERE c.tenant_id = w.tenant_id), 0)
    )`.execute(db);
  return r.rows.map((x) => x.tenant_id);
}

/** Enabled endpoints with a delivery that is due and not in flight (a lost wake-up, an expired lease). */
export async function crossTenantEndpointsDue(db: Executor): Promise<{ tenant_id: string; endpoint_id: string }[]> {
  const r = await sql<{ tenant_id: string; endpoint_id: string }>`
    SELECT DISTINCT d.tenant_id, d.endpoint_id FROM event_deliveries d
    JOIN webhook_endpoints w ON w.tenant_id = d.tenant_id AND w.id = d.endpoint_id AND w.enabled
    WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())
    LIMIT 10000`.execute(db);
  return r.rows;
}
