import { type Kysely, sql } from 'kysely';

/**
 * Per-dimension rollups at two grains. A 180-day read of the fine buckets summed tens of thousands of rows
 * (every agent × team × worked_on × billable × day). Unfiltered reads now sum one row per dimension key
 * per period: day grain for the days of the window's first month, month grain for every later month
 * (including the current one), a few thousand rows for any window. Filtered reads (user_id, team_id) use
 * the fine buckets through the indexes added here.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE time_dims (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      grain char(1) NOT NULL CHECK (grain IN ('d', 'm')),
      period date NOT NULL,
      dim text NOT NULL CHECK (dim IN ('agent', 'team', 'day')),
      key text,
      billable boolean NOT NULL,
      entries bigint NOT NULL,
      minutes bigint NOT NULL,
      -- The sums ride in the index, so a read is an index-only scan of two short ranges.
      CONSTRAINT time_dims_key UNIQUE NULLS NOT DISTINCT (tenant_id, grain, period, dim, key, billable) INCLUDE (entries, minutes)
    );
    CREATE TABLE csat_dims (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      grain char(1) NOT NULL CHECK (grain IN ('d', 'm')),
      period date NOT NULL,
      dim text NOT NULL CHECK (dim IN ('agent', 'score')),
      key text,
      responses bigint NOT NULL,
      score_sum bigint NOT NULL,
      CONSTRAINT csat_dims_key UNIQUE NULLS NOT DISTINCT (tenant_id, grain, period, dim, key) INCLUDE (responses, score_sum)
    );
    CREATE INDEX time_buckets_user ON time_buckets (tenant_id, user_id, day);
    CREATE INDEX time_buckets_team ON time_buckets (tenant_id, team_id, day);
    -- The window's edge day is read from raw rows: covering indexes make that an index-only scan, however
    -- scattered the rows of one day are in the heap.
    CREATE INDEX time_entries_window_cover ON time_entries (tenant_id, created_at) INCLUDE (user_id, team_id, worked_on, billable, minutes);
    DROP INDEX time_entries_window;
    CREATE INDEX csat_window_cover ON csat_responses (tenant_id, created_at) INCLUDE (assignee_id, score);
    DROP INDEX csat_window;

    INSERT INTO time_dims (tenant_id, grain, period, dim, key, billable, entries, minutes)
    SELECT b.tenant_id, g.grain, CASE WHEN g.grain = 'd' THEN b.day ELSE date_trunc('month', b.day)::date END, d.dim, d.key, b.billable, sum(b.entries), sum(b.minutes)
    FROM time_buckets b
    CROSS JOIN (VALUES ('d'), ('m')) AS g(grain)
    CROSS JOIN LATERAL (VALUES ('agent', b.user_id::text), ('team', b.team_id::text), ('day', b.worked_on::text)) AS d(dim, key)
    GROUP BY 1, 2, 3, 4, 5, 6;
    INSERT INTO csat_dims (tenant_id, grain, period, dim, key, responses, score_sum)
    SELECT b.tenant_id, g.grain, CASE WHEN g.grain = 'd' THEN b.day ELSE date_trunc('month', b.day)::date END, d.dim, d.key, sum(b.responses), sum(b.score * b.responses)
    FROM csat_buckets b
    CROSS JOIN (VALUES ('d'), ('m')) AS g(grain)
    CROSS JOIN LATERAL (VALUES ('agent', b.assignee_id::text), ('score', b.score::text)) AS d(dim, key)
    GROUP BY 1, 2, 3, 4, 5;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE time_dims, csat_dims;
    DROP INDEX time_buckets_user, time_buckets_team, time_entries_window_cover, csat_window_cover;
    CREATE INDEX csat_window ON csat_responses (tenant_id, created_at);
    CREATE INDEX time_entries_window ON time_entries (tenant_id, created_at);
  `.execute(db);
}
