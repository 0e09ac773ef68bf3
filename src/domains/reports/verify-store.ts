import { sql } from 'kysely';
import type { Executor } from '../../db';
import { BUCKET_BOUNDS_LITERAL } from './buckets';
import { bucket, COUNTERS, daysOf, entryFacts, eventFacts, HISTOGRAMS, longStatements, minutesBetween, ticketFacts } from './store';

/*
 * The reports recomputed from raw rows (reports:verify, the tests, the bench's baseline). Two forms:
 *
 * - `differences`: every day and filter key, from scratch. The per-ticket facts are derived from tickets, their
 *   events and time entries alone (never from report_tickets, except the business minutes of tickets on a
 *   scheduled policy: those are measurements recorded with the fact, see service.ts), folded with the same day
 *   and key SQL as the fold, and compared column by column with report_days plus the journal. This checks what the
 *   write path does incrementally (state diffs, dimension moves, journal, fold) against a computation that has
 *   none of it.
 * - `raw*`: each report as a plain SQL aggregation over raw rows, with percentile_disc over the same minute
 *   buckets (buckets.ts): what a report costs without precomputation, and an independent answer to compare with.
 */

const LIVE = `('open', 'pending', 'on_hold')`;

/** Per ticket, from raw rows: its dimensions now, first reply, resolution, counts, SLA outcomes (the state's columns). */
const rawState = (tenantId: string) => sql`
  SELECT t.id AS ticket_id, t.team_id, t.assignee_id AS agent_id, t.source AS channel, t.priority::text AS priority, t.created_at,
         ev.first_reply_at, coalesce(ev.replies, 0)::int AS replies, coalesce(ev.reopens, 0)::int AS reopens, r.resolved_at,
         t.first_responded_at AS sla_first_at, t.first_responded_at <= t.first_response_due AS sla_first_met,
         CASE WHEN r.resolved_at IS NOT NULL THEN CASE WHEN t.resolution_paused_at IS NOT NULL THEN coalesce(t.resolution_remaining_minutes, 0) > 0 ELSE r.resolved_at <= t.resolution_due END END AS sla_res_met,
         m.frt_minutes, m.res_minutes,
         CASE WHEN p.schedule_id IS NULL THEN m.frt_minutes ELSE rt.frt_business END AS frt_business,
         CASE WHEN p.schedule_id IS NULL THEN m.res_minutes ELSE rt.res_business END AS res_business
  FROM tickets t
  LEFT JOIN sla_policies p ON p.tenant_id = t.tenant_id AND p.id = t.sla_policy_id
  LEFT JOIN report_tickets rt ON rt.tenant_id = t.tenant_id AND rt.ticket_id = t.id
  LEFT JOIN (
    SELECT ticket_id, min(created_at) FILTER (WHERE kind = 'reply') AS first_reply_at,
           count(*) FILTER (WHERE kind = 'reply') AS replies, count(*) FILTER (WHERE kind = 'reopen') AS reopens
    FROM ticket_events WHERE tenant_id = ${tenantId} AND kind IN ('reply', 'reopen') AND NOT meta ? 'via_merge' GROUP BY 1
  ) ev ON ev.ticket_id = t.id
  CROSS JOIN LATERAL (SELECT CASE WHEN t.status IN ('solved', 'closed') THEN t.solved_at END AS resolved_at) r
  CROSS JOIN LATERAL (SELECT ${sql.raw(minutesBetween('t.created_at', 'ev.first_reply_at'))} AS frt_minutes, ${sql.raw(minutesBetween('t.created_at', 'r.resolved_at'))} AS res_minutes) m
  WHERE t.tenant_id = ${tenantId}`;

export interface Difference {
  grain: string;
  period: string;
  team: string;
  agent: string;
  channel: string;
  priority: string;
  column: string;
  stored: string | null;
  expected: string | null;
}

const ALL_COLUMNS = [...COUNTERS.map(([c]) => c), ...HISTOGRAMS.map(([c]) => c)];

/**
 * Stored (report_days plus the journal, folded the fold's way) against expected (raw facts, folded the same way),
 * per day or month, filter key and column; the cells that differ. One snapshot (REPEATABLE READ by the caller).
 */
