import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { ChannelConnectionRow } from '../../db/types';

/** Replace semantics: config is written wholesale. Returns whether the row was created by this call. */
export async function upsertConnection(
  db: Executor,
  tenantId: string,
  c: { channel: string; display_name: string; enabled: boolean; config: Record<string, unknown>; inbound_token_hash: Buffer },
): Promise<ChannelConnectionRow & { inserted: boolean }> {
  return db
    .insertInto('channel_connections')
    .values({ ...c, tenant_id: tenantId, config: JSON.stringify(c.config) })
    .onConflict((oc) =>
      oc.columns(['tenant_id', 'channel']).doUpdateSet({
        display_name: (eb) => eb.ref('excluded.display_name'),
        enabled: (eb) => eb.ref('excluded.enabled'),
        config: (eb) => eb.ref('excluded.config'),
        updated_at: sql`now()`,
      }),
    )
    .returningAll()
    .returning(sql<boolean>`(xmax = 0)`.as('inserted'))
    .executeTakeFirstOrThrow();
}

export async function listConnections(db: Executor, tenantId: string): Promise<ChannelConnectionRow[]> {
  return db.selectFrom('channel_connections').selectAll().where('tenant_id', '=', tenantId).execute();
}

export async function setTokenHash(db: Executor, tenantId: string, channel: string, hash: Buffer): Promise<boolean> {
  const r = await db
    .updateTable('channel_connections')
    .set({ inbound_token_hash: hash, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('channel', '=', channel)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/*
 * Public intake resolves the workspace from what the provider sent, before any tenant is known: these two
 * lookups are keyed by the token or by (tenant, channel) and return only enabled connections.
 */
export async function crossTenantConnectionByToken(db: Executor, tokenHash: Buffer) {
  return db
    .selectFrom('channel_connections')
    .select(['tenant_id', 'channel'])
    .where('inbound_token_hash', '=', tokenHash)
    .where('enabled', '=', true)
    .executeTakeFirst();
}

/** The origins an enabled web chat connection (found by its inbound token) lets browsers post from. */
export async function crossTenantWebChatOrigins(db: Executor, tokenHash: Buffer): Promise<string[]> {
  const row = await db
    .selectFrom('channel_connections')
    .select('config')
    .where('inbound_token_hash', '=', tokenHash)
    .where('channel', '=', 'web_chat')
    .where('enabled', '=', true)
    .executeTakeFirst();
  const origins = (row?.config as { allowed_origins?: unknown } | undefined)?.allowed_origins;
  return Array.isArray(origins) ? origins.filter((o): o is string => typeof o === 'string') : [];
}

/**
 * Of these deliveries, those whose channel is connected and enabled in the workspace and, for one that came
 * with an inbound token, whose token is still the connection's.
 */
export async function connectedDeliveries(db: Executor, tenantId: string, ds: { id: string; channel: string; token_hash?: string }[]): Promise<Set<string>> {
  if (ds.length === 0) return new Set();
  const { rows } = await sql<{ id: string }>`
    select u.id
    from unnest(${ds.map((d) => d.id)}::text[], ${ds.map((d) => d.channel)}::text[], ${ds.map((d) => d.token_hash ?? null)}::text[]) as u(id, channel, token_hash)
    join channel_connections c on c.tenant_id = ${tenantId} and c.channel = u.channel and c.enabled
      and (u.token_hash is null or c.inbound_token_hash = decode(u.token_hash, 'hex'))`.execute(db);
  return new Set(rows.map((r) => r.id));
}

/** Creates the connection when the workspace has none; an existing one (even disabled) is left as it is. */
export async function insertIfAbsent(db: Executor, tenantId: string, c: { channel: string; display_name: string; inbound_token_hash: Buffer }) {
  await db
    .insertInto('channel_connections')
    .values({ ...c, tenant_id: tenantId, enabled: true, config: '{}' })
    .onConflict((oc) => oc.columns(['tenant_id', 'channel']).doNothing())
    .execute();
}

export async function enabledConnection(db: Executor, tenantId: string, channel: string) {
  return db
    .selectFrom('channel_connections')
    .select(['tenant_id', 'channel'])
    .where('tenant_id', '=', tenantId)
    .where('channel', '=', channel)
    .where('enabled', '=', true)
    .executeTakeFirst();
}
