import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Db } from '../../db';
import { iso } from '../../lib/time';
import type { RedisClient } from '../../queue/connection';
import type { QueueHub } from '../../queue/hub';
import type { AuditService } from '../audit/service';
import type { BlobStore } from '../files/types';
import type { Principal } from '../identity/principal';
import { reindexTickets } from '../customers/store';
import * as store from './store';

/**
 * Retention (issue 38): a workspace's `retention_days` (off unless set) erases the conversation of every solved and
 * closed ticket resolved longer ago than that. docs/decisions/retention.md has the reasons; the shape:
 *
 * - The conversation is erased, the ticket kept: subject and description, the message events' text, the files
 *   (rows and bytes), and the copies of the text kept per ticket (notifications, satisfaction comments, todo titles,
 *   template parameters, the search document). Status, timestamps, counts, assignee, team, tags and the system
 *   events stay, so every report and count answers as before.
 * - `retention.sweep` (every 15 minutes) queues one `retention.run` per workspace with something due (its job id
 *   names the workspace: queued once, however often the sweep runs). A run erases in batches along the partial
 *   index of due tickets (keyset; BATCH tickets each), each batch one transaction of set-based statements, and stops
 *   after its budget, queuing its own continuation.
 * - Two runs at once share the work: a batch locks its tickets FOR UPDATE SKIP LOCKED and the lock re-checks that
 *   the ticket is still due, so each ticket is erased by one of them, once.
 * - The dry run (`preview`) counts what a run would take now, for the setting or a proposed one, each count
 *   bounded (COUNT_CAP rows, then `capped`).
 */

/** Tickets per batch: one transaction, its locks held for as long as the batch takes. */
export const BATCH = 500;
/** How long one run keeps taking batches before it queues its continuation. */
const RUN_BUDGET_MS = 30_000;
/** Each count of the dry run stops past this many rows. */
export const COUNT_CAP = 100_000;
/** How long the last run's figures are kept for the dry run's answer. */
const LAST_RUN_TTL_SECONDS = 90 * 24 * 3600;

export interface RetentionRun {
  /** Due tickets whose conversation was erased, their message events, their files and the files' bytes. */
  tickets: number;
  events: number;
  attachments: number;
  bytes: number;
  /** Merged-away tickets erased with their winners, and their message events. */
  merged: { tickets: number; events: number };
  batches: number;
  /** Every due ticket was taken (false: the budget ran out, and a continuation is queued). */
  done: boolean;
}

interface LastRun {
  at: string;
  tickets: number;
  events: number;
  attachments: number;
  done: boolean;
}

