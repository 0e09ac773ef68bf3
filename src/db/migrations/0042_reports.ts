import { type Kysely, sql } from 'kysely';

/*
 * Reports (issue 37), precomputed like the rollups and exact on every read. docs/decisions/reports.md has the
 * reasons; in short:
 *
 * - `tenants.time_zone`: the workspace's IANA zone, the one its report days are cut in (UTC by default).
 * - `report_tickets`: per ticket, what it contributes to the reports right now (its dimensions as last journaled,
 *   its first reply, resolution, reply and reopen counts, SLA outcomes, and the business minutes measured when each
 *   fact was recorded). A write diffs the ticket's new contribution against this row: the signed difference goes
 *   to the journal in the write's transaction, and the row is replaced.
 * - `report_journal`: the signed deltas not yet folded, one row per fact (instant, metric, team, agent, channel,
 *   priority, minute bucket, count, value). Reads add it to the folded days, so no fold is ever waited for.
 * - `report_days`: the folded totals per local day (and per month) and per filter key: every
 *   combination of team, agent, channel and priority, each either one value or '*' (any), '-' standing for none.
 *   One row holds every report's counters for its day and key; the minute histograms are jsonb (bucket → count),
 *   and a day's medians and p90s are kept beside them, so a long range reads numbers, not histograms.
 * - `report_zones`: the zone the days were cut in. A zone change re-buckets in the workers and swaps the zone with
 *   the days in one transaction, so a read always gets days and zone that belong together.
 * - Existing tickets are backfilled here: their rows in `report_tickets` and every fact in the journal (the first
 *   fold moves them into days). Business minutes are calendar minutes for them: no SLA policy names a schedule yet
 *   when this runs (0040 adds schedules empty).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE tenants ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC';

    CREATE TABLE report_zones (
      tenant_id uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
      zone text NOT NULL,
      built_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE report_tickets (
      tenant_id uuid NOT NULL,
      ticket_id uuid NOT NULL,
      team_id uuid,
      agent_id uuid,
      channel text NOT NULL,
      priority text NOT NULL,
      created_at timestamptz NOT NULL,
      first_reply_at timestamptz,
      frt_minutes integer,
      frt_business integer,
      replies integer NOT NULL DEFAULT 0,
      reopens integer NOT NULL DEFAULT 0,
      resolved_at timestamptz,
      res_minutes integer,
      res_business integer,
      sla_first_at timestamptz,
      sla_first_met boolean,
      sla_res_met boolean,
      PRIMARY KEY (tenant_id, ticket_id),
      FOREIGN KEY (tenant_id, ticket_id) REFERENCES tickets (tenant_id, id) ON DELETE CASCADE
    );

    CREATE TABLE report_journal (
      id bigint GENERATED ALWAYS AS IDENTITY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      at timestamptz NOT NULL,
      metric text NOT NULL CHECK (metric IN ('created', 'backlog', 'frt', 'frt_b', 'res', 'res_b', 'rpt', 'reo', 'slaf', 'slar',
                                             'solved', 'reopened', 'reply', 'note', 'agent_solved', 'minutes')),
      team_id uuid,
      agent_id uuid,
      channel text NOT NULL,
      priority text NOT NULL,
      bucket smallint,
      n integer NOT NULL,
      v bigint NOT NULL DEFAULT 0
    );
    -- Folds take a workspace's oldest rows first, a bounded chunk per transaction; reads take all of its rows (few).
    -- The key leads with the workspace, as every tenant table's does (a distributed table's key must hold it).
    ALTER TABLE report_journal ADD PRIMARY KEY (tenant_id, id);

    CREATE TABLE report_days (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      team text NOT NULL,
      agent text NOT NULL,
      channel text NOT NULL,
      priority text NOT NULL,
      grain char(1) NOT NULL CHECK (grain IN ('d', 'm')),
      period date NOT NULL,
      created integer NOT NULL DEFAULT 0,
      solved integer NOT NULL DEFAULT 0,
      reopened integer NOT NULL DEFAULT 0,
      backlog integer NOT NULL DEFAULT 0,
      frt_n integer NOT NULL DEFAULT 0,
      frt_sum bigint NOT NULL DEFAULT 0,
      frt_bsum bigint NOT NULL DEFAULT 0,
      frt_h jsonb,
      frt_bh jsonb,
      res_n integer NOT NULL DEFAULT 0,
      res_sum bigint NOT NULL DEFAULT 0,
      res_bsum bigint NOT NULL DEFAULT 0,
      res_h jsonb,
      res_bh jsonb,
      -- A day's percentiles (bucket numbers), kept by the fold from its histograms: a read of many days reads these,
      -- and the histograms only of days with journal facts and of the range's total (months and edge days).
      frt_p50 smallint,
      frt_p90 smallint,
      frt_bp50 smallint,
      frt_bp90 smallint,
      res_p50 smallint,
      res_p90 smallint,
      res_bp50 smallint,
      res_bp90 smallint,
      -- Set when a histogram changed: the fold recomputes these percentiles before it commits.
      pct_stale boolean NOT NULL DEFAULT false,
      rpt_n integer NOT NULL DEFAULT 0,
      rpt_replies bigint NOT NULL DEFAULT 0,
      reo_n integer NOT NULL DEFAULT 0,
      reo_sum bigint NOT NULL DEFAULT 0,
      slaf_n integer NOT NULL DEFAULT 0,
      slaf_met integer NOT NULL DEFAULT 0,
      slar_n integer NOT NULL DEFAULT 0,
      slar_met integer NOT NULL DEFAULT 0,
      replies integer NOT NULL DEFAULT 0,
      notes integer NOT NULL DEFAULT 0,
      agent_solved integer NOT NULL DEFAULT 0,
      entries integer NOT NULL DEFAULT 0,
      minutes bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (tenant_id, team, agent, channel, priority, grain, period)
    );
    -- Agent activity's per-agent totals: every agent's rows of one filter key and period range, side by side.
    CREATE INDEX report_days_agents ON report_days (tenant_id, team, channel, priority, grain, period) WHERE agent <> '*';
    CREATE INDEX report_days_pct_stale ON report_days (tenant_id) WHERE pct_stale;

    -- Adds two histograms (bucket → count), dropping buckets that reach zero; NULL when none is left. A fold adds a
    -- few buckets to a stored histogram, so a small addend is added key by key (jsonb_set); a large one, merged.
    CREATE FUNCTION report_hist_add(a jsonb, b jsonb) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
    DECLARE
      k text;
      v text;
      s bigint;
    BEGIN
      IF b IS NULL THEN RETURN a; END IF;
      IF a IS NULL THEN RETURN b; END IF;
      IF pg_column_size(b) > 256 THEN
        RETURN (SELECT jsonb_object_agg(x.k, x.s) FROM (
          SELECT e.k, sum(e.v::bigint) AS s FROM (SELECT * FROM jsonb_each_text(a) UNION ALL SELECT * FROM jsonb_each_text(b)) AS e(k, v)
          GROUP BY e.k HAVING sum(e.v::bigint) <> 0
        ) AS x);
      END IF;
      FOR k, v IN SELECT * FROM jsonb_each_text(b) LOOP
        s := coalesce((a ->> k)::bigint, 0) + v::bigint;
        IF s = 0 THEN a := a - k; ELSE a := jsonb_set(a, ARRAY[k], to_jsonb(s)); END IF;
      END LOOP;
      IF a = '{}'::jsonb THEN RETURN NULL; END IF;
      RETURN a;
    END
    $$;

    -- Sums histograms (a month's, a range's).
    CREATE AGGREGATE report_hist_sum(jsonb) (SFUNC = report_hist_add, STYPE = jsonb);

    INSERT INTO report_zones (tenant_id, zone) SELECT id, 'UTC' FROM tenants;

    INSERT INTO report_tickets (tenant_id, ticket_id, team_id, agent_id, channel, priority, created_at, first_reply_at, frt_minutes, frt_business,
                                replies, reopens, resolved_at, res_minutes, res_business, sla_first_at, sla_first_met, sla_res_met)
    SELECT t.tenant_id, t.id, t.team_id, t.assignee_id, t.source, t.priority, t.created_at, e.first_reply_at, m.frt, m.frt,
           coalesce(e.replies, 0), coalesce(e.reopens, 0), r.resolved_at, m.res, m.res,
           t.first_responded_at, t.first_responded_at <= t.first_response_due,
           CASE WHEN r.resolved_at IS NOT NULL THEN CASE WHEN t.resolution_paused_at IS NOT NULL THEN coalesce(t.resolution_remaining_minutes, 0) > 0 ELSE r.resolved_at <= t.resolution_due END END
    FROM tickets t
    LEFT JOIN (
      SELECT tenant_id, ticket_id, min(created_at) FILTER (WHERE kind = 'reply') AS first_reply_at,
             count(*) FILTER (WHERE kind = 'reply') AS replies, count(*) FILTER (WHERE kind = 'reopen') AS reopens
      FROM ticket_events WHERE kind IN ('reply', 'reopen') AND NOT meta ? 'via_merge' GROUP BY 1, 2
    ) e ON e.tenant_id = t.tenant_id AND e.ticket_id = t.id
    CROSS JOIN LATERAL (SELECT CASE WHEN t.status IN ('solved', 'closed') THEN t.solved_at END AS resolved_at) r
    CROSS JOIN LATERAL (
      SELECT CASE WHEN e.first_reply_at IS NOT NULL THEN greatest(0, floor((extract(epoch FROM e.first_reply_at) - extract(epoch FROM t.created_at)) / 60))::int END AS frt,
             CASE WHEN r.resolved_at IS NOT NULL THEN greatest(0, floor((extract(epoch FROM r.resolved_at) - extract(epoch FROM t.created_at)) / 60))::int END AS res
    ) m;

    INSERT INTO report_journal (tenant_id, at, metric, team_id, agent_id, channel, priority, bucket, n, v)
    SELECT s.tenant_id, f.at, f.metric, s.team_id, s.agent_id, s.channel, s.priority, f.bucket, f.n, f.v
    FROM report_tickets s
    CROSS JOIN LATERAL (VALUES
      ('created', s.created_at, NULL::smallint, 1, 0::bigint),
      ('backlog', s.created_at, NULL, 1, 0),
      ('frt', s.first_reply_at, (width_bucket(s.frt_minutes, ${sql.lit(BOUNDS)}::int[]) - 1)::smallint, 1, s.frt_minutes),
      ('frt_b', s.first_reply_at, (width_bucket(s.frt_business, ${sql.lit(BOUNDS)}::int[]) - 1)::smallint, 1, s.frt_business),
      ('res', s.resolved_at, (width_bucket(s.res_minutes, ${sql.lit(BOUNDS)}::int[]) - 1)::smallint, 1, s.res_minutes),
      ('res_b', s.resolved_at, (width_bucket(s.res_business, ${sql.lit(BOUNDS)}::int[]) - 1)::smallint, 1, s.res_business),
      ('rpt', s.resolved_at, NULL, 1, s.replies),
      ('reo', s.resolved_at, NULL, CASE WHEN s.reopens > 0 THEN 1 ELSE 0 END, s.reopens),
      ('slar', s.resolved_at, NULL, 1, coalesce(s.sla_res_met::int, 0)),
      ('slaf', s.sla_first_at, NULL, 1, coalesce(s.sla_first_met::int, 0))
    ) AS f(metric, at, bucket, n, v)
    WHERE f.at IS NOT NULL AND (f.n <> 0 OR f.v <> 0);

    INSERT INTO report_journal (tenant_id, at, metric, team_id, agent_id, channel, priority, bucket, n, v)
    SELECT s.tenant_id, e.created_at, f.metric, s.team_id, f.agent_id, s.channel, s.priority, NULL, f.n, 0
    FROM ticket_events e
    JOIN report_tickets s ON s.tenant_id = e.tenant_id AND s.ticket_id = e.ticket_id
    CROSS JOIN LATERAL (SELECT
      (e.kind = 'status_changed' AND e.meta->>'from' IN ('open', 'pending', 'on_hold') AND e.meta->>'to' IN ('solved', 'closed'))::int AS resolves,
      CASE WHEN e.kind = 'status_changed' THEN (e.meta->>'to' IN ('open', 'pending', 'on_hold'))::int - (e.meta->>'from' IN ('open', 'pending', 'on_hold'))::int
           WHEN e.kind = 'merged' AND e.meta ? 'merged_into' THEN -(e.meta->>'from_status' IN ('open', 'pending', 'on_hold'))::int
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
    WHERE e.kind IN ('status_changed', 'merged', 'reopen', 'reply', 'internal_note') AND NOT e.meta ? 'via_merge' AND f.n <> 0;

    INSERT INTO report_journal (tenant_id, at, metric, team_id, agent_id, channel, priority, bucket, n, v)
    SELECT s.tenant_id, te.created_at, 'minutes', s.team_id, te.user_id, s.channel, s.priority, NULL, 1, te.minutes
    FROM time_entries te
    JOIN report_tickets s ON s.tenant_id = te.tenant_id AND s.ticket_id = te.ticket_id;
  `.execute(db);
}

/** The minute buckets' lower bounds as of this migration (src/domains/reports/buckets.ts makes the same list). */
const BOUNDS = (() => {
  const out: number[] = [];
  for (let m = 0; m < 64; m++) out.push(m);
  for (let e = 6; e <= 19; e++) for (let i = 0; i < 32; i++) out.push(2 ** e + i * 2 ** (e - 5));
  return `{${out.join(',')}}`;
})();

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP AGGREGATE report_hist_sum(jsonb);
    DROP FUNCTION report_hist_add(jsonb, jsonb);
    DROP TABLE report_days, report_journal, report_tickets, report_zones;
    ALTER TABLE tenants DROP COLUMN time_zone;
  `.execute(db);
}
