import { type Kysely, sql } from 'kysely';

/**
 * Routing rows (issue 20, the rest of "a schema Citus can distribute"). Six lookups run before the workspace
 * is known, keyed by what the request carries: an API key's prefix, a channel's inbound token, a help-centre
 * host, an OAuth state, a webhook integration's id, an agent's id. Four of those keys were unique across all
 * workspaces on tenant tables, which a database distributed by workspace cannot enforce. `routes` maps each
 * key to its workspace: a reference table (on every node), whose primary key is now what keeps these keys
 * unique; the tenant tables' constraints become per workspace. The stores write a route with the row it
 * routes to, in the same transaction, and remove it with the row.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE routes (
      kind text NOT NULL,
      key text NOT NULL,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      PRIMARY KEY (kind, key)
    );
    INSERT INTO routes (kind, key, tenant_id) SELECT 'api_key', prefix, tenant_id FROM api_keys;
    INSERT INTO routes (kind, key, tenant_id) SELECT 'inbound_token', encode(inbound_token_hash, 'hex'), tenant_id FROM channel_connections;
    INSERT INTO routes (kind, key, tenant_id) SELECT 'help_centre_host', full_host, tenant_id FROM help_centre_hosts;
    INSERT INTO routes (kind, key, tenant_id) SELECT 'oauth_state', encode(state_hash, 'hex'), tenant_id FROM oauth_states;
    INSERT INTO routes (kind, key, tenant_id) SELECT 'integration', id::text, tenant_id FROM integrations;
    INSERT INTO routes (kind, key, tenant_id) SELECT 'agent', id::text, tenant_id FROM agents;

    ALTER TABLE api_keys DROP CONSTRAINT api_keys_prefix_key, ADD CONSTRAINT api_keys_prefix_key UNIQUE (tenant_id, prefix);
    ALTER TABLE channel_connections DROP CONSTRAINT channel_connections_inbound_token_hash_key,
      ADD CONSTRAINT channel_connections_inbound_token_hash_key UNIQUE (tenant_id, inbound_token_hash);
    ALTER TABLE help_centre_hosts DROP CONSTRAINT help_centre_hosts_full_host_key, ADD CONSTRAINT help_centre_hosts_full_host_key UNIQUE (tenant_id, full_host);
    ALTER TABLE oauth_states DROP CONSTRAINT oauth_states_pkey, ADD CONSTRAINT oauth_states_pkey PRIMARY KEY (tenant_id, state_hash);
    -- 0028 kept these for lookups by id alone; the routes serve them now.
    DROP INDEX integrations_id;
    DROP INDEX agents_id;
  `.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('0029_routes is not reversible: restore from a backup taken before it');
}
