import { sql, type RawBuilder } from 'kysely';
import type { Executor } from '../../db';
import { compilable, prepared } from '../../db/prepared';
import { BUCKET_BOUNDS_LITERAL } from './buckets';

/*
 * The reports' SQL (issue 37). A report fact is one row of (instant, metric, team, agent, channel, priority, minute
 * bucket, count n, value v); every report is a sum of facts per local day and filter key. Three sources make facts,
 * each written once here and used by the write path (journal), the zone rebuild and the migration's backfill (a
 * frozen copy):
 *
 * - a ticket's state row (report_tickets): created, backlog +1 at creation, first reply (calendar and business
 *   buckets), resolution (likewise), replies and reopens on the resolution day, the two SLA outcomes;
 * - a ticket's timeline events: resolutions (volume and who solved), reopens, backlog moves (a status change in
 *   or out of open/pending/on_hold, a merge), replies and internal notes by their author; copies a merge made
 *   (meta.via_merge) count nowhere, their originals already do on the merged ticket;
 * - a ticket's time entries: time logged by the entry's agent.
 *
 * Ticket facts are filed under the ticket's current team, assignee, channel and priority; event and entry facts
 * under its current team, channel and priority, with their author as the agent. A change of dimension moves all
 * of a ticket's facts (minus under the old, plus under the new), in the write's transaction.
 */

const LIVE = `('open', 'pending', 'on_hold')`;
const bucket = (minutes: string) => `(width_bucket(${minutes}, '${BUCKET_BOUNDS_LITERAL}'::int[]) - 1)::smallint`;
/** Whole minutes from `from` to `to` (never negative), in SQL so microseconds count exactly as the raw recomputation counts them. */
const minutesBetween = (from: string, to: string) =>
  `CASE WHEN ${to} IS NOT NULL THEN greatest(0, floor((extract(epoch FROM ${to}) - extract(epoch FROM ${from})) / 60))::int END`;

/** The journal's columns, in the order every fact SELECT below yields them (after the sign). */
const FACT_COLUMNS = 'at, metric, team_id, agent_id, channel, priority, bucket, n, v';

/** Facts of state rows `s` (report_tickets' columns) from `from`, each multiplied by `sign`. */
const ticketFacts = (from: RawBuilder<unknown>, sign: number) => sql`
  SELECT ${sql.raw(String(sign))} AS sign, f.at, f.metric, s.team_id, s.agent_id, s.channel, s.priority, f.bucket, f.n, f.v
  FROM ${from}
  CROSS JOIN LATERAL (VALUES
    ('created', s.created_at, NULL::smallint, 1, 0::bigint),
    ('backlog', s.created_at, NULL, 1, 0),
    ('frt', s.first_reply_at, ${sql.raw(bucket('s.frt_minutes'))}, 1, s.frt_minutes),
    ('frt_b', s.first_reply_at, ${sql.raw(bucket('s.frt_business'))}, 1, s.frt_business),
    ('res', s.resolved_at, ${sql.raw(bucket('s.res_minutes'))}, 1, s.res_minutes),
    ('res_b', s.resolved_at, ${sql.raw(bucket('s.res_business'))}, 1, s.res_business),
    ('rpt', s.resolved_at, NULL, 1, s.replies),
    ('reo', s.resolved_at, NULL, CASE WHEN s.reopens > 0 THEN 1 ELSE 0 END, s.reopens),
    ('slar', s.resolved_at, NULL, 1, coalesce(s.sla_res_met::int, 0)),
    ('slaf', s.sla_first_at, NULL, 1, coalesce(s.sla_first_met::int, 0))
  ) AS f(metric, at, bucket, n, v)
  WHERE f.at IS NOT NULL AND (f.n <> 0 OR f.v <> 0)`;

/** The event kinds that make facts. */
const FACT_KINDS = sql.raw(`('status_changed', 'merged', 'reopen', 'reply', 'internal_note')`);
const live = sql.raw(LIVE);

/** Facts of events `e` joined to dimension rows `s` (team_id, agent_id, channel, priority) in `from`, times `sign`. */
const eventFacts = (from: RawBuilder<unknown>, where: RawBuilder<unknown>, sign: number) => sql`
  SELECT ${sql.raw(String(sign))} AS sign, e.created_at AS at, f.metric, s.team_id, f.agent_id, s.channel, s.priority, NULL::smallint AS bucket, f.n, 0::bigint AS v
  FROM ${from}
  CROSS JOIN LATERAL (SELECT
    (e.kind = 'status_changed' AND e.meta->>'from' IN ${live} AND e.meta->>'to' IN ('solved', 'closed'))::int AS resolves,
    CASE WHEN e.kind = 'status_changed' THEN (e.meta->>'to' IN ${live})::int - (e.meta->>'from' IN ${live})::int
         WHEN e.kind = 'merged' AND e.meta ? 'merged_into' THEN -(e.meta->>'from_status' IN ${live})::int
         ELSE 0 END AS live
  ) k
  CROSS JOIN LATERAL (VALUES
    ('solved', s.agent_id, k.resolves),
    ('agent_solved', e.actor_user_id, k.resolves),
    ('reopened', s.agent_id, (e.kind = 'reopen')::int),
    ('backlog', s.agent_id, k.live),
    ('reply', e.actor_user_id, (e.kind = 'reply')::int),
    ('note', e.actor_user_id, (e.kind = 'internal_note')::int)
  ) AS f(metric, agent_id, n)
  WHERE e.kind IN ${FACT_KINDS} AND NOT e.meta ? 'via_merge' AND f.n <> 0 AND ${where}`;

/** Facts of time entries `te` joined to dimension rows `s` in `from`, times `sign`. */
const entryFacts = (from: RawBuilder<unknown>, where: RawBuilder<unknown>, sign: number) => sql`
  SELECT ${sql.raw(String(sign))} AS sign, te.created_at AS at, 'minutes' AS metric, s.team_id, te.user_id AS agent_id, s.channel, s.priority,
         NULL::smallint AS bucket, 1 AS n, te.minutes::bigint AS v
  FROM ${from}
  WHERE ${where}`;

