import type { Db, Executor } from '../../db';
import { isDataError } from '../../db';
import { runBatch } from '../../intake/batch';
import { recordOnce, type LedgerStore } from '../../intake/ledger';
import { newId } from '../../lib/ids';
import type { JobData } from '../../queue/jobs';
import type { ItemResult } from '../../queue/results';
import * as store from './store';
import { presentTranscriptEvent } from './present';
import type { EventSink } from '../events/types';

/** One delivery of a `webhooks.batch` job, as its schema defines it. */
export type WebhookItem = JobData<'webhooks.batch'>['items'][number];

export interface WebhookResult {
  transcript_id: string;
  external_ticket_id: string;
  was_duplicate: boolean;
}

const keyOf = (i: WebhookItem): store.DeliveryKey => ({ integrationId: i.integration_id, dedupeKey: i.dedupe_key });

/** The webhook ledger: one row per (integration, provider event or body hash). */
const LEDGER: LedgerStore<store.DeliveryKey, WebhookResult> = {
  id: store.deliveryId,
  claim: store.claimDeliveries,
  get: async (tx, tenantId, keys) => {
    const rows = await store.getDeliveries(tx, tenantId, keys);
    return new Map([...rows].map(([id, r]) => [id, { transcript_id: r.transcript_id, external_ticket_id: r.external_ticket_id, was_duplicate: false, first_correlation_id: r.first_correlation_id }]));
  },
  countCopies: store.countDuplicates,
};

/**
 * The worker side of webhook intake: a batch of ticket events written set-based into transcripts, once per
 * provider event (the delivery ledger), each answered on the requesting process's result channel.
 */
export function createWebhookWorker(deps: { db: Db; events?: EventSink }) {
  const { db } = deps;

  /** One workspace's deliveries, inside the caller's transaction. */
  async function writeBatch(tx: Executor, tenantId: string, items: WebhookItem[], out: Map<string, WebhookResult>) {
    const copies = await recordOnce(tx, tenantId, items, {
      ledger: LEDGER,
      keyOf,
      writeFresh: async (fresh) => {
        const transcripts = await store.transcriptsFor(
          tx,
          tenantId,
          fresh.map((i) => ({ id: newId(), integrationId: i.integration_id, externalTicketId: i.external_ticket_id })),
        );
        const transcriptOf = (i: WebhookItem) => transcripts.get(store.transcriptKey(i.integration_id, i.external_ticket_id))!;
        const recorded = await store.appendEvents(
          tx,
          tenantId,
          fresh.map((i) => ({
            id: newId(),
            transcript_id: transcriptOf(i),
            provider_event_id: i.provider_event_id,
            type: i.type,
            occurred_at: i.occurred_at,
            status: i.status,
            subject: i.subject,
            priority: i.priority,
            requester: i.requester,
            raw: i.raw,
          })),
        );
        // transcript.event_recorded, in the transaction that records it (issue 19).
        const byTranscript = new Map(fresh.map((i) => [transcriptOf(i), i]));
        await deps.events?.emit(
          tx,
          tenantId,
          recorded.map((e) => {
            const i = byTranscript.get(e.transcript_id)!;
            return { type: 'transcript.event_recorded' as const, data: { transcript_id: e.transcript_id, integration_id: i.integration_id, external_ticket_id: i.external_ticket_id, event: presentTranscriptEvent(e) } };
          }),
        );
        await store.completeDeliveries(tx, tenantId, fresh.map((i) => ({ ...keyOf(i), transcriptId: transcriptOf(i), externalTicketId: i.external_ticket_id })));
        const results = new Map(fresh.map((i) => [i.id, { transcript_id: transcriptOf(i), external_ticket_id: i.external_ticket_id, was_duplicate: false }]));
        for (const [id, r] of results) out.set(id, r);
        return results;
      },
    });
    for (const { item, first, rerun } of copies) {
      out.set(item.id, { transcript_id: first.transcript_id, external_ticket_id: first.external_ticket_id, was_duplicate: !rerun });
    }
  }

  /** Items in one transaction, workspaces in id order. */
  async function write(items: WebhookItem[]): Promise<Map<string, ItemResult>> {
    const out = new Map<string, WebhookResult>();
    const tenants = [...new Set(items.map((i) => i.tenant_id))].sort();
    await db.transaction().execute(async (tx) => {
      for (const tenantId of tenants) await writeBatch(tx, tenantId, items.filter((i) => i.tenant_id === tenantId), out);
    });
    return new Map(items.map((i) => [i.id, { id: i.id, ok: true, value: out.get(i.id) }]));
  }

  /** Alone, an integration deleted meanwhile (foreign key) or a value PostgreSQL refuses is the delivery's refusal. */
  function refusalOf(err: unknown) {
    if (String((err as { code?: unknown })?.code) === '23503') return { code: 'not_found' as const, detail: 'The integration no longer exists.' };
    if (isDataError(err)) return { code: 'webhook_payload_invalid' as const, detail: 'The payload holds a value that cannot be stored.' };
    return null;
  }

  return {
    /** The webhooks.batch job: every item answered; a lost database fails the job so BullMQ retries it whole. */
    processBatch: (items: WebhookItem[]): Promise<ItemResult[]> => runBatch(items, { write, refusalOf }),
  };
}

export type WebhookWorker = ReturnType<typeof createWebhookWorker>;
