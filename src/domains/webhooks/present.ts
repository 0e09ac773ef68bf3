import type { TranscriptEventRow } from '../../db/types';
import { iso } from '../../lib/time';

/** One transcript event as GET /v1/transcripts/{id} shows it (and transcript.event_recorded carries it). */
export const presentTranscriptEvent = (e: TranscriptEventRow) => ({
  id: e.id,
  provider_event_id: e.provider_event_id,
  type: e.type,
  occurred_at: e.occurred_at ? iso(e.occurred_at) : null,
  status: e.status,
  subject: e.subject,
  priority: e.priority,
  requester: e.requester,
  received_at: iso(e.received_at),
  raw: e.raw,
});