export async function differences(db: Executor, tenantId: string, limit = 1000): Promise<Difference[]> {
  const zone = sql`coalesce((SELECT zone FROM report_zones WHERE tenant_id = ${tenantId}), 'UTC')`;
  const expectedFacts = sql`
    ${ticketFacts(sql`(${rawState(tenantId)}) s`, 1)}
    UNION ALL ${eventFacts(sql`ticket_events e JOIN tickets s0 ON s0.tenant_id = e.tenant_id AND s0.id = e.ticket_id CROSS JOIN LATERAL (SELECT s0.team_id, s0.assignee_id AS agent_id, s0.source AS channel, s0.priority::text AS priority) s`, sql`e.tenant_id = ${tenantId}`, 1)}
    UNION ALL ${entryFacts(sql`time_entries te JOIN tickets s0 ON s0.tenant_id = te.tenant_id AND s0.id = te.ticket_id CROSS JOIN LATERAL (SELECT s0.team_id, s0.source AS channel, s0.priority::text AS priority) s`, sql`te.tenant_id = ${tenantId}`, 1)}`;
  // A tool's read of every fact: an hour, not PG_STATEMENT_TIMEOUT_MS (the caller's transaction is its own).
  await longStatements(db);
  const cols = ALL_COLUMNS.join(', ');
  const zoneName = (await sql<{ zone: string }>`SELECT ${zone} AS zone`.execute(db)).rows[0]!.zone;
  const { rows } = await sql<Difference>`
    WITH expected AS (
      WITH ${daysOf(expectedFacts, zoneName)}
      SELECT team, agent, channel, priority, grain, period, ${sql.raw(cols)} FROM out_rows
    ),
    journal AS (
      WITH ${daysOf(sql`SELECT 1 AS sign, ${sql.raw('at, metric, team_id, agent_id, channel, priority, bucket, n, v')} FROM report_journal WHERE tenant_id = ${tenantId}`, zoneName)}
      SELECT team, agent, channel, priority, grain, period, ${sql.raw(cols)} FROM out_rows
    ),
    stored AS (
      SELECT team, agent, channel, priority, grain, period,
             ${sql.raw(COUNTERS.map(([c]) => `sum(${c}) AS ${c}`).join(', '))},
             ${sql.raw(HISTOGRAMS.map(([c]) => `report_hist_sum(${c}) AS ${c}`).join(', '))}
      FROM (
        SELECT team, agent, channel, priority, grain::text, period, ${sql.raw(cols)} FROM report_days WHERE tenant_id = ${tenantId}
        UNION ALL SELECT * FROM journal
      ) u GROUP BY 1, 2, 3, 4, 5, 6
    ),
    cells AS (
      SELECT coalesce(s.grain, e.grain) AS grain, coalesce(s.period, e.period)::text AS period, coalesce(s.team, e.team) AS team,
             coalesce(s.agent, e.agent) AS agent, coalesce(s.channel, e.channel) AS channel, coalesce(s.priority, e.priority) AS priority,
             c.col AS "column", c.stored, c.expected
      FROM stored s FULL JOIN expected e
        ON s.team = e.team AND s.agent = e.agent AND s.channel = e.channel AND s.priority = e.priority AND s.grain = e.grain AND s.period = e.period
      CROSS JOIN LATERAL (VALUES ${sql.raw(
        [
          ...COUNTERS.map(([c]) => `('${c}', coalesce(s.${c}, 0)::text, coalesce(e.${c}, 0)::text)`),
          ...HISTOGRAMS.map(([c]) => `('${c}', s.${c}::text, e.${c}::text)`),
        ].join(', '),
      )}) AS c(col, stored, expected)
    )
    SELECT * FROM cells WHERE stored IS DISTINCT FROM expected ORDER BY period, team, agent, channel, priority, "column" LIMIT ${limit}`.execute(db);
  return rows;
}

/** Tickets on a scheduled policy whose recorded business minutes differ from a measurement on today's schedule (the caller measures). */
export async function recordedBusiness(db: Executor, tenantId: string, afterId: string | null, limit: number) {
  const { rows } = await sql<{ ticket_id: string; schedule_id: string; created_at: Date; first_reply_at: Date | null; resolved_at: Date | null; frt_business: number | null; res_business: number | null }>`
    SELECT s.ticket_id, p.schedule_id, s.created_at, s.first_reply_at, s.resolved_at, s.frt_business, s.res_business
    FROM report_tickets s JOIN tickets t ON t.tenant_id = s.tenant_id AND t.id = s.ticket_id
    JOIN sla_policies p ON p.tenant_id = t.tenant_id AND p.id = t.sla_policy_id
    WHERE s.tenant_id = ${tenantId} AND p.schedule_id IS NOT NULL AND (${afterId}::uuid IS NULL OR s.ticket_id > ${afterId}::uuid)
    ORDER BY s.ticket_id LIMIT ${limit}`.execute(db);
  return rows;
}

