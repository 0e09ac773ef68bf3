import type { Logger } from 'pino';
import type { Db, Executor } from '../../db';
import type { ReadRouting } from '../../db/reads';
import type { TicketEventRow, TimeEntryRow } from '../../db/types';
import { isQueryCanceled } from '../../lib/errors';
import type { QueueHub } from '../../queue/hub';
import type { Principal } from '../identity/principal';
import { businessMinutesBetween } from '../schedules/business-time';
import { clockOf } from '../schedules/clocks';
import { present, type ReportName, type ReportQuery, REPORT_READS } from './present';
import * as store from './store';

/** Events whose writes change nothing a report counts (the row's report columns included): not tracked. */
const UNTRACKED_KINDS = new Set(['delivery', 'sla_breached']);
/** Fold requests: one job per workspace and window; the job waits out its window and a little more (see requestFold). */
const FOLD_WINDOW_MS = 1000;
const FOLD_DELAY_MS = 2000;
/**
 * Journal rows folded per transaction, sized by time like the time-rule batches: a chunk's cost is not its row
 * count but how many day rows its facts reach (today's facts share a few keys; a backfill's, spread over months
 * and every dimension, reach up to 32 rows each), so the chunk doubles while a fold takes under a quarter of
 * FOLD_TARGET_MS and halves when one takes longer, between the bounds. A chunk stopped by the statement timeout
 * is rolled back whole and tried again at a quarter of its size. A job folds for FOLD_JOB_MS, then queues the next.
 */
const FOLD_TARGET_MS = 1000;
const FOLD_MIN_CHUNK = 100;
const FOLD_MAX_CHUNK = 20_000;
const FOLD_JOB_MS = 30_000;
/** Day rows whose percentiles are recomputed per transaction, and transactions per fold job. */
const REFRESH_BATCH = 5000;
const REFRESH_BATCHES = 200;
/** Tickets measured per statement when a workspace's business minutes are measured again. */
const REMEASURE_BATCH = 5000;

/**
 * Business minutes of one fact: measured on the clock of the ticket's policy's schedule when the fact is recorded,
 * and kept while the fact's instants do not change (a later schedule change does not rewrite past reports, as it
 * does not rewrite a solved ticket's due times). Whole minutes, rounded down, never negative.
 */
export const businessMinutes = (clock: Parameters<typeof businessMinutesBetween>[0], from: Date, to: Date) =>
  Math.max(0, Math.floor(businessMinutesBetween(clock, from, to)));

/**
 * Reports (issue 37): support metrics per day in the workspace's zone, precomputed by the workers and exact on
 * every read. Every write to a ticket (its timeline: `appended`) and to its time entries (`entriesChanged`) journals
 * the signed difference it makes to the reports, in its own transaction; the reports.fold job moves the journal
 * into days; a read adds the journal not yet folded (store.ts says how facts are made and filed).
 */
