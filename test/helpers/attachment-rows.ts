import { sql } from 'kysely';
import type { Db } from '../../src/db';
import { eventually } from './wait';

/** A ticket's file rows as the inbound-file suites read them, in the order they were created. */
export interface AttachmentRow {
  id: string;
  event_id: string;
  ticket_id: string;
  name: string;
  content_type: string;
  size: number;
  sha256: string | null;
  state: string;
  reason: string | null;
  content_id: string | null;
}

export const attachmentRows = async (db: Db, tenantId: string, ticketId: string): Promise<AttachmentRow[]> =>
  (await sql<AttachmentRow>`
    SELECT id, event_id, ticket_id, name, content_type, size::int AS size, sha256, state, reason, content_id
    FROM attachments WHERE tenant_id = ${tenantId} AND ticket_id = ${ticketId} ORDER BY created_at, id`.execute(db)).rows;

/** Waits until the ticket has `count` files, none pending; returns them. */
export const settledAttachments = (db: Db, tenantId: string, ticketId: string, count: number, timeoutMs = 15_000) =>
  eventually(
    async () => {
      const rows = await attachmentRows(db, tenantId, ticketId);
      return rows.length >= count && rows.every((r) => r.state !== 'pending') ? rows : undefined;
    },
    timeoutMs,
    `${count} settled files on ticket ${ticketId}`,
  );