// ---- each report as a plain aggregation over raw rows ----

export interface RawFilters {
  from: string;
  to: string;
  team_id?: string | undefined;
  agent_id?: string | undefined;
  channel?: string | undefined;
  priority?: string | undefined;
}

const b = (m: string) => `(width_bucket(${m}, '${BUCKET_BOUNDS_LITERAL}'::int[]) - 1)`;

/** The workspace's tickets passing the filters on their current team, channel and priority (the agent is the report's). */
const tickets = (tenantId: string, f: RawFilters) => sql`
  SELECT t.*, p.schedule_id FROM tickets t LEFT JOIN sla_policies p ON p.tenant_id = t.tenant_id AND p.id = t.sla_policy_id
  WHERE t.tenant_id = ${tenantId} AND (${f.team_id ?? null}::uuid IS NULL OR t.team_id = ${f.team_id ?? null}::uuid)
    AND (${f.channel ?? null}::text IS NULL OR t.source = ${f.channel ?? null}::text) AND (${f.priority ?? null}::text IS NULL OR t.priority::text = ${f.priority ?? null}::text)`;
const zoneOf = (tenantId: string) => sql`SELECT coalesce((SELECT zone FROM report_zones WHERE tenant_id = ${tenantId}), 'UTC') AS zone`;
const assignee = (f: RawFilters) => sql`(${f.agent_id ?? null}::uuid IS NULL OR tk.assignee_id = ${f.agent_id ?? null}::uuid)`;
const inRange = (f: RawFilters) => sql`day BETWEEN ${f.from}::date AND ${f.to}::date`;

export interface RawTimeRow {
  day: string | null;
  n: number;
  sum: number;
  bsum: number;
  p50: number | null;
  p90: number | null;
  bp50: number | null;
  bp90: number | null;
}

/** First response (the first reply ever) or full resolution (created to solved) times per day and over the range. */
export async function rawTimes(db: Executor, tenantId: string, which: 'frt' | 'res', f: RawFilters): Promise<RawTimeRow[]> {
  const facts =
    which === 'frt'
      ? sql`
        SELECT (fr.at AT TIME ZONE z.zone)::date AS day, ${sql.raw(minutesBetween('tk.created_at', 'fr.at'))} AS m,
               CASE WHEN tk.schedule_id IS NULL THEN ${sql.raw(minutesBetween('tk.created_at', 'fr.at'))} ELSE rt.frt_business END AS bm
        FROM tk JOIN (
          SELECT ticket_id, min(created_at) AS at FROM ticket_events WHERE tenant_id = ${tenantId} AND kind = 'reply' AND NOT meta ? 'via_merge' GROUP BY 1
        ) fr ON fr.ticket_id = tk.id
        LEFT JOIN report_tickets rt ON rt.tenant_id = ${tenantId} AND rt.ticket_id = tk.id, z
        WHERE ${assignee(f)}`
      : sql`
        SELECT (tk.solved_at AT TIME ZONE z.zone)::date AS day, ${sql.raw(minutesBetween('tk.created_at', 'tk.solved_at'))} AS m,
               CASE WHEN tk.schedule_id IS NULL THEN ${sql.raw(minutesBetween('tk.created_at', 'tk.solved_at'))} ELSE rt.res_business END AS bm
        FROM tk LEFT JOIN report_tickets rt ON rt.tenant_id = ${tenantId} AND rt.ticket_id = tk.id, z
        WHERE tk.status IN ('solved', 'closed') AND tk.solved_at IS NOT NULL AND ${assignee(f)}`;
  const { rows } = await sql<RawTimeRow>`
    WITH z AS (${zoneOf(tenantId)}), tk AS (${tickets(tenantId, f)}), f AS (${facts})
    SELECT day::text, count(*)::int AS n, coalesce(sum(m), 0)::bigint AS sum, coalesce(sum(bm), 0)::bigint AS bsum,
           percentile_disc(0.5) WITHIN GROUP (ORDER BY ${sql.raw(b('m'))}) AS p50, percentile_disc(0.9) WITHIN GROUP (ORDER BY ${sql.raw(b('m'))}) AS p90,
           percentile_disc(0.5) WITHIN GROUP (ORDER BY ${sql.raw(b('bm'))}) AS bp50, percentile_disc(0.9) WITHIN GROUP (ORDER BY ${sql.raw(b('bm'))}) AS bp90
    FROM f WHERE ${inRange(f)} GROUP BY GROUPING SETS ((day), ())`.execute(db);
  return rows.map((r) => ({ ...r, sum: Number(r.sum), bsum: Number(r.bsum) }));
}

