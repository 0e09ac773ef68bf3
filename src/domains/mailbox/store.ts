import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { MailboxCheck, MailboxRow } from '../../db/types';

export async function insertState(db: Executor, tenantId: string, s: { hash: Buffer; userId: string; provider: string; expiresAt: Date }) {
  await db.insertInto('oauth_states').values({ state_hash: s.hash, tenant_id: tenantId, user_id: s.userId, provider: s.provider, expires_at: s.expiresAt }).execute();
}

/**
 * The state row, locked, whatever workspace it belongs to: the caller must see a foreign state to refuse it
 * as a mismatch (and leave it unconsumed). This is the one lookup not scoped by the caller's workspace.
 */
export async function lockState(db: Executor, hash: Buffer) {
  return db.selectFrom('oauth_states').selectAll().where('state_hash', '=', hash).forUpdate().executeTakeFirst();
}

export async function consumeState(db: Executor, tenantId: string, hash: Buffer) {
  await db.updateTable('oauth_states').set({ used_at: sql`now()` }).where('tenant_id', '=', tenantId).where('state_hash', '=', hash).execute();
}

export async function pruneStates(db: Executor, olderThan: Date) {
  await db.deleteFrom('oauth_states').where('expires_at', '<', olderThan).execute();
}

export async function getMailbox(db: Executor, tenantId: string): Promise<MailboxRow | undefined> {
  return db.selectFrom('mailboxes').selectAll().where('tenant_id', '=', tenantId).executeTakeFirst();
}

/** A new grant replaces whatever was connected: new tokens, new address, cursor and checks reset. */
export async function upsertMailbox(
  db: Executor,
  tenantId: string,
  m: { provider: string; email_address: string; scopes: string[]; access_token_sealed: string; refresh_token_sealed: string | null; access_expires_at: Date },
) {
  const fresh = { ...m, connected: true, inbound_cursor: null, checks: '[]', connected_at: new Date(), healthy_at: null, last_polled_at: null, last_checked_at: null, updated_at: new Date() };
  await db
    .insertInto('mailboxes')
    .values({ tenant_id: tenantId, ...fresh })
    .onConflict((oc) => oc.column('tenant_id').doUpdateSet(fresh))
    .execute();
}

export async function updateTokens(db: Executor, tenantId: string, t: { access_token_sealed: string; refresh_token_sealed?: string; access_expires_at: Date; scopes: string[] }) {
  await db.updateTable('mailboxes').set({ ...t, updated_at: sql`now()` }).where('tenant_id', '=', tenantId).execute();
}

export async function recordChecks(
  db: Executor,
  tenantId: string,
  r: { connected: boolean; sendable: boolean; checks: MailboxCheck[]; healthy: boolean; email_address?: string },
) {
  await db
    .updateTable('mailboxes')
    .set({
      connected: r.connected,
      sendable: r.sendable,
      checks: JSON.stringify(r.checks),
      last_checked_at: sql`now()`,
      ...(r.healthy ? { healthy_at: sql`now()` } : {}),
      ...(r.email_address ? { email_address: r.email_address } : {}),
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .execute();
}

/** Connected mailboxes whose last check is older than the interval (or that were never checked). */
export async function dueForRefresh(db: Executor, intervalSeconds: number): Promise<string[]> {
  const rows = await db
    .selectFrom('mailboxes')
    .select('tenant_id')
    .where('connected', '=', true)
    .where((eb) => eb.or([eb('last_checked_at', 'is', null), eb('last_checked_at', '<', sql<Date>`now() - make_interval(secs => ${intervalSeconds})`)]))
    .execute();
  return rows.map((r) => r.tenant_id);
}