// ---- the write path ----

/** What the write path needs to know of a ticket to measure business minutes (only tickets on a scheduled policy). */
export interface ScheduledFact {
  ticket_id: string;
  schedule_id: string;
  created_at: Date;
  first_reply_at: Date | null;
  resolved_at: Date | null;
  frt_same: boolean;
  res_same: boolean;
  old_frt_business: number | null;
  old_res_business: number | null;
}

/**
 * The tickets' new state: their row as it now stands, and their first reply, reply and reopen counts updated by
 * the events just appended (`eventIds`; an untracked ticket counts all its events). The caller holds the tickets'
 * row locks, so nothing moves under it between this and the write below.
 */
const newState = (tenantId: string, ticketIds: string[], eventIds: string[]) => sql`
  SELECT t.id AS ticket_id, t.team_id, t.assignee_id AS agent_id, t.source AS channel, t.priority::text AS priority, t.created_at,
         p.schedule_id, o.ticket_id IS NOT NULL AS tracked,
         a.first_reply_at, (coalesce(o.replies, 0) + a.replies)::int AS replies, (coalesce(o.reopens, 0) + a.reopens)::int AS reopens,
         r.resolved_at, t.first_responded_at AS sla_first_at, t.first_responded_at <= t.first_response_due AS sla_first_met,
         CASE WHEN r.resolved_at IS NOT NULL THEN CASE WHEN t.resolution_paused_at IS NOT NULL THEN coalesce(t.resolution_remaining_minutes, 0) > 0 ELSE r.resolved_at <= t.resolution_due END END AS sla_res_met,
         ${sql.raw(minutesBetween('t.created_at', 'a.first_reply_at'))} AS frt_minutes,
         ${sql.raw(minutesBetween('t.created_at', 'r.resolved_at'))} AS res_minutes,
         o.ticket_id IS NOT NULL AND o.first_reply_at IS NOT DISTINCT FROM a.first_reply_at AS frt_same, o.frt_business AS old_frt_business,
         o.ticket_id IS NOT NULL AND o.resolved_at IS NOT DISTINCT FROM r.resolved_at AS res_same, o.res_business AS old_res_business
  FROM tickets t
  LEFT JOIN sla_policies p ON p.tenant_id = t.tenant_id AND p.id = t.sla_policy_id
  LEFT JOIN report_tickets o ON o.tenant_id = t.tenant_id AND o.ticket_id = t.id
  -- A tracked ticket adds the events just appended (found by id); an untracked one counts all of its events (found by
  -- ticket, only then: the lateral's filter on o is a one-time filter).
  LEFT JOIN LATERAL (
    SELECT min(e.created_at) FILTER (WHERE e.kind = 'reply') AS first_reply_at,
           count(*) FILTER (WHERE e.kind = 'reply') AS replies, count(*) FILTER (WHERE e.kind = 'reopen') AS reopens
    FROM ticket_events e
    WHERE o.ticket_id IS NOT NULL AND e.tenant_id = t.tenant_id AND e.id = ANY(${eventIds}::uuid[]) AND e.ticket_id = t.id
      AND e.kind IN ('reply', 'reopen') AND NOT e.meta ? 'via_merge'
  ) ne ON true
  LEFT JOIN LATERAL (
    SELECT min(e.created_at) FILTER (WHERE e.kind = 'reply') AS first_reply_at,
           count(*) FILTER (WHERE e.kind = 'reply') AS replies, count(*) FILTER (WHERE e.kind = 'reopen') AS reopens
    FROM ticket_events e
    WHERE o.ticket_id IS NULL AND e.tenant_id = t.tenant_id AND e.ticket_id = t.id AND e.kind IN ('reply', 'reopen') AND NOT e.meta ? 'via_merge'
  ) ae ON true
  CROSS JOIN LATERAL (
    SELECT least(o.first_reply_at, ne.first_reply_at, ae.first_reply_at) AS first_reply_at,
           coalesce(ne.replies, 0) + coalesce(ae.replies, 0) AS replies, coalesce(ne.reopens, 0) + coalesce(ae.reopens, 0) AS reopens
  ) a
  CROSS JOIN LATERAL (SELECT CASE WHEN t.status IN ('solved', 'closed') THEN t.solved_at END AS resolved_at) r
  WHERE t.tenant_id = ${tenantId} AND t.id = ANY(${ticketIds}::uuid[])`;

/** The facts of these tickets that need business minutes measured (their policy names a schedule). */
const scheduledFactsQuery = prepared<[string, string[], string[]], ScheduledFact>(3, (db, tenantId, ticketIds, eventIds) => compilable(db, sql<ScheduledFact>`
    SELECT ticket_id, schedule_id, created_at, first_reply_at, resolved_at, frt_same, res_same, old_frt_business, old_res_business
    FROM (${newState(tenantId, ticketIds, eventIds)}) n WHERE schedule_id IS NOT NULL`));
export async function scheduledFacts(db: Executor, tenantId: string, ticketIds: string[], eventIds: string[]): Promise<ScheduledFact[]> {
  return scheduledFactsQuery(db, tenantId, ticketIds, eventIds);
}

/** Business minutes measured for one ticket's facts (absent: calendar minutes, the ticket's policy has no schedule). */
export interface Measured {
  ticket_id: string;
  frt_business: number | null;
  res_business: number | null;
}

const STATE_COLUMNS = `team_id, agent_id, channel, priority, created_at, first_reply_at, frt_minutes, frt_business, replies, reopens,
  resolved_at, res_minutes, res_business, sla_first_at, sla_first_met, sla_res_met`;

/**
 * One statement: the tickets' new state (with the business minutes measured), the signed difference of their
 * facts journaled (old state's facts minus, new state's plus, netted per fact), the new events' facts journaled,
 * and, for a ticket whose dimensions changed (or that was never tracked), all its events and entries moved from
 * the old dimensions to the new; then the state rows replaced. Returns how many journal rows it wrote.
 */