/** Per resolution day: tickets solved, their replies, how many were ever reopened and how often (replies_per_ticket, reopens). */
export async function rawSolvedTickets(db: Executor, tenantId: string, f: RawFilters) {
  const { rows } = await sql<{ day: string | null; solved: number; replies: number; reopened: number; reopens: number }>`
    WITH z AS (${zoneOf(tenantId)}), tk AS (${tickets(tenantId, f)}),
    ev AS (
      SELECT ticket_id, count(*) FILTER (WHERE kind = 'reply') AS replies, count(*) FILTER (WHERE kind = 'reopen') AS reopens
      FROM ticket_events WHERE tenant_id = ${tenantId} AND kind IN ('reply', 'reopen') AND NOT meta ? 'via_merge' GROUP BY 1
    ),
    s AS (
      SELECT (tk.solved_at AT TIME ZONE z.zone)::date AS day, coalesce(ev.replies, 0) AS replies, coalesce(ev.reopens, 0) AS reopens
      FROM tk LEFT JOIN ev ON ev.ticket_id = tk.id, z
      WHERE tk.status IN ('solved', 'closed') AND tk.solved_at IS NOT NULL AND ${assignee(f)}
    )
    SELECT day::text, count(*)::int AS solved, sum(replies)::int AS replies, count(*) FILTER (WHERE reopens > 0)::int AS reopened, sum(reopens)::int AS reopens
    FROM s WHERE ${inRange(f)} GROUP BY GROUPING SETS ((day), ())`.execute(db);
  return rows;
}

/** The backlog: every ticket's moves in and out of open, pending and on hold, summed per day; the opening before `from`. */
export async function rawBacklog(db: Executor, tenantId: string, f: RawFilters) {
  const { rows } = await sql<{ day: string; backlog: number; opening: number }>`
    WITH z AS (${zoneOf(tenantId)}), tk AS (${tickets(tenantId, f)}),
    moves AS (
      SELECT (tk.created_at AT TIME ZONE z.zone)::date AS day, 1 AS n FROM tk, z WHERE ${assignee(f)}
      UNION ALL
      SELECT (e.created_at AT TIME ZONE z.zone)::date,
             CASE WHEN e.kind = 'status_changed' THEN (e.meta->>'to' IN ${sql.raw(LIVE)})::int - (e.meta->>'from' IN ${sql.raw(LIVE)})::int
                  ELSE -(e.meta->>'from_status' IN ${sql.raw(LIVE)})::int END
      FROM ticket_events e JOIN tk ON tk.id = e.ticket_id, z
      WHERE e.tenant_id = ${tenantId} AND ${assignee(f)} AND NOT e.meta ? 'via_merge'
        AND (e.kind = 'status_changed' OR (e.kind = 'merged' AND e.meta ? 'merged_into'))
    ),
    net AS (SELECT day, sum(n)::int AS n FROM moves WHERE day <= ${f.to}::date GROUP BY day),
    opening AS (SELECT coalesce(sum(n), 0)::int AS n FROM net WHERE day < ${f.from}::date)
    SELECT d::date::text AS day, ((SELECT n FROM opening) + coalesce(sum(net.n) OVER (ORDER BY d), 0))::int AS backlog, (SELECT n FROM opening) AS opening
    FROM generate_series(${f.from}::date, ${f.to}::date, interval '1 day') d LEFT JOIN net ON net.day = d::date
    ORDER BY d`.execute(db);
  return rows;
}

