import { randomBytes } from 'node:crypto';
import type { Db, Executor } from '../../db';
import { newId } from '../../lib/ids';
import { insertAttachment } from '../files/store';
import { sanitizeFileName } from '../files/names';
import { OCTET_STREAM } from '../files/sniff';

/**
 * A file a message listed that is not fetched at all (more than FILES_MAX_PER_MESSAGE, or a declared size over
 * FILES_MAX_BYTES): its row goes straight to `skipped` with the reason, so the event still lists it. The files
 * domain's `storeInbound` writes rows for files it fetches; this is the same row without a fetch (no bytes: the
 * storage key names nothing, as a skipped row's never does).
 */
export function createSkippedRecorder(deps: { db: Db; bumpTicketVersion: (tx: Executor, tenantId: string, ticketId: string) => Promise<void> }) {
  return async function recordSkipped(
    tenantId: string,
    to: { ticketId: string; eventId: string; name: string; declaredType?: string; size?: number; contentId?: string; reason: string },
  ): Promise<void> {
    await deps.db.transaction().execute(async (tx) => {
      await insertAttachment(tx, tenantId, {
        id: newId(),
        ticket_id: to.ticketId,
        event_id: to.eventId,
        name: sanitizeFileName(to.name),
        // Never sniffed (no bytes were read): the generic type, not the sender's claim.
        content_type: OCTET_STREAM,
        size: 0,
        content_id: to.contentId ? to.contentId.slice(0, 998) : null,
        storage_key: `t/${tenantId}/${randomBytes(16).toString('hex')}`,
        state: 'skipped',
        reason: to.reason.slice(0, 300),
        source: 'inbound',
      });
      await deps.bumpTicketVersion(tx, tenantId, to.ticketId);
    });
  };
}