const trackQuery = prepared<[string, string[], string[], string], { journaled: number }>(4, (db, tenantId, ticketIds, eventIds, measured) => compilable(db, sql<{ journaled: number }>`
    WITH n0 AS (${newState(tenantId, ticketIds, eventIds)}),
    b AS (SELECT * FROM jsonb_to_recordset(${measured}::jsonb) AS x(ticket_id uuid, frt_business int, res_business int)),
    n AS (
      SELECT n0.*,
             CASE WHEN n0.first_reply_at IS NOT NULL THEN CASE WHEN b.ticket_id IS NULL THEN n0.frt_minutes ELSE b.frt_business END END AS frt_business,
             CASE WHEN n0.resolved_at IS NOT NULL THEN CASE WHEN b.ticket_id IS NULL THEN n0.res_minutes ELSE b.res_business END END AS res_business
      FROM n0 LEFT JOIN b USING (ticket_id)
    ),
    o AS (SELECT * FROM report_tickets WHERE tenant_id = ${tenantId} AND ticket_id = ANY(${ticketIds}::uuid[])),
    moved AS (
      SELECT n.ticket_id FROM n LEFT JOIN o USING (ticket_id)
      WHERE o.ticket_id IS NULL OR (n.team_id, n.agent_id, n.channel, n.priority) IS DISTINCT FROM (o.team_id, o.agent_id, o.channel, o.priority)
    ),
    facts AS (
      ${ticketFacts(sql`o s`, -1)}
      UNION ALL ${ticketFacts(sql`n s`, 1)}
      UNION ALL ${eventFacts(sql`ticket_events e JOIN n s ON s.ticket_id = e.ticket_id`, sql`e.tenant_id = ${tenantId} AND e.id = ANY(${eventIds}::uuid[]) AND s.ticket_id NOT IN (SELECT ticket_id FROM moved)`, 1)}
      UNION ALL ${eventFacts(sql`moved m JOIN o s ON s.ticket_id = m.ticket_id CROSS JOIN LATERAL (SELECT * FROM ticket_events x WHERE x.tenant_id = ${tenantId} AND x.ticket_id = m.ticket_id) e`, sql`e.id NOT IN (SELECT unnest(${eventIds}::uuid[]))`, -1)}
      UNION ALL ${eventFacts(sql`moved m JOIN n s ON s.ticket_id = m.ticket_id CROSS JOIN LATERAL (SELECT * FROM ticket_events x WHERE x.tenant_id = ${tenantId} AND x.ticket_id = m.ticket_id) e`, sql`true`, 1)}
      UNION ALL ${entryFacts(sql`moved m JOIN o s ON s.ticket_id = m.ticket_id CROSS JOIN LATERAL (SELECT * FROM time_entries x WHERE x.tenant_id = ${tenantId} AND x.ticket_id = m.ticket_id) te`, sql`true`, -1)}
      UNION ALL ${entryFacts(sql`moved m JOIN n s ON s.ticket_id = m.ticket_id CROSS JOIN LATERAL (SELECT * FROM time_entries x WHERE x.tenant_id = ${tenantId} AND x.ticket_id = m.ticket_id) te`, sql`true`, 1)}
    ),
    j AS (
      INSERT INTO report_journal (tenant_id, ${sql.raw(FACT_COLUMNS)})
      SELECT ${tenantId}, at, metric, team_id, agent_id, channel, priority, bucket, sum(sign * n), sum(sign * v)
      FROM facts GROUP BY at, metric, team_id, agent_id, channel, priority, bucket
      HAVING sum(sign * n) <> 0 OR sum(sign * v) <> 0
      RETURNING 1
    ),
    up AS (
      INSERT INTO report_tickets (tenant_id, ticket_id, ${sql.raw(STATE_COLUMNS)})
      SELECT ${tenantId}, ticket_id, ${sql.raw(STATE_COLUMNS)} FROM n
      ON CONFLICT (tenant_id, ticket_id) DO UPDATE SET
        ${sql.raw(
          STATE_COLUMNS.split(',')
            .map((c) => c.trim())
            .map((c) => `${c} = excluded.${c}`)
            .join(', '),
        )}
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM j)::int AS journaled, (SELECT count(*) FROM up)::int AS tracked`));
export async function track(db: Executor, tenantId: string, ticketIds: string[], eventIds: string[], measured: Measured[]): Promise<number> {
  const rows = await trackQuery(db, tenantId, ticketIds, eventIds, JSON.stringify(measured));
  return rows[0]?.journaled ?? 0;
}

/** A time entry's facts, signed: the removed versions minus, the added plus, under the ticket's tracked dimensions. */
export interface EntryChange {
  sign: 1 | -1;
  created_at: Date;
  user_id: string | null;
  minutes: number;
}

/** Journals time entries' changes; false when the ticket is not tracked yet (the caller tracks it: that counts every entry). */
const journalEntriesQuery = prepared<[string, string, string], { tracked: boolean }>(3, (db, tenantId, ticketId, changes) => compilable(db, sql<{ tracked: boolean }>`
    WITH s AS (SELECT team_id, channel, priority FROM report_tickets WHERE tenant_id = ${tenantId} AND ticket_id = ${ticketId}),
    x AS (SELECT * FROM jsonb_to_recordset(${changes}::jsonb) AS x(sign int, created_at timestamptz, user_id uuid, minutes int)),
    j AS (
      INSERT INTO report_journal (tenant_id, ${sql.raw(FACT_COLUMNS)})
      SELECT ${tenantId}, x.created_at, 'minutes', s.team_id, x.user_id, s.channel, s.priority, NULL, x.sign, x.sign * x.minutes FROM x, s
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM s) AS tracked, (SELECT count(*) FROM j) AS journaled`));
export async function journalEntries(db: Executor, tenantId: string, ticketId: string, changes: EntryChange[]): Promise<boolean> {
  const rows = await journalEntriesQuery(db, tenantId, ticketId, JSON.stringify(changes));
  return rows[0]?.tracked ?? false;
}

