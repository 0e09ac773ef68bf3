import { sql } from 'kysely';
import type { Executor } from '../../db';

/** The SQL of inbound files (issue 34): reads of the files domain's `attachments` rows, and the sweep's one write. */

/** How many inbound files an event has rows for (any state): what a fetch job run again must not fetch twice. */
export async function countInboundRows(db: Executor, tenantId: string, eventId: string): Promise<number> {
  const row = await db
    .selectFrom('attachments')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .where('event_id', '=', eventId)
    .where('source', '=', 'inbound')
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * The event an inbound message wrote on its ticket (by the provider message id in its meta): how an ingest job
 * run again after its commit finds the event whose files it must queue. One ticket's timeline range.
 */
export async function inboundEventOf(db: Executor, tenantId: string, ticketId: string, kind: string, providerMessageId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('ticket_events')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('ticket_id', '=', ticketId)
    .where('kind', '=', kind)
    .where(sql<string>`meta->>'provider_message_id'`, '=', providerMessageId)
    .orderBy('created_at')
    .limit(1)
    .executeTakeFirst();
  return row?.id;
}

/**
 * Inbound rows still `pending` since before `cutoff` (their worker died mid-fetch: no fetch runs that long)
 * marked failed with the reason, at most `limit` per call, across workspaces; answers how many.
 */
export async function crossTenantFailStalePending(db: Executor, cutoff: Date, reason: string, limit: number): Promise<number> {
  const { rows } = await sql<{ id: string }>`
    UPDATE attachments a SET state = 'failed', reason = ${reason}
    FROM (
      SELECT tenant_id, id FROM attachments
      WHERE source = 'inbound' AND state = 'pending' AND created_at < ${cutoff}
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    ) stale
    WHERE a.tenant_id = stale.tenant_id AND a.id = stale.id AND a.state = 'pending'
    RETURNING a.id`.execute(db);
  return rows.length;
}
