import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    -- Availability lives on the membership: it is per person per workspace, like role and status.
    ALTER TABLE memberships
      ADD COLUMN presence text NOT NULL DEFAULT 'offline' CHECK (presence IN ('online', 'away', 'offline')),
      ADD COLUMN presence_at timestamptz,
      ADD COLUMN helpdesk_unavailable boolean NOT NULL DEFAULT false;

    -- The rotation cursor: the position of the member chosen last. Locking the team row serialises turns.
    ALTER TABLE teams ADD COLUMN rr_last_position bigint NOT NULL DEFAULT 0;

    CREATE TABLE team_members (
      tenant_id uuid NOT NULL,
      team_id uuid NOT NULL,
      user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      position bigint NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (team_id, user_id),
      UNIQUE (team_id, position),
      FOREIGN KEY (tenant_id, team_id) REFERENCES teams (tenant_id, id) ON DELETE CASCADE
    );

    CREATE TABLE saved_views (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      owner_user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      name text NOT NULL,
      filters jsonb NOT NULL,
      shared boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX saved_views_visible ON saved_views (tenant_id, owner_user_id);

    CREATE TABLE macros (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      name text NOT NULL,
      description text NOT NULL DEFAULT '',
      actions jsonb NOT NULL,
      enabled boolean NOT NULL DEFAULT true,
      trigger jsonb,
      created_by_user_id uuid,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, id)
    );
    CREATE INDEX macros_triggered ON macros (tenant_id, (trigger->>'event')) WHERE enabled AND trigger IS NOT NULL;

    -- One row per (macro, ticket event): a triggered macro runs at most once per event, however often the job runs.
    CREATE TABLE macro_runs (
      tenant_id uuid NOT NULL,
      macro_id uuid NOT NULL,
      event_id uuid NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (macro_id, event_id),
      FOREIGN KEY (tenant_id, macro_id) REFERENCES macros (tenant_id, id) ON DELETE CASCADE
    );

    CREATE TABLE notifications (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      kind text NOT NULL,
      ticket_id uuid,
      body text NOT NULL DEFAULT '',
      meta jsonb NOT NULL DEFAULT '{}',
      read_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX notifications_inbox ON notifications (tenant_id, user_id, created_at DESC, id DESC);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE notifications, macro_runs, macros, saved_views, team_members;
    ALTER TABLE teams DROP COLUMN rr_last_position;
    ALTER TABLE memberships DROP COLUMN presence, DROP COLUMN presence_at, DROP COLUMN helpdesk_unavailable;
  `.execute(db);
}