export function createRetentionService(deps: {
  db: Db;
  queues: QueueHub;
  logger: Logger;
  audit: Pick<AuditService, 'recordBySystem'>;
  /** The file store the workspace's files are in: their bytes are deleted after each batch commits. */
  blobs: Pick<BlobStore, 'delete'>;
  redis: RedisClient;
  redisPrefix: string;
}) {
  const { db, logger } = deps;
  const lastRunKey = (tenantId: string) => `${deps.redisPrefix}:retention:last:${tenantId}`;

  async function lastRun(tenantId: string): Promise<LastRun | null> {
    try {
      const text = await deps.redis.get(lastRunKey(tenantId));
      return text ? (JSON.parse(text) as LastRun) : null;
    } catch {
      // Only a figure shown beside the counts: Redis away leaves it out rather than failing the dry run.
      return null;
    }
  }

  /** One batch, one transaction: the tickets locked, their conversation erased, the keys of their files answered. */
  async function batch(tenantId: string, cutoff: Date, days: number, after: { due_at: string; id: string } | null, limit: number) {
    return db.transaction().execute(async (tx) => {
      const claimed = await store.claimBatch(tx, tenantId, { cutoff, after, limit });
      if (claimed.length === 0) return { claimed, erased: null };
      const ids = claimed.map((c) => c.id);
      const sources = await store.mergedSources(tx, tenantId, ids);
      const all = [...ids, ...sources];
      // The events first: the search trigger the tickets' update fires rebuilds each document from them.
      const messages = await store.eraseMessages(tx, tenantId, all);
      await store.eraseTickets(tx, tenantId, all);
      await reindexTickets(tx, tenantId, claimed.filter((c) => c.head_erased).map((c) => c.id));
      await store.eraseCopies(tx, tenantId, all);
      const files = await store.deleteFiles(tx, tenantId, all);
      const count = (group: string[]) => group.reduce((n, id) => n + (messages.get(id) ?? 0), 0);
      const erased = {
        tickets: ids.length,
        events: count(ids),
        attachments: files.length,
        bytes: files.reduce((n, f) => n + f.bytes, 0),
        merged: { tickets: sources.length, events: count(sources) },
        keys: files.map((f) => f.storage_key),
      };
      // Who erased what: the sweep, with the figures and the cutoff (never a word of what was erased).
      await deps.audit.recordBySystem(tx, tenantId, 'retention.erased', { type: 'tenant', id: tenantId }, {
        retention_days: days,
        cutoff: iso(cutoff),
        tickets: erased.tickets,
        events: erased.events,
        attachments: erased.attachments,
        bytes: erased.bytes,
        merged_tickets: erased.merged.tickets,
      });
      return { claimed, erased };
    });
  }

  /**
   * The retention.run job: the workspace's due tickets, batch after batch along the partial index, until a batch
   * comes back short (all taken) or the budget is spent (then the run queues its continuation). The cutoff is read
   * once, at the start, from the setting as it then is; a workspace whose retention is off erases nothing.
   */
  async function run(tenantId: string, opts: { budgetMs?: number; batch?: number; continued?: number } = {}): Promise<RetentionRun> {
    const out: RetentionRun = { tickets: 0, events: 0, attachments: 0, bytes: 0, merged: { tickets: 0, events: 0 }, batches: 0, done: true };
    const { retention_days: days, cutoff } = await store.cutoffOf(db, tenantId);
    if (days === null || cutoff === null) return out;
    const limit = opts.batch ?? BATCH;
    const deadline = performance.now() + (opts.budgetMs ?? RUN_BUDGET_MS);
    let after: { due_at: string; id: string } | null = null;
    for (;;) {
      const b = await batch(tenantId, cutoff, days, after, limit);
      if (b.erased) {
        out.batches += 1;
        out.tickets += b.erased.tickets;
        out.events += b.erased.events;
        out.attachments += b.erased.attachments;
        out.bytes += b.erased.bytes;
        out.merged.tickets += b.erased.merged.tickets;
        out.merged.events += b.erased.merged.events;
        // The bytes go once their rows are gone for good; one that fails is left to the orphan sweep (no row holds it).
        for (const key of b.erased.keys) {
          await deps.blobs.delete(key).catch((err: unknown) => logger.warn({ tenant_id: tenantId, err_code: 'blob_not_deleted', cause: (err as Error)?.message }, 'retention: file bytes not deleted'));
        }
      }
      const last = b.claimed.at(-1);
      if (b.claimed.length < limit || !last) break;
      after = { due_at: last.due_at, id: last.id };
      if (performance.now() >= deadline) {
        out.done = false;
        break;
      }
    }
    if (!out.done) {
      const continued = (opts.continued ?? 0) + 1;
      await deps.queues.enqueue('retention.run', { tenant_id: tenantId, continued });
    }
    if (out.tickets > 0 || !out.done) {
      logger.info({ tenant_id: tenantId, retention_days: days, tickets: out.tickets, events: out.events, attachments: out.attachments, bytes: out.bytes, merged: out.merged.tickets, batches: out.batches, done: out.done }, 'retention run');
    }
    const at = new Date().toISOString();
    const figures: LastRun = { at, tickets: out.tickets, events: out.events, attachments: out.attachments, done: out.done };
    await deps.redis.set(lastRunKey(tenantId), JSON.stringify(figures), 'EX', LAST_RUN_TTL_SECONDS).catch(() => undefined);
    return out;
  }

  return {
    /** The retention.sweep job: one retention.run per workspace with retention set and something due now. */
    async sweep(): Promise<{ workspaces: number }> {
      const due = await store.crossTenantRetentionDue(db);
      for (const tenantId of due) await deps.queues.enqueue('retention.run', { tenant_id: tenantId });
      return { workspaces: due.length };
    },

    run,

    /**
     * The dry run (GET /v1/tenants/me/retention): what a run would erase if it ran now, for the workspace's setting,
     * or for `proposedDays` before it is set. Nothing is written. Off and nothing proposed: nothing is due.
     */
    async preview(actor: Principal, proposedDays?: number) {
      const t = await store.cutoffOf(db, actor.tenantId, proposedDays);
      const counts = t.cutoff ? await store.countDue(db, actor.tenantId, t.cutoff, COUNT_CAP) : { tickets: 0, events: 0, attachments: 0, bytes: 0, capped: false };
      const { capped, ...due } = counts;
      return {
        retention_days: t.retention_days,
        counted_days: t.days,
        cutoff: t.cutoff ? iso(t.cutoff) : null,
        due,
        capped,
        last_run: await lastRun(actor.tenantId),
      };
    },
  };
}

export type RetentionService = ReturnType<typeof createRetentionService>;
