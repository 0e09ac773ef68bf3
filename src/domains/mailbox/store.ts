import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { MailboxCheck, MailboxRow, OutboundEmailRow } from '../../db/types';
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

export async function insertOutbound(db: Executor, tenantId: string, o: { event_id: string; ticket_id: string }): Promise<void> {
  await db.insertInto('outbound_emails').values({ tenant_id: tenantId, ...o }).onConflict((oc) => oc.columns(['tenant_id', 'event_id']).doNothing()).execute();
}

/** The row, locked for the duration of the send; undefined when another run holds it (it is sending). */
export async function lockOutbound(db: Executor, tenantId: string, eventId: string): Promise<OutboundEmailRow | 'busy' | undefined> {
  const { rows } = await sql<OutboundEmailRow & { locked: boolean }>`
    select o.*, true as locked from outbound_emails o where o.tenant_id = ${tenantId} and o.event_id = ${eventId} for update skip locked`.execute(db);
  if (rows[0]) return rows[0];
  const exists = await db.selectFrom('outbound_emails').select('event_id').where('tenant_id', '=', tenantId).where('event_id', '=', eventId).executeTakeFirst();
  return exists ? 'busy' : undefined;
}

export async function updateOutbound(
  db: Executor,
  tenantId: string,
  eventId: string,
  u: { state?: OutboundEmailRow['state']; message_id?: string; provider_message_id?: string | null; attempts?: number; last_error?: string | null; sent?: boolean },
) {
  const { sent, ...cols } = u;
  await db
    .updateTable('outbound_emails')
    .set({ ...cols, ...(sent ? { sent_at: sql`now()` } : {}), updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('event_id', '=', eventId)
    .execute();
}

/** Successful sends since midnight UTC. */
export async function sentToday(db: Executor, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('outbound_emails')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .where('state', '=', 'sent')
    .where('sent_at', '>=', sql<Date>`date_trunc('day', now() at time zone 'UTC') at time zone 'UTC'`)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Sends still waiting a while after their reply committed (their job was lost, e.g. Redis was down). */
export async function crossTenantStaleOutbound(db: Executor, olderThanSeconds: number): Promise<{ tenant_id: string; event_id: string }[]> {
  return db
    .selectFrom('outbound_emails')
    .select(['tenant_id', 'event_id'])
    .where('state', '=', 'queued')
    .where('created_at', '<', sql<Date>`now() - make_interval(secs => ${olderThanSeconds})`)
    .limit(1000)
    .execute();
}

/** What a reply email needs: the reply, its ticket, the customer, and the Message-IDs of the thread (oldest first). */
/** Where a polled customer message sits in the connected mailbox (ticket event meta `mailbox`). */
export interface StoredMailboxRef {
  provider: string;
  address: string;
  message_id: string;
  thread_id?: string;
}

export async function replyContext(db: Executor, tenantId: string, eventId: string) {
  const row = await db
    .selectFrom('ticket_events as e')
    .innerJoin('tickets as t', (j) => j.onRef('t.tenant_id', '=', 'e.tenant_id').onRef('t.id', '=', 'e.ticket_id'))
    .innerJoin('customers as c', (j) => j.onRef('c.tenant_id', '=', 't.tenant_id').onRef('c.id', '=', 't.customer_id'))
    .select(['e.body', 'e.ticket_id', 't.subject', 'c.email', 'c.display_name'])
    .where('e.tenant_id', '=', tenantId)
    .where('e.id', '=', eventId)
    .executeTakeFirst();
  if (!row) return undefined;
  // The thread as written: the customers' Message-IDs (case kept, from their events) and ours, oldest first.
  // A customer's message also says its subject and, when the connected mailbox polled it, where it sits there.
  const { rows: thread } = await sql<{ message_id: string; inbound: boolean; subject: string | null; mailbox: StoredMailboxRef | null }>`
    select message_id, inbound, subject, mailbox from (
      select meta->>'message_id' as message_id, true as inbound, meta->>'subject' as subject, meta->'mailbox' as mailbox, created_at, seq
      from ticket_events
      where tenant_id = ${tenantId} and ticket_id = ${row.ticket_id} and kind = 'inbound_email' and meta ? 'message_id'
      union all
      select o.message_id, false, null, null, o.sent_at, 0
      from outbound_emails o
      where o.tenant_id = ${tenantId} and o.ticket_id = ${row.ticket_id} and o.state = 'sent' and o.message_id is not null
    ) t
    order by created_at, seq`.execute(db);
  const last = [...thread].reverse().find((t) => t.inbound);
  return {
    ...row,
    thread: thread.map((t) => t.message_id),
    lastInbound: last?.message_id ?? null,
    lastInboundSubject: last?.subject ?? null,
    lastInboundMailbox: last?.mailbox ?? null,
  };
}
