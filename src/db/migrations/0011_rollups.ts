import { type Kysely, sql } from 'kysely';

/**
 * Rollups of time, todos and satisfaction. Source writes append signed deltas to rollup_journal in their
 * own transaction; the rollups worker folds the journal into day buckets. A read sums the buckets and the
 * journal for the whole days of its window and takes the partial edge day from the raw rows, all in one
 * snapshot, so it is exact whether or not the worker has caught up.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE csat_responses (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL,
      ticket_id uuid NOT NULL,
      -- The ticket's assignee when the response came in: the agent it rates, whoever holds the ticket later.
      assignee_id uuid,
      score smallint NOT NULL CHECK (score BETWEEN 1 AND 5),
      comment text NOT NULL DEFAULT '',
      created_by_user_id uuid,
      created_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (tenant_id, ticket_id) REFERENCES tickets (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX csat_window ON csat_responses (tenant_id, created_at);
    CREATE INDEX time_entries_window ON time_entries (tenant_id, created_at);
    CREATE INDEX todos_window ON todos (tenant_id, created_at);

    CREATE TABLE rollup_journal (
      id bigserial PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('time', 'csat')),
      day date NOT NULL,
      user_id uuid,
      team_id uuid,
      worked_on date,
      billable boolean,
      score smallint,
      entries integer NOT NULL,
      minutes integer NOT NULL DEFAULT 0
    );
    CREATE INDEX rollup_journal_tenant ON rollup_journal (tenant_id, kind, day);

    CREATE TABLE time_buckets (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      day date NOT NULL,
      user_id uuid,
      team_id uuid,
      worked_on date,
      billable boolean NOT NULL,
      entries bigint NOT NULL,
      minutes bigint NOT NULL,
      CONSTRAINT time_buckets_key UNIQUE NULLS NOT DISTINCT (tenant_id, day, user_id, team_id, worked_on, billable)
    );

    CREATE TABLE csat_buckets (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      day date NOT NULL,
      assignee_id uuid,
      score smallint NOT NULL,
      responses bigint NOT NULL,
      CONSTRAINT csat_buckets_key UNIQUE NULLS NOT DISTINCT (tenant_id, day, assignee_id, score)
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE csat_buckets, time_buckets, rollup_journal, csat_responses;
    DROP INDEX time_entries_window, todos_window;
  `.execute(db);
}
