import { type Kysely, sql } from 'kysely';

/**
 * Workspace settings, each its own column (so each is written on its own), provider keys one row per
 * provider (sealed), and the cap order enforced by the database: two writers changing the two caps at once
 * each re-check the row as it stands after the other, so neither can leave daily above monthly.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE tenants
      ADD COLUMN region text NOT NULL DEFAULT 'us' CHECK (region IN ('us', 'eu', 'ap')),
      ADD COLUMN default_model text CHECK (length(default_model) BETWEEN 1 AND 200),
      ADD COLUMN default_embedding_model text CHECK (length(default_embedding_model) BETWEEN 1 AND 200),
      ADD COLUMN daily_usd_cap numeric(14, 2) CHECK (daily_usd_cap >= 0),
      ADD COLUMN monthly_usd_cap numeric(14, 2) CHECK (monthly_usd_cap >= 0),
      ADD COLUMN deployment_mode text NOT NULL DEFAULT 'shared' CHECK (deployment_mode IN ('shared', 'dedicated', 'self_hosted')),
      ADD COLUMN onboarding jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(onboarding) = 'object'),
      ADD CONSTRAINT tenants_cap_order CHECK (daily_usd_cap IS NULL OR monthly_usd_cap IS NULL OR daily_usd_cap <= monthly_usd_cap);

    CREATE TABLE tenant_provider_keys (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      provider text NOT NULL CHECK (provider IN ('openai', 'anthropic', 'google', 'azure_openai', 'mistral', 'cohere')),
      key_sealed text NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, provider)
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE tenant_provider_keys;
    ALTER TABLE tenants DROP CONSTRAINT tenants_cap_order, DROP COLUMN region, DROP COLUMN default_model, DROP COLUMN default_embedding_model,
      DROP COLUMN daily_usd_cap, DROP COLUMN monthly_usd_cap, DROP COLUMN deployment_mode, DROP COLUMN onboarding;
  `.execute(db);
}
