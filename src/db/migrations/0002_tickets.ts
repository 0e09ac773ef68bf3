import { type Kysely, sql } from 'kysely';

/*
 * The default SLA targets as they were when this migration was written, frozen here as literals. A migration
 * never imports live code (test/layering.test.ts): it runs once, on databases of every age, and must do the same
 * thing every time. Had it kept importing DEFAULT_SLA_TARGETS (src/domains/sla/targets.ts), a later change of
 * the live default would silently rewrite history: a database migrated after that change would get other
 * targets for its old workspaces than one migrated before it. A new default applies to new workspaces; moving
 * existing ones to it would be a migration of its own.
 */
const SLA_TARGETS_AT_0002 = {
  urgent: { first_response_minutes: 60, resolution_minutes: 240 },
  high: { first_response_minutes: 240, resolution_minutes: 1440 },
  normal: { first_response_minutes: 480, resolution_minutes: 2880 },
  low: { first_response_minutes: 1440, resolution_minutes: 5760 },
};

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE customers (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      display_name text NOT NULL,
      email text NOT NULL,
      company text NOT NULL DEFAULT '',
      country text NOT NULL DEFAULT '',
      metadata jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, id)
    );
    CREATE UNIQUE INDEX customers_email_key ON customers (tenant_id, lower(email));
    -- The directory's page read: newest first, ties by id, so pages never overlap or skip.
    CREATE INDEX customers_page ON customers (tenant_id, created_at DESC, id DESC);

    CREATE TABLE teams (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, id)
    );

    CREATE TABLE sla_policies (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      name text NOT NULL,
      is_default boolean NOT NULL DEFAULT false,
      targets jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, id)
    );
    CREATE UNIQUE INDEX sla_policies_one_default ON sla_policies (tenant_id) WHERE is_default;

    CREATE TABLE tickets (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      subject text NOT NULL,
      description text NOT NULL,
      status text NOT NULL CHECK (status IN ('open', 'pending', 'on_hold', 'solved', 'closed', 'spam', 'merged')),
      priority text NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
      source text NOT NULL,
      customer_id uuid NOT NULL,
      assignee_id uuid REFERENCES users(id) ON DELETE SET NULL,
      team_id uuid,
      tags text[] NOT NULL DEFAULT '{}',
      metadata jsonb NOT NULL DEFAULT '{}',
      sla_policy_id uuid NOT NULL,
      first_response_due timestamptz NOT NULL,
      resolution_due timestamptz NOT NULL,
      first_response_breached_at timestamptz,
      resolution_breached_at timestamptz,
      -- One flag for readers, derived so it can never disagree with the per-target breach times.
      sla_breached boolean GENERATED ALWAYS AS (first_response_breached_at IS NOT NULL OR resolution_breached_at IS NOT NULL) STORED,
      first_responded_at timestamptz,
      solved_at timestamptz,
      reopened_at timestamptz,
      merged_into_id uuid,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, id),
      FOREIGN KEY (tenant_id, customer_id) REFERENCES customers (tenant_id, id),
      FOREIGN KEY (tenant_id, team_id) REFERENCES teams (tenant_id, id),
      FOREIGN KEY (tenant_id, sla_policy_id) REFERENCES sla_policies (tenant_id, id),
      FOREIGN KEY (tenant_id, merged_into_id) REFERENCES tickets (tenant_id, id),
      -- merged is terminal and always names its winner; nothing else names one.
      CHECK ((status = 'merged') = (merged_into_id IS NOT NULL))
    );
    CREATE INDEX tickets_page ON tickets (tenant_id, created_at DESC, id DESC);
    CREATE INDEX tickets_status ON tickets (tenant_id, status, created_at DESC);
    CREATE INDEX tickets_assignee ON tickets (tenant_id, assignee_id) WHERE assignee_id IS NOT NULL;
    CREATE INDEX tickets_customer ON tickets (tenant_id, customer_id);
    CREATE INDEX tickets_tags ON tickets USING gin (tags);
    -- The SLA sweep looks only at tickets that still owe a response or a resolution.
    CREATE INDEX tickets_sla_open ON tickets (tenant_id, resolution_due)
      WHERE status IN ('open', 'pending', 'on_hold') AND resolution_breached_at IS NULL;

    CREATE TABLE ticket_events (
      id uuid PRIMARY KEY,
      seq bigserial NOT NULL,
      tenant_id uuid NOT NULL,
      ticket_id uuid NOT NULL,
      kind text NOT NULL,
      body text NOT NULL DEFAULT '',
      meta jsonb NOT NULL DEFAULT '{}',
      actor_type text NOT NULL CHECK (actor_type IN ('customer', 'user', 'system', 'agent')),
      actor_user_id uuid,
      actor_name text,
      created_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (tenant_id, ticket_id) REFERENCES tickets (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX ticket_events_timeline ON ticket_events (tenant_id, ticket_id, created_at, seq);

    CREATE TABLE time_entries (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL,
      ticket_id uuid NOT NULL,
      user_id uuid,
      team_id uuid,
      minutes integer NOT NULL CHECK (minutes BETWEEN 1 AND 1440),
      billable boolean NOT NULL DEFAULT true,
      worked_on date,
      created_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (tenant_id, ticket_id) REFERENCES tickets (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX time_entries_ticket ON time_entries (tenant_id, ticket_id);

    CREATE TABLE todos (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL,
      ticket_id uuid NOT NULL,
      title text NOT NULL,
      assignee_id uuid,
      due_at timestamptz,
      done_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (tenant_id, ticket_id) REFERENCES tickets (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX todos_ticket ON todos (tenant_id, ticket_id);

    -- Workspaces that existed before SLA policies get the same default a new workspace gets.
    INSERT INTO sla_policies (id, tenant_id, name, is_default, targets)
    SELECT gen_random_uuid(), id, 'Default', true, ${sql.lit(JSON.stringify(SLA_TARGETS_AT_0002))}::jsonb FROM tenants;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE todos, time_entries, ticket_events, tickets, sla_policies, teams, customers`.execute(db);
}