/** Every fact of a workspace, from its state rows, events and entries (the rebuild's source). */
const allFacts = (tenantId: string) => sql`
  ${ticketFacts(sql`report_tickets s`, 1)} AND s.tenant_id = ${tenantId}
  UNION ALL ${eventFacts(sql`ticket_events e JOIN report_tickets s ON s.tenant_id = e.tenant_id AND s.ticket_id = e.ticket_id`, sql`e.tenant_id = ${tenantId}`, 1)}
  UNION ALL ${entryFacts(sql`time_entries te JOIN report_tickets s ON s.tenant_id = te.tenant_id AND s.ticket_id = te.ticket_id`, sql`te.tenant_id = ${tenantId}`, 1)}`;

// ---- days: facts folded per local day and filter key ----

/** The counters of a report_days row, and the metric (n or v) each sums. */
const COUNTERS: [column: string, metric: string, part: 'n' | 'v'][] = [
  ['created', 'created', 'n'],
  ['solved', 'solved', 'n'],
  ['reopened', 'reopened', 'n'],
  ['backlog', 'backlog', 'n'],
  ['frt_n', 'frt', 'n'],
  ['frt_sum', 'frt', 'v'],
  ['frt_bsum', 'frt_b', 'v'],
  ['res_n', 'res', 'n'],
  ['res_sum', 'res', 'v'],
  ['res_bsum', 'res_b', 'v'],
  ['rpt_n', 'rpt', 'n'],
  ['rpt_replies', 'rpt', 'v'],
  ['reo_n', 'reo', 'n'],
  ['reo_sum', 'reo', 'v'],
  ['slaf_n', 'slaf', 'n'],
  ['slaf_met', 'slaf', 'v'],
  ['slar_n', 'slar', 'n'],
  ['slar_met', 'slar', 'v'],
  ['replies', 'reply', 'n'],
  ['notes', 'note', 'n'],
  ['agent_solved', 'agent_solved', 'n'],
  ['entries', 'minutes', 'n'],
  ['minutes', 'minutes', 'v'],
];
/** The histogram columns and the metric whose buckets each holds. */
const HISTOGRAMS: [column: string, metric: string][] = [
  ['frt_h', 'frt'],
  ['frt_bh', 'frt_b'],
  ['res_h', 'res'],
  ['res_bh', 'res_b'],
];
/** A day's percentiles kept beside its histograms: column, histogram, p. */
const PERCENTILES: [column: string, hist: string, p: number][] = [
  ['frt_p50', 'frt_h', 0.5],
  ['frt_p90', 'frt_h', 0.9],
  ['frt_bp50', 'frt_bh', 0.5],
  ['frt_bp90', 'frt_bh', 0.9],
  ['res_p50', 'res_h', 0.5],
  ['res_p90', 'res_h', 0.9],
  ['res_bp50', 'res_bh', 0.5],
  ['res_bp90', 'res_bh', 0.9],
];

const counterList = COUNTERS.map(([c]) => c).join(', ');
const histList = HISTOGRAMS.map(([c]) => c).join(', ');

/**
 * Facts (a source with FACT_COLUMNS) folded to report_days rows: per local day in `zone` and per month, per filter
 * key (every combination of the four dimensions, each its value, '-' for none or '*' for any: GROUP BY CUBE), one row
 * of counters and histograms. The same SQL folds the journal and rebuilds. All of it set-based: histograms are built
 * with jsonb_object_agg from bucket rows, months from the day's bucket rows, no function call per row.
 */
const daysOf = (source: RawBuilder<unknown>, zone: string) => sql`
  fine AS (
    SELECT (at AT TIME ZONE ${zone})::date AS day, metric, team_id, agent_id, channel, priority, bucket, sum(n)::bigint AS n, sum(v)::bigint AS v
    FROM (${source}) src GROUP BY 1, 2, 3, 4, 5, 6, 7
  ),
  cubed AS (
    SELECT 'd' AS grain, day AS period, metric, bucket,
           CASE WHEN grouping(team_id) = 1 THEN '*' ELSE coalesce(team_id::text, '-') END AS team,
           CASE WHEN grouping(agent_id) = 1 THEN '*' ELSE coalesce(agent_id::text, '-') END AS agent,
           CASE WHEN grouping(channel) = 1 THEN '*' ELSE channel END AS channel,
           CASE WHEN grouping(priority) = 1 THEN '*' ELSE priority END AS priority,
           sum(n) AS n, sum(v) AS v
    FROM fine GROUP BY day, metric, bucket, CUBE (team_id, agent_id, channel, priority)
  ),
  both_grains AS (
    SELECT * FROM cubed
    UNION ALL
    SELECT 'm', date_trunc('month', period)::date, metric, bucket, team, agent, channel, priority, sum(n), sum(v)
    FROM cubed GROUP BY 2, 3, 4, 5, 6, 7, 8
  ),
  out_rows AS (
    SELECT team, agent, channel, priority, grain, period,
           ${sql.raw(COUNTERS.map(([c, m, p]) => `coalesce(sum(${p}) FILTER (WHERE metric = '${m}'), 0) AS ${c}`).join(', '))},
           ${sql.raw(HISTOGRAMS.map(([c, m]) => `jsonb_object_agg(bucket, n) FILTER (WHERE metric = '${m}' AND n <> 0) AS ${c}`).join(', '))},
           grain = 'd' AND bool_or(bucket IS NOT NULL) AS pct_stale
    FROM both_grains GROUP BY 1, 2, 3, 4, 5, 6
  )`;

const upsertDays = (tenantId: string) => sql`
  INSERT INTO report_days (tenant_id, team, agent, channel, priority, grain, period, ${sql.raw(counterList)}, ${sql.raw(histList)}, pct_stale)
  SELECT ${tenantId}, team, agent, channel, priority, grain, period, ${sql.raw(counterList)}, ${sql.raw(histList)}, pct_stale FROM out_rows
  ON CONFLICT (tenant_id, team, agent, channel, priority, grain, period) DO UPDATE SET
    ${sql.raw(COUNTERS.map(([c]) => `${c} = report_days.${c} + excluded.${c}`).join(', '))},
    ${sql.raw(HISTOGRAMS.map(([c]) => `${c} = CASE WHEN excluded.${c} IS NULL THEN report_days.${c} ELSE report_hist_add(report_days.${c}, excluded.${c}) END`).join(', '))},
    pct_stale = report_days.pct_stale OR excluded.pct_stale
  RETURNING team, agent, channel, priority, grain, period::text AS period,
    (${sql.raw([...COUNTERS.map(([c]) => `${c} = 0`), ...HISTOGRAMS.map(([c]) => `${c} IS NULL`)].join(' AND '))}) AS empty`;

