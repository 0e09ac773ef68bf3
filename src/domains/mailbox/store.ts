import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { MailboxCheck, MailboxRow } from '../../db/types';
import { addRoute, crossTenantDropRoutes, crossTenantRoute, hexKey } from '../routing/store';

export async function insertState(db: Executor, tenantId: string, s: { hash: Buffer; userId: string; provider: string; expiresAt: Date }) {
  await addRoute(db, tenantId, 'oauth_state', hexKey(s.hash));
  await db.insertInto('oauth_states').values({ state_hash: s.hash, tenant_id: tenantId, user_id: s.userId, provider: s.provider, expires_at: s.expiresAt }).execute();
}

/**
 * The state row, locked, whatever workspace it belongs to: the caller must see a foreign state to refuse it
 * as a mismatch (and leave it unconsumed). This is the one lookup not scoped by the caller's workspace.
 */
export async function crossTenantLockOAuthState(db: Executor, hash: Buffer) {
  const tenantId = await crossTenantRoute(db, 'oauth_state', hexKey(hash));
  if (!tenantId) return undefined;
  return db.selectFrom('oauth_states').selectAll().where('tenant_id', '=', tenantId).where('state_hash', '=', hash).forUpdate().executeTakeFirst();
}

export async function consumeState(db: Executor, tenantId: string, hash: Buffer) {
  await db.updateTable('oauth_states').set({ used_at: sql`now()` }).where('tenant_id', '=', tenantId).where('state_hash', '=', hash).execute();
}

export async function crossTenantPruneOAuthStates(db: Executor, olderThan: Date) {
  const gone = await db.deleteFrom('oauth_states').where('expires_at', '<', olderThan).returning('state_hash').execute();
  await crossTenantDropRoutes(db, 'oauth_state', gone.map((g) => hexKey(g.state_hash)));
}

export async function getMailbox(db: Executor, tenantId: string): Promise<MailboxRow | undefined> {
  return db.selectFrom('mailboxes').selectAll().where('tenant_id', '=', tenantId).executeTakeFirst();
}

/** The mailbox locked for a change whose before and after are compared (its health). */
export async function lockMailbox(db: Executor, tenantId: string): Promise<MailboxRow | undefined> {
  return db.selectFrom('mailboxes').selectAll().where('tenant_id', '=', tenantId).forUpdate().executeTakeFirst();
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
/** The mailboxes due for a check, each with the database time of this read (the clock last_checked_at uses). */
export async function crossTenantDueForRefresh(db: Executor, intervalSeconds: number): Promise<{ tenant_id: string; as_of: Date }[]> {
  return db
    .selectFrom('mailboxes')
    .select(['tenant_id', sql<Date>`now()`.as('as_of')])
    .where('connected', '=', true)
    .where((eb) => eb.or([eb('last_checked_at', 'is', null), eb('last_checked_at', '<', sql<Date>`now() - make_interval(secs => ${intervalSeconds})`)]))
    .execute();
}

/** Replaces one check (the poller owns inbound_polling, the sender daily_send_quota) without touching the others. */
export async function setCheck(db: Executor, tenantId: string, check: MailboxCheck, extra: { connected?: boolean; inbound_cursor?: string; polled?: boolean } = {}) {
  await db
    .updateTable('mailboxes')
    .set({
      checks: sql`coalesce((select jsonb_agg(c) from jsonb_array_elements(checks) c where c->>'check' <> ${check.check}), '[]'::jsonb) || jsonb_build_array(${JSON.stringify(check)}::jsonb)` as unknown as string,
      ...(extra.connected === false ? { connected: false, sendable: false } : {}),
      ...(extra.inbound_cursor !== undefined ? { inbound_cursor: extra.inbound_cursor } : {}),
      ...(extra.polled ? { last_polled_at: sql`now()` } : {}),
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .execute();
}

export async function crossTenantDueForPoll(db: Executor, intervalSeconds: number): Promise<string[]> {
  const rows = await db
    .selectFrom('mailboxes')
    .select('tenant_id')
    .where('connected', '=', true)
    .where('polling', '=', true)
    .where((eb) => eb.or([eb('last_polled_at', 'is', null), eb('last_polled_at', '<', sql<Date>`now() - make_interval(secs => ${intervalSeconds})`)]))
    .execute();
  return rows.map((r) => r.tenant_id);
}

/**
 * Sends through the connected mailbox since midnight UTC: sent (and later delivered or read), plus those whose
 * outcome is unknown (they may have counted). Rows from before the outbox had a sender were all mailbox sends.
 */
export async function sentToday(db: Executor, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('outbound_messages')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .where('channel', '=', 'email')
    .where((eb) => eb.or([eb('sender', 'is', null), eb('sender', 'in', ['google', 'microsoft'])]))
    .where('state', 'in', ['sent', 'delivered', 'read', 'unknown'])
    // An unknown send has no sent_at: it counts from when it was claimed (it may have gone out then).
    .where(sql<Date>`coalesce(sent_at, claimed_at)`, '>=', sql<Date>`date_trunc('day', now() at time zone 'UTC') at time zone 'UTC'`)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Where a polled customer message sits in the connected mailbox (ticket event meta `mailbox`). */
export interface StoredMailboxRef {
  provider: string;
  address: string;
  message_id: string;
  thread_id?: string;
}
