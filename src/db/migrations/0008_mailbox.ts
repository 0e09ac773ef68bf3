import { type Kysely, sql } from 'kysely';

/**
 * The connected mailbox (one per workspace) and the single-use OAuth states that lead to it. Tokens are
 * stored sealed (AES-256-GCM, src/lib/crypto.ts), never in clear; a state is stored as its hash.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE oauth_states (
      state_hash bytea PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      user_id uuid NOT NULL,
      provider text NOT NULL,
      expires_at timestamptz NOT NULL,
      used_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX oauth_states_expiry ON oauth_states (expires_at);

    CREATE TABLE mailboxes (
      tenant_id uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
      provider text NOT NULL,
      email_address text NOT NULL,
      scopes text[] NOT NULL DEFAULT '{}',
      access_token_sealed text NOT NULL,
      refresh_token_sealed text,
      access_expires_at timestamptz NOT NULL,
      -- connected: the grant works (false once the provider says it was revoked); sendable: it may send.
      connected boolean NOT NULL DEFAULT true,
      sendable boolean NOT NULL DEFAULT false,
      polling boolean NOT NULL DEFAULT true,
      inbound_cursor text,
      checks jsonb NOT NULL DEFAULT '[]',
      connected_at timestamptz NOT NULL DEFAULT now(),
      healthy_at timestamptz,
      last_polled_at timestamptz,
      last_checked_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now()
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE mailboxes, oauth_states`.execute(db);
}