/** SLA outcomes per day: first replies of the current cycle against their due time, resolutions against theirs. */
export async function rawSla(db: Executor, tenantId: string, f: RawFilters) {
  const { rows } = await sql<{ day: string | null; first_n: number; first_met: number; res_n: number; res_met: number }>`
    WITH z AS (${zoneOf(tenantId)}), tk AS (${tickets(tenantId, f)}),
    o AS (
      SELECT (tk.first_responded_at AT TIME ZONE z.zone)::date AS day, 1 AS first_n, (tk.first_responded_at <= tk.first_response_due)::int AS first_met, 0 AS res_n, 0 AS res_met
      FROM tk, z WHERE tk.first_responded_at IS NOT NULL AND ${assignee(f)}
      UNION ALL
      SELECT (tk.solved_at AT TIME ZONE z.zone)::date, 0, 0, 1,
             (CASE WHEN tk.resolution_paused_at IS NOT NULL THEN coalesce(tk.resolution_remaining_minutes, 0) > 0 ELSE tk.solved_at <= tk.resolution_due END)::int
      FROM tk, z WHERE tk.status IN ('solved', 'closed') AND tk.solved_at IS NOT NULL AND ${assignee(f)}
    )
    SELECT day::text, sum(first_n)::int AS first_n, sum(first_met)::int AS first_met, sum(res_n)::int AS res_n, sum(res_met)::int AS res_met
    FROM o WHERE ${inRange(f)} GROUP BY GROUPING SETS ((day), ())`.execute(db);
  return rows;
}

/** Tickets created per day; resolutions (a move from open, pending or on hold to solved or closed) and reopens per day. */
export async function rawVolume(db: Executor, tenantId: string, f: RawFilters) {
  const { rows } = await sql<{ day: string | null; created: number; solved: number; reopened: number }>`
    WITH z AS (${zoneOf(tenantId)}), tk AS (${tickets(tenantId, f)}),
    o AS (
      SELECT (tk.created_at AT TIME ZONE z.zone)::date AS day, 1 AS created, 0 AS solved, 0 AS reopened FROM tk, z WHERE ${assignee(f)}
      UNION ALL
      SELECT (e.created_at AT TIME ZONE z.zone)::date, 0,
             (e.kind = 'status_changed' AND e.meta->>'from' IN ${sql.raw(LIVE)} AND e.meta->>'to' IN ('solved', 'closed'))::int, (e.kind = 'reopen')::int
      FROM ticket_events e JOIN tk ON tk.id = e.ticket_id, z
      WHERE e.tenant_id = ${tenantId} AND e.kind IN ('status_changed', 'reopen') AND NOT e.meta ? 'via_merge' AND ${assignee(f)}
    )
    SELECT day::text, sum(created)::int AS created, sum(solved)::int AS solved, sum(reopened)::int AS reopened
    FROM o WHERE ${inRange(f)} GROUP BY GROUPING SETS ((day), ())`.execute(db);
  return rows;
}

/** What agents did per day and per agent: replies and notes written, tickets solved, time logged (who acted). */
export async function rawActivity(db: Executor, tenantId: string, f: RawFilters) {
  const { rows } = await sql<{ day: string | null; agent: string | null; grouped_agent: number; replies: number; notes: number; solved: number; entries: number; minutes: number }>`
    WITH z AS (${zoneOf(tenantId)}), tk AS (${tickets(tenantId, f)}),
    o AS (
      SELECT (e.created_at AT TIME ZONE z.zone)::date AS day, e.actor_user_id AS agent,
             (e.kind = 'reply')::int AS replies, (e.kind = 'internal_note')::int AS notes,
             (e.kind = 'status_changed' AND e.meta->>'from' IN ${sql.raw(LIVE)} AND e.meta->>'to' IN ('solved', 'closed'))::int AS solved,
             0 AS entries, 0 AS minutes
      FROM ticket_events e JOIN tk ON tk.id = e.ticket_id, z
      WHERE e.tenant_id = ${tenantId} AND e.kind IN ('reply', 'internal_note', 'status_changed') AND NOT e.meta ? 'via_merge'
      UNION ALL
      SELECT (te.created_at AT TIME ZONE z.zone)::date, te.user_id, 0, 0, 0, 1, te.minutes
      FROM time_entries te JOIN tk ON tk.id = te.ticket_id, z WHERE te.tenant_id = ${tenantId}
    )
    SELECT day::text, agent::text, grouping(agent) AS grouped_agent, sum(replies)::int AS replies, sum(notes)::int AS notes, sum(solved)::int AS solved,
           sum(entries)::int AS entries, sum(minutes)::bigint AS minutes
    FROM o WHERE ${inRange(f)} AND (${f.agent_id ?? null}::uuid IS NULL OR agent = ${f.agent_id ?? null}::uuid)
    GROUP BY GROUPING SETS ((day), (agent), ())
    HAVING grouping(agent) = 1 OR sum(replies) <> 0 OR sum(notes) <> 0 OR sum(solved) <> 0 OR sum(entries) <> 0`.execute(db);
  return rows.map((r) => ({ ...r, minutes: Number(r.minutes) }));
}

export { bucket };