/**
 * Recomputes the kept percentiles of up to `limit` of the workspace's day rows whose histograms changed
 * (`pct_stale`), set-based: each histogram expanded to bucket rows, cumulated in bucket order, the first bucket whose
 * cumulative count reaches ⌈p·n⌉ (float8, as percentile_disc computes it) taken. Under the fold lock (a fold
 * changing a histogram meanwhile would leave a percentile of the old one unmarked). Until a row is refreshed, reads
 * compute its percentiles from its histogram (`readDays`), so they are exact either way. Returns the rows refreshed.
 */
export async function refreshPercentiles(db: Executor, tenantId: string, limit: number): Promise<number> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${lockKey(tenantId)}, 0))`.execute(db);
  await sql`SELECT set_config('jit', 'off', true)`.execute(db);
  const { rows } = await sql<{ n: number }>`
    WITH stale AS MATERIALIZED (
      -- Each row is written back by its ctid (a TID scan per row, never a join over the workspace's day rows); the
      -- fold lock keeps every row where it is until commit.
      SELECT ctid AS rid, ${sql.raw(histList)} FROM report_days WHERE tenant_id = ${tenantId} AND pct_stale LIMIT ${limit}
    ),
    -- One row per stale row (an aggregate over no buckets is one row of NULLs): its percentiles, from its buckets.
    p AS (
      SELECT s.rid, pc.*
      FROM stale s
      CROSS JOIN LATERAL (
        SELECT ${sql.raw(PERCENTILES.map(([c, h, q]) => `min(x.k) FILTER (WHERE x.col = '${h}' AND x.cum >= greatest(1, ceil(${q}::float8 * x.total::float8))) AS ${c}`).join(', '))}
        FROM (
          SELECT h.col, e.key::int AS k,
                 sum(e.value::bigint) OVER (PARTITION BY h.col ORDER BY e.key::int) AS cum, sum(e.value::bigint) OVER (PARTITION BY h.col) AS total
          FROM (VALUES ${sql.raw(HISTOGRAMS.map(([c]) => `('${c}', s.${c})`).join(', '))}) AS h(col, hist)
          CROSS JOIN LATERAL jsonb_each_text(h.hist) AS e
        ) x
      ) pc
    ),
    up AS (
      UPDATE report_days d SET ${sql.raw(PERCENTILES.map(([c]) => `${c} = p.${c}`).join(', '))}, pct_stale = false
      FROM p WHERE d.ctid = p.rid
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM up`.execute(db);
  return rows[0]?.n ?? 0;
}

const lockKey = (tenantId: string) => `reports|${tenantId}`;

/** The zone a workspace's days are cut in (UTC until a rebuild says otherwise). */
export async function bucketZone(db: Executor, tenantId: string): Promise<string> {
  const r = await db.selectFrom('report_zones').select('zone').where('tenant_id', '=', tenantId).executeTakeFirst();
  return r?.zone ?? 'UTC';
}

/**
 * Moves the workspace's oldest `limit` journal rows into its days, in one transaction (one fold at a time per
 * workspace): a delta committed after the DELETE's snapshot stays for the next fold, and reads count it from the
 * journal meanwhile. Rows whose every counter came back to zero are dropped. A bounded chunk keeps each transaction
 * short however long the journal grew (a migration's backfill, workers that were down).
 */
export async function fold(db: Executor, tenantId: string, limit: number): Promise<{ moved: number }> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${lockKey(tenantId)}, 0))`.execute(db);
  // A chunk's 16 keys per fact are grouped and sorted in memory (4 MB spills a full chunk to disk); compiling the
  // statement (JIT) costs more than it saves on chunks of this size.
  await sql`SELECT set_config('work_mem', '64MB', true), set_config('jit', 'off', true)`.execute(db);
  const zone = await bucketZone(db, tenantId);
  const { rows } = await sql<{ team: string; agent: string; channel: string; priority: string; grain: string; period: string; empty: boolean; moved: number }>`
    WITH moved AS (
      DELETE FROM report_journal WHERE tenant_id = ${tenantId} AND id IN (SELECT id FROM report_journal WHERE tenant_id = ${tenantId} ORDER BY id LIMIT ${limit})
      RETURNING ${sql.raw(FACT_COLUMNS)}
    ),
    ${daysOf(sql`SELECT * FROM moved`, zone)},
    up AS (${upsertDays(tenantId)})
    SELECT up.*, (SELECT count(*) FROM moved)::int AS moved FROM up
    UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, false, (SELECT count(*) FROM moved)::int`.execute(db);
  const empty = rows.filter((r) => r.empty && r.team !== null);
  if (empty.length > 0) {
    await sql`
      DELETE FROM report_days d USING jsonb_to_recordset(${JSON.stringify(empty)}::jsonb) AS k(team text, agent text, channel text, priority text, grain text, period date)
      WHERE d.tenant_id = ${tenantId} AND d.team = k.team AND d.agent = k.agent AND d.channel = k.channel AND d.priority = k.priority
        AND d.grain = k.grain AND d.period = k.period
        AND ${sql.raw([...COUNTERS.map(([c]) => `d.${c} = 0`), ...HISTOGRAMS.map(([c]) => `d.${c} IS NULL`)].join(' AND '))}`.execute(db);
  }
  return { moved: rows.at(-1)?.moved ?? 0 };
}

/** Workspaces with deltas waiting, and those whose days are cut in a zone other than the one set. */
export async function crossTenantNeedingWork(db: Executor): Promise<{ fold: string[]; rezone: string[] }> {
  // A skip scan over the journal's key (one index probe per workspace with deltas), not a DISTINCT over every row:
  // this runs every minute, and a backfill or stopped workers leave millions of rows.
  const fold = await sql<{ tenant_id: string }>`
    WITH RECURSIVE w(tenant_id) AS (
      (SELECT tenant_id FROM report_journal ORDER BY tenant_id LIMIT 1)
      UNION ALL
      SELECT (SELECT j.tenant_id FROM report_journal j WHERE j.tenant_id > w.tenant_id ORDER BY j.tenant_id LIMIT 1) FROM w WHERE w.tenant_id IS NOT NULL
    )
    SELECT tenant_id FROM w WHERE tenant_id IS NOT NULL`.execute(db);
  const rezone = await sql<{ tenant_id: string }>`
    SELECT t.id AS tenant_id FROM tenants t LEFT JOIN report_zones z ON z.tenant_id = t.id WHERE t.time_zone <> coalesce(z.zone, 'UTC')`.execute(db);
  return { fold: fold.rows.map((r) => r.tenant_id), rezone: rezone.rows.map((r) => r.tenant_id) };
}

/**
 * Rebuilds the workspace's days from its state rows, events and entries, cut in the workspace's zone as it is
 * set now, and records that zone: the journal visible to this transaction's snapshot is dropped (its facts are in
 * what is rebuilt), anything committed later stays for the next fold. Run in a REPEATABLE READ transaction
 * holding the fold lock (`withFoldLock`), so the facts read and the journal dropped are one snapshot.
 */
export async function rebuildDays(db: Executor, tenantId: string): Promise<{ zone: string; rows: number }> {
  await longStatements(db);
  const zone = (await db.selectFrom('tenants').select('time_zone').where('id', '=', tenantId).executeTakeFirstOrThrow()).time_zone;
  await sql`DELETE FROM report_journal WHERE tenant_id = ${tenantId}`.execute(db);
  await sql`DELETE FROM report_days WHERE tenant_id = ${tenantId}`.execute(db);
  const { rows } = await sql<{ n: number }>`
    WITH ${daysOf(allFacts(tenantId), zone)}, up AS (${upsertDays(tenantId)}) SELECT count(*)::int AS n FROM up`.execute(db);
  await sql`
    INSERT INTO report_zones (tenant_id, zone, built_at) VALUES (${tenantId}, ${zone}, now())
    ON CONFLICT (tenant_id) DO UPDATE SET zone = excluded.zone, built_at = excluded.built_at`.execute(db);
  return { zone, rows: rows[0]?.n ?? 0 };
}

/**
 * A rebuild reads every fact of a workspace in one statement (minutes at ten million events): background work in
 * a transaction of its own, so its statements get an hour rather than PG_STATEMENT_TIMEOUT_MS, and memory to group in.
 */
export const longStatements = (db: Executor) =>
  sql`SELECT set_config('statement_timeout', '3600000', true), set_config('work_mem', '256MB', true), set_config('jit', 'off', true)`.execute(db);

/** The session-level form of the fold lock, for work that must take its snapshot after the lock (a rebuild). */
export const foldLock = (tenantId: string) => sql`SELECT pg_advisory_lock(hashtextextended(${lockKey(tenantId)}, 0))`;
export const foldUnlock = (tenantId: string) => sql`SELECT pg_advisory_unlock(hashtextextended(${lockKey(tenantId)}, 0))`;

/**
 * Recomputes every state row from the raw rows, set-based (the repair after a verify, and loaders that write raw
 * rows directly): as `newState` for an untracked ticket, business minutes as calendar minutes; the caller measures
 * scheduled tickets again afterwards (`scheduledTickets`). Days are not touched: rebuild them after.
 */
export async function rebuildState(db: Executor, tenantId: string): Promise<number> {
  await longStatements(db);
  await sql`DELETE FROM report_tickets WHERE tenant_id = ${tenantId}`.execute(db);
  const { rows } = await sql<{ n: number }>`
    WITH n AS (
      SELECT t.id AS ticket_id, t.team_id, t.assignee_id AS agent_id, t.source AS channel, t.priority::text AS priority, t.created_at,
             e.first_reply_at, coalesce(e.replies, 0)::int AS replies, coalesce(e.reopens, 0)::int AS reopens, r.resolved_at,
             t.first_responded_at AS sla_first_at, t.first_responded_at <= t.first_response_due AS sla_first_met,
             CASE WHEN r.resolved_at IS NOT NULL THEN CASE WHEN t.resolution_paused_at IS NOT NULL THEN coalesce(t.resolution_remaining_minutes, 0) > 0 ELSE r.resolved_at <= t.resolution_due END END AS sla_res_met,
             ${sql.raw(minutesBetween('t.created_at', 'e.first_reply_at'))} AS frt_minutes,
             ${sql.raw(minutesBetween('t.created_at', 'r.resolved_at'))} AS res_minutes
      FROM tickets t
      LEFT JOIN (
        SELECT ticket_id, min(created_at) FILTER (WHERE kind = 'reply') AS first_reply_at,
               count(*) FILTER (WHERE kind = 'reply') AS replies, count(*) FILTER (WHERE kind = 'reopen') AS reopens
        FROM ticket_events WHERE tenant_id = ${tenantId} AND kind IN ('reply', 'reopen') AND NOT meta ? 'via_merge' GROUP BY 1
      ) e ON e.ticket_id = t.id
      CROSS JOIN LATERAL (SELECT CASE WHEN t.status IN ('solved', 'closed') THEN t.solved_at END AS resolved_at) r
      WHERE t.tenant_id = ${tenantId}
    ), up AS (
      INSERT INTO report_tickets (tenant_id, ticket_id, ${sql.raw(STATE_COLUMNS)})
      SELECT ${tenantId}, ticket_id, team_id, agent_id, channel, priority, created_at, first_reply_at, frt_minutes, frt_minutes, replies, reopens,
             resolved_at, res_minutes, res_minutes, sla_first_at, sla_first_met, sla_res_met
      FROM n RETURNING 1
    )
    SELECT count(*)::int AS n FROM up`.execute(db);
  return rows[0]?.n ?? 0;
}

/** The tickets of a workspace whose policy names a schedule (their business minutes are measured in code). */
export async function scheduledTickets(db: Executor, tenantId: string, afterId: string | null, limit: number): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    SELECT t.id FROM tickets t JOIN sla_policies p ON p.tenant_id = t.tenant_id AND p.id = t.sla_policy_id
    WHERE t.tenant_id = ${tenantId} AND p.schedule_id IS NOT NULL AND (${afterId}::uuid IS NULL OR t.id > ${afterId}::uuid)
    ORDER BY t.id LIMIT ${limit}`.execute(db);
  return rows.map((r) => r.id);
}

/** Stores business minutes measured again for tracked tickets (their facts move with them: the caller rebuilds days). */
export async function setMeasured(db: Executor, tenantId: string, measured: Measured[]): Promise<void> {
  if (measured.length === 0) return;
  await sql`
    UPDATE report_tickets s SET frt_business = CASE WHEN s.first_reply_at IS NOT NULL THEN m.frt_business END,
                                res_business = CASE WHEN s.resolved_at IS NOT NULL THEN m.res_business END
    FROM jsonb_to_recordset(${JSON.stringify(measured)}::jsonb) AS m(ticket_id uuid, frt_business int, res_business int)
    WHERE s.tenant_id = ${tenantId} AND s.ticket_id = m.ticket_id`.execute(db);
}

/** The schedules named by the given ids, as stored (0040): the caller makes clocks of them. */
export async function schedules(db: Executor, tenantId: string, ids: string[]) {
  if (ids.length === 0) return [];
  return db
    .selectFrom('schedules')
    .select(['tenant_id', 'id', 'version', 'time_zone', 'weekly', 'holidays', 'ical_holidays'])
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', ids)
    .execute();
}

// ---- reads ----

/** A filter key: each dimension's value, or '*' for any. */
export interface Key {
  team: string;
  agent: string;
  channel: string;
  priority: string;
}

/** A report_days row as read: its local day and the columns asked for (counters as numbers, histograms as objects). */
export type DayRow = { day: string } & Record<string, unknown>;
export interface JournalRow {
  day: string;
  metric: string;
  bucket: number | null;
  n: number;
  v: number;
}

export interface Read {
  zone: string;
  days: DayRow[];
  journal: JournalRow[];
  /** Backlog before `from`: the sum of every earlier day's net change (days and journal). */
  opening: number;
  /** The range's histograms (whole months' rows and the days around them), without the journal. */
  totals: Record<string, Record<string, number> | null> | null;
}

const uuidOrNull = (k: string) => (k === '*' ? null : k);

/** A report's range: its days, and the whole months inside it (empty when none: monthsFrom = monthsTo). */
export interface Range {
  from: string;
  to: string;
  monthsFrom: string;
  monthsTo: string;
}

/**
 * One statement, one snapshot: the key's day rows in [from, to] (the columns asked for; a histogram only on a day
 * the journal has facts of it for, the other days carry their percentiles), the journal's facts of the metrics asked
 * for in that range (per local day in the days' own zone), the range's histograms summed from month rows and the
 * days around them, and for the backlog the net change of every earlier day. A fold or a rebuild commits atomically,
 * so no fact is seen twice or missed.
 */
export async function readDays(db: Executor, tenantId: string, key: Key, range: Range, want: { columns: string[]; hists: string[]; metrics: string[]; opening: boolean }): Promise<Read> {
  const cols = sql.raw(
    [...want.columns, ...(want.hists.length > 0 ? ['pct_stale'] : []), ...want.hists.map((h) => `CASE WHEN pct_stale OR period IN (SELECT day FROM jdays) THEN ${h} END AS ${h}`)]
      .map((c) => `, ${c}`)
      .join(''),
  );
  const ofKey = sql`tenant_id = ${tenantId} AND team = ${key.team} AND agent = ${key.agent} AND channel = ${key.channel} AND priority = ${key.priority}`;
  // The range's histograms, summed set-based: each row's buckets expanded, summed per bucket, folded back to objects.
  const totals =
    want.hists.length > 0
      ? sql`(SELECT json_object_agg(col, hist) FROM (
             SELECT col, json_object_agg(k, n) AS hist FROM (
               SELECT h.col, e.key AS k, sum(e.value::bigint) AS n
               FROM report_days r
               CROSS JOIN LATERAL (VALUES ${sql.raw(want.hists.map((h) => `('${h}', r.${h})`).join(', '))}) AS h(col, hist)
               CROSS JOIN LATERAL jsonb_each_text(h.hist) AS e
               WHERE r.${sql.raw(`tenant_id = `)}${tenantId} AND r.team = ${key.team} AND r.agent = ${key.agent} AND r.channel = ${key.channel} AND r.priority = ${key.priority}
                 AND ((r.grain = 'm' AND r.period >= ${range.monthsFrom}::date AND r.period < ${range.monthsTo}::date)
                   OR (r.grain = 'd' AND r.period BETWEEN ${range.from}::date AND ${range.to}::date AND NOT (r.period >= ${range.monthsFrom}::date AND r.period < ${range.monthsTo}::date)))
               GROUP BY 1, 2
             ) b GROUP BY col
           ) t)`
      : sql`NULL::json`;
  const { rows } = await sql<Read>`
    WITH z AS (SELECT coalesce((SELECT zone FROM report_zones WHERE tenant_id = ${tenantId}), 'UTC') AS zone),
    j AS (
      SELECT r.at, r.metric, r.bucket, r.agent_id, r.n, r.v FROM report_journal r
      WHERE r.tenant_id = ${tenantId} AND r.metric = ANY(${want.metrics}::text[])
        AND (${uuidOrNull(key.team)}::uuid IS NULL OR r.team_id = ${uuidOrNull(key.team)}::uuid)
        AND (${uuidOrNull(key.agent)}::uuid IS NULL OR r.agent_id = ${uuidOrNull(key.agent)}::uuid)
        AND (${key.channel} = '*' OR r.channel = ${key.channel}) AND (${key.priority} = '*' OR r.priority = ${key.priority})
    ),
    jr AS (
      SELECT ((j.at AT TIME ZONE z.zone)::date) AS day, j.metric, j.bucket, sum(j.n)::bigint AS n, sum(j.v)::bigint AS v
      FROM j, z
      WHERE j.at >= (${range.from}::date::timestamp AT TIME ZONE z.zone) AND j.at < ((${range.to}::date + 1)::timestamp AT TIME ZONE z.zone)
      GROUP BY 1, 2, 3
    ),
    jdays AS (SELECT DISTINCT day FROM jr WHERE bucket IS NOT NULL)
    SELECT (SELECT zone FROM z) AS zone,
      (SELECT coalesce(json_agg(d ORDER BY d.day), '[]') FROM (
        SELECT period::text AS day ${cols} FROM report_days
        WHERE ${ofKey} AND grain = 'd' AND period BETWEEN ${range.from}::date AND ${range.to}::date
      ) d) AS days,
      (SELECT coalesce(json_agg(json_build_object('day', day::text, 'metric', metric, 'bucket', bucket, 'n', n, 'v', v)), '[]') FROM jr) AS journal,
      ${totals} AS totals,
      CASE WHEN ${want.opening} THEN
        (SELECT coalesce(sum(backlog), 0) FROM report_days WHERE ${ofKey} AND grain = 'd' AND period < ${range.from}::date)
        + (SELECT coalesce(sum(j.n), 0) FROM j, z WHERE j.metric = 'backlog' AND j.at < (${range.from}::date::timestamp AT TIME ZONE z.zone))
      ELSE 0 END::bigint AS opening`.execute(db);
  const r = rows[0]!;
  return { ...r, opening: Number(r.opening), journal: r.journal.map((x) => ({ ...x, n: Number(x.n), v: Number(x.v) })) };
}

export interface AgentTotals {
  agent_id: string | null;
  name: string | null;
  replies: number;
  notes: number;
  agent_solved: number;
  entries: number;
  minutes: number;
}

/**
 * Agent activity per agent over [from, to]: month rows for the whole months inside the range, day rows for the
 * days around them, and the journal's facts in the range, summed per agent (the author of a reply or note, who
 * solved, who logged the time) in one statement; named while they are a member.
 */
export async function agentTotals(
  db: Executor,
  tenantId: string,
  key: Omit<Key, 'agent'>,
  range: { from: string; to: string; monthsFrom: string; monthsTo: string },
): Promise<AgentTotals[]> {
  const { rows } = await sql<AgentTotals>`
    WITH z AS (SELECT coalesce((SELECT zone FROM report_zones WHERE tenant_id = ${tenantId}), 'UTC') AS zone),
    k AS (
      SELECT agent, replies, notes, agent_solved, entries, minutes FROM report_days
      WHERE tenant_id = ${tenantId} AND team = ${key.team} AND channel = ${key.channel} AND priority = ${key.priority} AND agent <> '*'
        AND grain = 'm' AND period >= ${range.monthsFrom}::date AND period < ${range.monthsTo}::date
      UNION ALL
      SELECT agent, replies, notes, agent_solved, entries, minutes FROM report_days
      WHERE tenant_id = ${tenantId} AND team = ${key.team} AND channel = ${key.channel} AND priority = ${key.priority} AND agent <> '*'
        AND grain = 'd' AND period >= ${range.from}::date AND period <= ${range.to}::date
        AND NOT (period >= ${range.monthsFrom}::date AND period < ${range.monthsTo}::date)
      UNION ALL
      SELECT coalesce(r.agent_id::text, '-'),
             (r.metric = 'reply')::int * r.n, (r.metric = 'note')::int * r.n, (r.metric = 'agent_solved')::int * r.n,
             (r.metric = 'minutes')::int * r.n, (r.metric = 'minutes')::int * r.v
      FROM report_journal r, z
      WHERE r.tenant_id = ${tenantId} AND r.metric IN ('reply', 'note', 'agent_solved', 'minutes')
        AND (${uuidOrNull(key.team)}::uuid IS NULL OR r.team_id = ${uuidOrNull(key.team)}::uuid)
        AND (${key.channel} = '*' OR r.channel = ${key.channel}) AND (${key.priority} = '*' OR r.priority = ${key.priority})
        AND r.at >= (${range.from}::date::timestamp AT TIME ZONE z.zone) AND r.at < ((${range.to}::date + 1)::timestamp AT TIME ZONE z.zone)
    ), sums AS (
      SELECT agent, sum(replies)::bigint AS replies, sum(notes)::bigint AS notes, sum(agent_solved)::bigint AS agent_solved,
             sum(entries)::bigint AS entries, sum(minutes)::bigint AS minutes
      FROM k GROUP BY agent
      HAVING sum(replies) <> 0 OR sum(notes) <> 0 OR sum(agent_solved) <> 0 OR sum(entries) <> 0 OR sum(minutes) <> 0
    )
    SELECT CASE WHEN s.agent = '-' THEN NULL ELSE s.agent END AS agent_id, u.name, s.replies, s.notes, s.agent_solved, s.entries, s.minutes
    FROM sums s
    LEFT JOIN memberships m ON s.agent <> '-' AND m.tenant_id = ${tenantId} AND m.user_id::text = s.agent
    LEFT JOIN users u ON u.id = m.user_id`.execute(db);
  return rows.map((r) => ({ ...r, replies: Number(r.replies), notes: Number(r.notes), agent_solved: Number(r.agent_solved), entries: Number(r.entries), minutes: Number(r.minutes) }));
}

export { COUNTERS, HISTOGRAMS, PERCENTILES, daysOf, ticketFacts, eventFacts, entryFacts, minutesBetween, bucket };

/** Members' names by user id (someone no longer a member has none). */
export async function memberNames(db: Executor, tenantId: string, userIds: string[]): Promise<Map<string, string>> {
  if (userIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('users as u')
    .innerJoin('memberships as m', 'm.user_id', 'u.id')
    .select(['u.id', 'u.name'])
    .where('m.tenant_id', '=', tenantId)
    .where('u.id', 'in', userIds)
    .execute();
  return new Map(rows.map((r) => [r.id, r.name]));
}
