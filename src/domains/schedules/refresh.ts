import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { QueueHub } from '../../queue/hub';
import { FeedError, holidayDates, readFeed } from './ical';
import * as store from './store';

/** A feed is read again once its last good read is this old (the sweep runs daily; a failed feed is retried then). */
const STALE_AFTER_MS = 20 * 3600 * 1000;
/** Feeds one sweep queues at most (the rest are next day's, oldest first). */
const SWEEP_LIMIT = 10_000;

/**
 * The workers' side of iCal holiday feeds (issue 37): `schedules.ical_refresh` reads one schedule's feed and stores
 * its dates; `schedules.ical_sweep` (daily) queues a read for every feed not read for a day. A read that changes the
 * dates queues the schedule's recompute, as an admin's change does; a failed read keeps the dates it had and says
 * why in `ical_error`.
 */
export function createScheduleFeeds(deps: { db: Db; queues: QueueHub; config: ConfigSection<'schedules'>; logger: Logger }) {
  const { db, queues, config, logger } = deps;
  const policy = { allowLoopback: config.SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK, allowPrivate: config.SCHEDULE_ICAL_ALLOW_PRIVATE_NETWORKS };

  async function refresh(data: { tenant_id: string; schedule_id: string }): Promise<{ read: boolean; dates?: number; changed?: boolean; error?: string }> {
    const row = await store.getSchedule(db, data.tenant_id, data.schedule_id);
    if (!row?.ical_url) return { read: false };
    const url = row.ical_url;
    let dates: string[];
    try {
      dates = holidayDates(await readFeed(url, { timeoutMs: config.SCHEDULE_ICAL_TIMEOUT_MS, maxBytes: config.SCHEDULE_ICAL_MAX_BYTES, policy }), new Date());
    } catch (err) {
      if (!(err instanceof FeedError)) throw err;
      await store.recordFeedRead(db, data.tenant_id, data.schedule_id, url, { error: err.message });
      logger.info({ schedule_id: data.schedule_id, reason: err.message }, 'iCal feed read failed; the schedule keeps its holidays');
      return { read: false, error: err.message };
    }
    const changed = dates.join() !== row.ical_holidays.join();
    const written = await store.recordFeedRead(db, data.tenant_id, data.schedule_id, url, { dates });
    // The URL changed while the feed was read: the new URL's own read (queued by that change) decides.
    if (!written) return { read: false };
    if (changed) await queues.enqueue('schedules.recompute', { tenant_id: data.tenant_id, schedule_id: data.schedule_id, version: Number(written.version) });
    return { read: true, dates: dates.length, changed };
  }

  async function sweep(): Promise<{ queued: number }> {
    const due = await store.crossTenantFeedsDue(db, new Date(Date.now() - STALE_AFTER_MS), SWEEP_LIMIT);
    for (const s of due) await queues.enqueue('schedules.ical_refresh', { tenant_id: s.tenant_id, schedule_id: s.id });
    return { queued: due.length };
  }

  return { refresh, sweep };
}

export type ScheduleFeeds = ReturnType<typeof createScheduleFeeds>;