export function createReportService(deps: { db: Db; queues: QueueHub; logger: Logger; reads?: Pick<ReadRouting, 'forReading'> }) {
  const { db, queues, logger } = deps;
  const reads = deps.reads ?? { forReading: async () => db };
  const asked = new Map<string, number>();
  /** The next fold's chunk (journal rows), adapted to how long folds take here (see FOLD_TARGET_MS). */
  let foldChunk = 1000;

  /**
   * Asks for a fold of the workspace, once per window per process, without waiting (this runs inside the writing
   * transaction, which must not wait on Redis). The job starts FOLD_DELAY_MS after its window opened, after the
   * window itself: a write whose transaction commits later than that is folded by the next window's job or the
   * per-minute sweep, and counted from the journal until then.
   */
  function requestFold(tenantId: string) {
    const window = Math.floor(Date.now() / FOLD_WINDOW_MS);
    if (asked.get(tenantId) === window) return;
    asked.set(tenantId, window);
    if (asked.size > 10_000) asked.clear();
    queues.enqueue('reports.fold', { tenant_id: tenantId, window }, { delayMs: FOLD_DELAY_MS }).catch((err: Error) => {
      logger.warn({ tenant_id: tenantId, err: err.message }, 'report fold not queued; the sweep will fold');
    });
  }

  /** Business minutes for the facts of tickets on a scheduled policy (the others count calendar minutes in SQL). */
  async function measure(tx: Executor, tenantId: string, facts: store.ScheduledFact[]): Promise<store.Measured[]> {
    if (facts.length === 0) return [];
    const rows = await store.schedules(tx, tenantId, [...new Set(facts.map((f) => f.schedule_id))]);
    const clocks = new Map(rows.map((r) => [r.id, clockOf(r)]));
    return facts.map((f) => {
      const clock = clocks.get(f.schedule_id) ?? null;
      const at = (to: Date | null, same: boolean, old: number | null) => (to === null ? null : same && old !== null ? old : businessMinutes(clock, f.created_at, to));
      return { ticket_id: f.ticket_id, frt_business: at(f.first_reply_at, f.frt_same, f.old_frt_business), res_business: at(f.resolved_at, f.res_same, f.old_res_business) };
    });
  }

  /**
   * Brings the tickets' report state up to date in the caller's transaction: the events just appended (`eventIds`)
   * and the tickets' rows as they now stand. The caller holds the tickets' row locks.
   */
  async function track(tx: Executor, tenantId: string, ticketIds: string[], eventIds: string[]): Promise<void> {
    if (ticketIds.length === 0) return;
    const measured = await measure(tx, tenantId, await store.scheduledFacts(tx, tenantId, ticketIds, eventIds));
    await store.track(tx, tenantId, ticketIds, eventIds, measured);
    requestFold(tenantId);
  }

  /** A snapshot read on the replica when the caller may use it (a single statement: one snapshot by itself). */
  const reader = (actor: Principal) => reads.forReading(actor);

  return {
    /** The tickets domain's timeline tells this about every event it appends, in the appending transaction. */
    async appended(tx: Executor, tenantId: string, rows: readonly TicketEventRow[]) {
      const counted = rows.filter((r) => !UNTRACKED_KINDS.has(r.kind));
      if (counted.length === 0) return;
      await track(tx, tenantId, [...new Set(counted.map((r) => r.ticket_id))], counted.map((r) => r.id));
    },

    track,

    /**
     * A ticket's time entries changed in the caller's transaction (after the ticket's row was locked by the write):
     * the removed versions' facts minus, the added ones' plus.
     */
    async entriesChanged(tx: Executor, tenantId: string, ticketId: string, change: { removed?: TimeEntryRow[]; added?: TimeEntryRow[] }) {
      const entries: store.EntryChange[] = [
        ...(change.removed ?? []).map((e) => ({ sign: -1 as const, created_at: e.created_at, user_id: e.user_id, minutes: e.minutes })),
        ...(change.added ?? []).map((e) => ({ sign: 1 as const, created_at: e.created_at, user_id: e.user_id, minutes: e.minutes })),
      ];
      // An untracked ticket is tracked whole instead: that counts every entry it has, this one included.
      if (!(await store.journalEntries(tx, tenantId, ticketId, entries))) await track(tx, tenantId, [ticketId], []);
      requestFold(tenantId);
    },

    /** One report over [from, to] in the workspace's zone, as the API answers it. */
    async report(actor: Principal, name: ReportName, q: ReportQuery) {
      return present(name, q, REPORT_READS[name], await reader(actor), actor.tenantId);
    },

    /** The reports.fold job: chunk after chunk, each its own transaction sized by time, until the journal is empty (or FOLD_JOB_MS passed: the next job goes on). */
    fold,

    /**
     * The per-minute sweep: folds every workspace with deltas waiting (their job may have been lost) and re-buckets
     * every workspace whose zone changed (its job may have been lost too).
     */
    async sweep() {
      const work = await store.crossTenantNeedingWork(db);
      for (const t of work.rezone) await rebuildDays(t);
      for (const t of work.fold) if (!work.rezone.includes(t)) await fold(t);
      return { folded: work.fold.length, rezoned: work.rezone.length };
    },

    rebuildDays,

    /** After a workspace's zone change commits: its days are re-bucketed now, not at the next sweep. */
    async zoneChanged(tenantId: string) {
      try {
        await queues.enqueue('reports.rebuild', { tenant_id: tenantId });
      } catch (err) {
        logger.warn({ tenant_id: tenantId, err: (err as Error).message }, 'report re-bucketing not queued; the sweep will run it');
      }
    },

    /**
     * Recomputes every state row from raw rows (business minutes measured again on today's schedules), then the
     * days: the repair after reports:verify found differences, and the loaders that write raw rows directly.
     */
    async rebuildAll(tenantId: string) {
      const built = await withFoldLock(tenantId, async (tx) => {
        await store.rebuildState(tx, tenantId);
        await remeasure(tx, tenantId);
        return store.rebuildDays(tx, tenantId);
      });
      await refresh(tenantId);
      return built;
    },
  };

  async function fold(tenantId: string) {
    let moved = 0;
    const deadline = Date.now() + FOLD_JOB_MS;
    while (Date.now() < deadline) {
      const limit = foldChunk;
      const started = Date.now();
      let chunk: { moved: number };
      try {
        chunk = await db.transaction().execute((tx) => store.fold(tx, tenantId, limit));
      } catch (err) {
        if (!isQueryCanceled(err) || limit === FOLD_MIN_CHUNK) throw err;
        foldChunk = Math.max(FOLD_MIN_CHUNK, Math.floor(limit / 4));
        logger.warn({ tenant_id: tenantId, chunk: limit, next: foldChunk }, 'report fold chunk ran past the statement timeout; retrying smaller');
        continue;
      }
      const ms = Date.now() - started;
      if (ms > FOLD_TARGET_MS) foldChunk = Math.max(FOLD_MIN_CHUNK, Math.floor(limit / 2));
      else if (ms < FOLD_TARGET_MS / 4 && chunk.moved === limit) foldChunk = Math.min(FOLD_MAX_CHUNK, limit * 2);
      moved += chunk.moved;
      if (chunk.moved < limit) return { moved, refreshed: await refresh(tenantId) };
    }
    // More is waiting than one job folds: the next window's job goes on (the sweep would too).
    requestFold(tenantId);
    return { moved, refreshed: await refresh(tenantId) };
  }

  /** The kept percentiles of the day rows the folds changed, a batch per transaction (reads are exact meanwhile). */
  async function refresh(tenantId: string) {
    let refreshed = 0;
    for (let i = 0; i < REFRESH_BATCHES; i++) {
      const n = await db.transaction().execute((tx) => store.refreshPercentiles(tx, tenantId, REFRESH_BATCH));
      refreshed += n;
      if (n < REFRESH_BATCH) return refreshed;
    }
    requestFold(tenantId);
    return refreshed;
  }

  /** Measures every scheduled ticket's business minutes again (state rows only: the caller rebuilds the days). */
  async function remeasure(tx: Executor, tenantId: string) {
    let after: string | null = null;
    for (;;) {
      const ids = await store.scheduledTickets(tx, tenantId, after, REMEASURE_BATCH);
      if (ids.length === 0) return;
      const facts = await store.scheduledFacts(tx, tenantId, ids, []);
      await store.setMeasured(tx, tenantId, await measure(tx, tenantId, facts.map((f) => ({ ...f, frt_same: false, res_same: false }))));
      after = ids.at(-1)!;
    }
  }

  /**
   * Re-buckets the workspace in its zone as set now (a zone change, a repair); the days and the zone swap at commit.
   * Its day rows' percentiles are then refreshed in batches (exact reads meanwhile, from the histograms).
   */
  async function rebuildDays(tenantId: string) {
    const built = await withFoldLock(tenantId, (tx) => store.rebuildDays(tx, tenantId));
    await refresh(tenantId);
    return built;
  }

  /**
   * Work that must read one snapshot taken after no fold runs (a rebuild): the fold lock held by a session of its
   * own, then a REPEATABLE READ transaction, whose snapshot is taken by its first statement, after the lock.
   */
  async function withFoldLock<T>(tenantId: string, work: (tx: Executor) => Promise<T>): Promise<T> {
    return db.connection().execute(async (conn) => {
      await store.foldLock(tenantId).execute(conn);
      try {
        return await conn.transaction().setIsolationLevel('repeatable read').execute(work);
      } finally {
        await store.foldUnlock(tenantId).execute(conn);
      }
    });
  }
}

export type ReportService = ReturnType<typeof createReportService>;
