import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { AttachmentRow, AttachmentsTable } from '../../db/types';
import type { Insertable } from 'kysely';

/** The files domain's SQL (issue 34): attachment rows and the per-workspace usage counter. */

export type NewAttachment = Omit<Insertable<AttachmentsTable>, 'tenant_id'>;
export type StateChange = Partial<Pick<AttachmentRow, 'state' | 'reason' | 'size' | 'sha256' | 'content_type' | 'stored_at'>>;

export async function insertAttachment(db: Executor, tenantId: string, row: NewAttachment): Promise<AttachmentRow> {
  return db.insertInto('attachments').values({ ...row, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

export async function getAttachment(db: Executor, tenantId: string, id: string): Promise<AttachmentRow | undefined> {
  return db.selectFrom('attachments').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

export async function updateAttachment(db: Executor, tenantId: string, id: string, change: StateChange): Promise<AttachmentRow | undefined> {
  return db.updateTable('attachments').set(change).where('tenant_id', '=', tenantId).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function deleteAttachment(db: Executor, tenantId: string, id: string): Promise<void> {
  await db.deleteFrom('attachments').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
}

/** The files of some events, in the order they were added. */
export async function attachmentsOfEvents(db: Executor, tenantId: string, eventIds: string[]): Promise<AttachmentRow[]> {
  if (eventIds.length === 0) return [];
  return db
    .selectFrom('attachments')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('event_id', 'in', eventIds)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

/** Uploads named by their tokens' hashes, locked until the write that binds them commits (or rolls back). */
export async function lockUploads(db: Executor, tenantId: string, tokenHashes: string[]): Promise<AttachmentRow[]> {
  if (tokenHashes.length === 0) return [];
  return db
    .selectFrom('attachments')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('upload_token_hash', 'in', tokenHashes)
    .orderBy('id')
    .forUpdate()
    .execute();
}

/** Uploads named by their tokens' hashes, as they are now (a check before a write that locks them again). */
export async function uploadsByTokenHash(db: Executor, tenantId: string, tokenHashes: string[]): Promise<AttachmentRow[]> {
  if (tokenHashes.length === 0) return [];
  return db.selectFrom('attachments').selectAll().where('tenant_id', '=', tenantId).where('upload_token_hash', 'in', tokenHashes).execute();
}

/** Attachments by id, locked until the write that binds them commits (or rolls back). */
export async function lockAttachments(db: Executor, tenantId: string, ids: string[]): Promise<AttachmentRow[]> {
  if (ids.length === 0) return [];
  return db.selectFrom('attachments').selectAll().where('tenant_id', '=', tenantId).where('id', 'in', ids).orderBy('id').forUpdate().execute();
}

/** Uploads bound to the event being written: the token is spent (its hash cleared), the expiry gone. */
export async function bindUploads(db: Executor, tenantId: string, ids: string[], to: { ticketId: string; eventId: string; internal: boolean }): Promise<AttachmentRow[]> {
  if (ids.length === 0) return [];
  return db
    .updateTable('attachments')
    .set({ ticket_id: to.ticketId, event_id: to.eventId, internal: to.internal, upload_token_hash: null, expires_at: null })
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', ids)
    .returningAll()
    .execute();
}

/**
 * A merge copies the source's events to the winner: their files follow the copies (ticket and event), so the
 * winner's timeline lists them and reach follows the live ticket. The bytes and the usage count do not change.
 */
export async function followMerge(db: Executor, tenantId: string, sourceTicketId: string, targetTicketId: string, moves: { from: string; to: string }[]): Promise<number> {
  if (moves.length === 0) return 0;
  const { rows } = await sql<{ id: string }>`
    UPDATE attachments a SET ticket_id = ${targetTicketId}, event_id = m.to_id
    FROM unnest(${moves.map((m) => m.from)}::uuid[], ${moves.map((m) => m.to)}::uuid[]) AS m(from_id, to_id)
    WHERE a.tenant_id = ${tenantId} AND a.ticket_id = ${sourceTicketId} AND a.event_id = m.from_id
    RETURNING a.id`.execute(db);
  return rows.length;
}

/** The workspace's bytes held, without a lock (a quick refusal before any byte of an upload is read). */
export async function usage(db: Executor, tenantId: string): Promise<{ bytes: number; quota_reached_at: Date | null }> {
  const row = await db.selectFrom('file_usage').select(['bytes', 'quota_reached_at']).where('tenant_id', '=', tenantId).executeTakeFirst();
  return row ?? { bytes: 0, quota_reached_at: null };
}

/** The workspace's usage row, locked for the quota decision of one file (made if absent). */
export async function lockUsage(db: Executor, tenantId: string): Promise<{ bytes: number; quota_reached_at: Date | null }> {
  await db.insertInto('file_usage').values({ tenant_id: tenantId, bytes: 0 }).onConflict((oc) => oc.column('tenant_id').doNothing()).execute();
  return db.selectFrom('file_usage').select(['bytes', 'quota_reached_at']).where('tenant_id', '=', tenantId).forUpdate().executeTakeFirstOrThrow();
}

/** Marks (or clears) that `files.quota_reached` went out for the workspace. */
export async function setQuotaReached(db: Executor, tenantId: string, at: Date | null): Promise<void> {
  await db.updateTable('file_usage').set({ quota_reached_at: at }).where('tenant_id', '=', tenantId).execute();
}

// ------------------------------------------------------------------------------------------------ sweeps

/**
 * Removes up to `limit` unused uploads past their expiry, across workspaces, and answers what their bytes were.
 * One statement over the small partial index of unbound rows; rows another sweep holds are skipped.
 */
export async function crossTenantDeleteExpiredUploads(db: Executor, limit: number): Promise<{ tenant_id: string; id: string; storage_key: string }[]> {
  const { rows } = await sql<{ tenant_id: string; id: string; storage_key: string }>`
    DELETE FROM attachments a
    USING (
      SELECT tenant_id, id FROM attachments
      WHERE event_id IS NULL AND source = 'upload' AND expires_at < now()
      ORDER BY expires_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    ) gone
    WHERE a.tenant_id = gone.tenant_id AND a.id = gone.id
    RETURNING a.tenant_id, a.id, a.storage_key`.execute(db);
  return rows;
}

/**
 * Of the listed objects (tenant and key, from the store's listing), those that no row holds: no row has the key,
 * or its row says there are no bytes (skipped, failed). One statement, an index probe per key.
 */
export async function crossTenantUnheldKeys(db: Executor, objects: { tenant_id: string; key: string }[]): Promise<string[]> {
  if (objects.length === 0) return [];
  const { rows } = await sql<{ key: string }>`
    SELECT o.key FROM unnest(${objects.map((o) => o.tenant_id)}::uuid[], ${objects.map((o) => o.key)}::text[]) AS o(tenant_id, key)
    WHERE NOT EXISTS (
      SELECT 1 FROM attachments a
      WHERE a.tenant_id = o.tenant_id AND a.storage_key = o.key AND a.state IN ('pending', 'stored', 'infected')
    )
    -- A customer export's file (issue 38) is held by its customer_jobs row until the exports sweep clears the key.
    AND NOT EXISTS (SELECT 1 FROM customer_jobs j WHERE j.tenant_id = o.tenant_id AND j.file_key = o.key)`.execute(db);
  return rows.map((r) => r.key);
}

/**
 * Rows that should have bytes (stored, infected), stored before `storedBefore`, whose (tenant, key) lies after
 * `from` and at or before `to` (null: open on that side), in key order, at most `limit`: what the orphan sweep
 * compares with the same stretch of the store's listing. The range is a scan of the (tenant_id, storage_key)
 * unique index.
 */
export async function crossTenantHeldBetween(
  db: Executor,
  range: { from: { tenant_id: string; key: string } | null; to: { tenant_id: string; key: string } | null; storedBefore: Date; limit: number },
): Promise<{ tenant_id: string; id: string; ticket_id: string | null; storage_key: string }[]> {
  const { from, to } = range;
  const { rows } = await sql<{ tenant_id: string; id: string; ticket_id: string | null; storage_key: string }>`
    SELECT tenant_id, id, ticket_id, storage_key FROM attachments
    WHERE state IN ('stored', 'infected') AND stored_at < ${range.storedBefore}
      ${from ? sql`AND (tenant_id, storage_key) > (${from.tenant_id}::uuid, ${from.key})` : sql``}
      ${to ? sql`AND (tenant_id, storage_key) <= (${to.tenant_id}::uuid, ${to.key})` : sql``}
    ORDER BY tenant_id, storage_key
    LIMIT ${range.limit}`.execute(db);
  return rows;
}

/** Rows whose bytes are gone, marked failed with the reason (only while still stored or infected). */
export async function crossTenantMarkMissing(db: Executor, rows: { tenant_id: string; id: string }[], reason: string): Promise<{ tenant_id: string; id: string; ticket_id: string | null }[]> {
  if (rows.length === 0) return [];
  const { rows: marked } = await sql<{ tenant_id: string; id: string; ticket_id: string | null }>`
    UPDATE attachments a SET state = 'failed', reason = ${reason}
    FROM unnest(${rows.map((r) => r.tenant_id)}::uuid[], ${rows.map((r) => r.id)}::uuid[]) AS m(tenant_id, id)
    WHERE a.tenant_id = m.tenant_id AND a.id = m.id AND a.state IN ('stored', 'infected')
    RETURNING a.tenant_id, a.id, a.ticket_id`.execute(db);
  return marked;
}
