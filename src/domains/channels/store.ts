import { sql } from 'kysely';
import type { Executor } from '../../db';
import { addRoute, hexKey, removeRoute } from '../routing/store';
import type { ChannelConnectionRow } from '../../db/types';

/** Replace semantics: config is written wholesale. Returns whether the row was created by this call. */
export async function upsertConnection(
  db: Executor,
  tenantId: string,
  c: { channel: string; display_name: string; enabled: boolean; config: Record<string, unknown>; secrets_sealed: string | null; inbound_token_hash: Buffer; inbound_token_sealed: string },
): Promise<ChannelConnectionRow & { inserted: boolean }> {
  const row = await db
    .insertInto('channel_connections')
    .values({ ...c, tenant_id: tenantId, config: JSON.stringify(c.config) })
    .onConflict((oc) =>
      oc.columns(['tenant_id', 'channel']).doUpdateSet({
        display_name: (eb) => eb.ref('excluded.display_name'),
        enabled: (eb) => eb.ref('excluded.enabled'),
        config: (eb) => eb.ref('excluded.config'),
        secrets_sealed: (eb) => eb.ref('excluded.secrets_sealed'),
        updated_at: sql`now()`,
      }),
    )
    .returningAll()
    .returning(sql<boolean>`(xmax = 0)`.as('inserted'))
    .executeTakeFirstOrThrow();
  // A new connection's token routes to the workspace; an existing one keeps its token (and its route).
  if (row.inserted) await routeToken(db, tenantId, row.inbound_token_hash);
  return row;
}

/** Tokens are random 32 bytes: a taken route is a collision no caller can cause, so it fails loudly. */
async function routeToken(db: Executor, tenantId: string, hash: Buffer) {
  if (!(await addRoute(db, tenantId, 'inbound_token', hexKey(hash)))) throw new Error('inbound token already routed');
}

export async function listConnections(db: Executor, tenantId: string): Promise<ChannelConnectionRow[]> {
  return db.selectFrom('channel_connections').selectAll().where('tenant_id', '=', tenantId).execute();
}

/** A new token: the old one's route goes with it (it stops working at once), the new one routes here. */
export async function setTokenHash(db: Executor, tenantId: string, channel: string, hash: Buffer, sealed: string): Promise<boolean> {
  const old = await db
    .selectFrom('channel_connections')
    .select('inbound_token_hash')
    .where('tenant_id', '=', tenantId)
    .where('channel', '=', channel)
    .forUpdate()
    .executeTakeFirst();
  if (!old) return false;
  await db.updateTable('channel_connections').set({ inbound_token_hash: hash, inbound_token_sealed: sealed, updated_at: sql`now()` }).where('tenant_id', '=', tenantId).where('channel', '=', channel).execute();
  await removeRoute(db, tenantId, 'inbound_token', hexKey(old.inbound_token_hash));
  await routeToken(db, tenantId, hash);
  return true;
}

/*
 * Public intake resolves the workspace from what the provider sent, before any tenant is known: these two
 * lookups are keyed by the token or by (tenant, channel) and return only enabled connections.
 */
export async function crossTenantConnectionByToken(db: Executor, tokenHash: Buffer) {
  return db
    .selectFrom('routes as r')
    .innerJoin('channel_connections as c', (j) => j.onRef('c.tenant_id', '=', 'r.tenant_id').on('c.inbound_token_hash', '=', tokenHash))
    .select(['c.tenant_id', 'c.channel'])
    .where('r.kind', '=', 'inbound_token')
    .where('r.key', '=', hexKey(tokenHash))
    .where('c.enabled', '=', true)
    .executeTakeFirst();
}

/** The origins an enabled web chat connection (found by its inbound token) lets browsers post from. */
export async function crossTenantWebChatOrigins(db: Executor, tokenHash: Buffer): Promise<string[]> {
  const row = await db
    .selectFrom('routes as r')
    .innerJoin('channel_connections as c', (j) => j.onRef('c.tenant_id', '=', 'r.tenant_id').on('c.inbound_token_hash', '=', tokenHash))
    .select('c.config')
    .where('r.kind', '=', 'inbound_token')
    .where('r.key', '=', hexKey(tokenHash))
    .where('c.channel', '=', 'web_chat')
    .where('c.enabled', '=', true)
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
export async function insertIfAbsent(db: Executor, tenantId: string, c: { channel: string; display_name: string; inbound_token_hash: Buffer; inbound_token_sealed: string }) {
  const r = await db
    .insertInto('channel_connections')
    .values({ ...c, tenant_id: tenantId, enabled: true, config: '{}' })
    .onConflict((oc) => oc.columns(['tenant_id', 'channel']).doNothing())
    .executeTakeFirst();
  if (Number(r.numInsertedOrUpdatedRows ?? 0) === 1) await routeToken(db, tenantId, c.inbound_token_hash);
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

/** A connection as a sender or a provider hook needs it: enabled, config, sealed credentials and token. */
export async function connectionFor(db: Executor, tenantId: string, channel: string, lock = false) {
  const q = db
    .selectFrom('channel_connections')
    .select(['channel', 'enabled', 'config', 'secrets_sealed', 'inbound_token_sealed'])
    .where('tenant_id', '=', tenantId)
    .where('channel', '=', channel);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

/** Whether the workspace's connected mailbox can send (the email channel's first choice of sender). */
export async function mailboxSends(db: Executor, tenantId: string): Promise<boolean> {
  const row = await db.selectFrom('mailboxes').select(['connected', 'sendable']).where('tenant_id', '=', tenantId).executeTakeFirst();
  return row !== undefined && row.connected && row.sendable;
}
