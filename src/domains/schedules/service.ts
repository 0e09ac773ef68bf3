import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import type { ScheduleRow } from '../../db/types';
import { notFound, refuse, requireVersion, type VersionCondition } from '../../lib/errors';
import { newId } from '../../lib/ids';
import { iso, isoOrNull } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import type { Principal } from '../identity/principal';
import { longestTarget } from '../sla/targets';
import * as policies from '../sla/store';
import { literalRefused } from '../webhook-endpoints/transport';
import { compileSchedule, dayOfDate, reachable } from './business-time';
import { type CreateScheduleInput, type PatchScheduleInput, weeklyFromMinutes, weeklyToMinutes } from './schemas';
import * as store from './store';

const present = (s: ScheduleRow) => ({
  id: s.id,
  name: s.name,
  time_zone: s.time_zone,
  weekly_hours: weeklyFromMinutes(s.weekly),
  holidays: s.holidays,
  ical_url: s.ical_url,
  ical_holidays: s.ical_holidays,
  ical_fetched_at: isoOrNull(s.ical_fetched_at),
  ical_error: s.ical_error,
  // In the body as well as the ETag: a client that read only the list can still send If-Match on PATCH.
  version: String(s.version),
  created_at: iso(s.created_at),
  updated_at: iso(s.updated_at),
});

/** Holidays as stored: each date once, in order. */
const canonicalDates = (dates: string[]) => [...new Set(dates)].sort((a, b) => dayOfDate(a)! - dayOfDate(b)!);

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/**
 * Schedules (issue 37): business hours an SLA policy counts its targets on. Writes are an admin's, reads anyone's in
 * the workspace. A change to the hours, zone or holidays queues one `schedules.recompute` after its commit (the
 * workers move every open ticket's due times, set-based); a new feed URL queues its first read.
 */
export function createScheduleService(deps: { db: Db; queues: QueueHub; config: ConfigSection<'schedules'>; logger: Logger }) {
  const { db, queues, config } = deps;

  /** An iCal URL the workers may read: https (webcal), or http on loopback where the deployment allows it; no refused IP literal. */
  function checkFeedUrl(raw: string) {
    const url = new URL(raw);
    const loopbackHttp = url.protocol === 'http:' && config.SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK && LOOPBACK_HOSTS.has(url.hostname);
    if (url.protocol === 'http:' && !loopbackHttp) {
      throw refuse('ical_url_refused', 'The iCal feed URL must be https:// (or webcal://).', [{ path: 'body.ical_url', message: 'not https' }]);
    }
    if (literalRefused(url, { allowLoopback: config.SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK, allowPrivate: config.SCHEDULE_ICAL_ALLOW_PRIVATE_NETWORKS })) {
      throw refuse('ical_url_refused', 'The iCal feed URL names an address this deployment does not read from (loopback, private or special-purpose).', [{ path: 'body.ical_url', message: 'refused address' }]);
    }
  }

  /** The policies counting on the schedule must still reach their longest target on its new hours. */
  async function checkPolicies(tx: Executor, tenantId: string, row: Pick<ScheduleRow, 'time_zone' | 'weekly' | 'holidays' | 'ical_holidays'>, scheduleId: string) {
    const named = await policies.policiesOnSchedule(tx, tenantId, scheduleId);
    if (named.length === 0) return;
    const clock = compileSchedule({ timeZone: row.time_zone, weekly: row.weekly, holidays: [...row.holidays, ...row.ical_holidays] });
    const now = new Date();
    for (const p of named) {
      const longest = longestTarget(p.targets);
      if (!reachable(clock, now, longest)) {
        throw refuse('sla_target_unreachable', `SLA policy "${p.name}" has a target of ${longest} minutes, which these hours (${clock.weeklyMinutes} business minutes a week) could not meet within 10 years.`);
      }
    }
  }

  /**
   * After commit: the recompute for the version written, and the feed's first read. The change is committed either
   * way, so a queue that cannot take the job is logged, not answered: the daily sweep reads the feed again, and the
   * next change of the schedule recomputes its tickets.
   */
  async function afterWrite(row: ScheduleRow, o: { recompute: boolean; readFeed: boolean }) {
    try {
      if (o.recompute) await queues.enqueue('schedules.recompute', { tenant_id: row.tenant_id, schedule_id: row.id, version: Number(row.version) });
    } catch (err) {
      deps.logger.error({ schedule_id: row.id, err: (err as Error).message }, 'schedule recompute not enqueued: open tickets keep their due times until the next change');
    }
    try {
      if (o.readFeed) await queues.enqueue('schedules.ical_refresh', { tenant_id: row.tenant_id, schedule_id: row.id });
    } catch (err) {
      deps.logger.warn({ schedule_id: row.id, err: (err as Error).message }, 'iCal feed read not enqueued: the daily sweep reads it');
    }
  }

  return {
    async list(actor: Principal) {
      return { schedules: (await store.listSchedules(db, actor.tenantId)).map(present) };
    },

    async get(actor: Principal, id: string) {
      const row = await store.getSchedule(db, actor.tenantId, id);
      if (!row) throw notFound('schedule');
      return present(row);
    },

    async create(actor: Principal, input: CreateScheduleInput) {
      if (input.ical_url) checkFeedUrl(input.ical_url);
      const row = await store.insertSchedule(db, actor.tenantId, {
        id: newId(),
        name: input.name,
        time_zone: input.time_zone,
        weekly: weeklyToMinutes(input.weekly_hours) as [number, number][][],
        holidays: canonicalDates(input.holidays),
        ical_url: input.ical_url ?? null,
      });
      // Nothing counts on a new schedule yet: no recompute, only the feed's first read.
      await afterWrite(row, { recompute: false, readFeed: row.ical_url !== null });
      return present(row);
    },

    async patch(actor: Principal, id: string, input: PatchScheduleInput, ifMatch?: VersionCondition) {
      if (input.ical_url) checkFeedUrl(input.ical_url);
      const outcome = await db.transaction().execute(async (tx) => {
        const current = await store.lockSchedule(tx, actor.tenantId, id);
        if (!current) throw notFound('schedule');
        // No lost updates: a change made on a stale read is refused with nothing written.
        requireVersion(ifMatch, 'schedule', current.version);
        const weekly = input.weekly_hours ? (weeklyToMinutes(input.weekly_hours) as [number, number][][]) : undefined;
        const holidays = input.holidays ? canonicalDates(input.holidays) : undefined;
        const feedChanged = input.ical_url !== undefined && input.ical_url !== current.ical_url;
        // A feed removed takes its dates with it; a new feed keeps the old one's dates until its first read.
        const icalHolidays = feedChanged && input.ical_url === null ? [] : undefined;
        const next = {
          time_zone: input.time_zone ?? current.time_zone,
          weekly: weekly ?? current.weekly,
          holidays: holidays ?? current.holidays,
          ical_holidays: icalHolidays ?? current.ical_holidays,
        };
        const hoursChanged =
          next.time_zone !== current.time_zone ||
          JSON.stringify(next.weekly) !== JSON.stringify(current.weekly) ||
          next.holidays.join() !== current.holidays.join() ||
          next.ical_holidays.join() !== current.ical_holidays.join();
        if (hoursChanged) await checkPolicies(tx, actor.tenantId, next, id);
        const row = await store.updateSchedule(tx, actor.tenantId, id, {
          ...(input.name !== undefined ? { name: input.name } : {}),
          ...(input.time_zone !== undefined ? { time_zone: input.time_zone } : {}),
          ...(weekly ? { weekly } : {}),
          ...(holidays ? { holidays } : {}),
          ...(feedChanged ? { ical_url: input.ical_url ?? null, ical_error: null, ical_fetched_at: null } : {}),
          ...(icalHolidays ? { ical_holidays: icalHolidays } : {}),
        });
        if (!row) throw notFound('schedule');
        return { row, hoursChanged, readFeed: feedChanged && row.ical_url !== null };
      });
      await afterWrite(outcome.row, { recompute: outcome.hoursChanged, readFeed: outcome.readFeed });
      return present(outcome.row);
    },

    /** Refused while a policy counts on it: its tickets' due times would have nothing to count on. */
    remove: (actor: Principal, id: string) =>
      db.transaction().execute(async (tx) => {
        const current = await store.lockSchedule(tx, actor.tenantId, id);
        if (!current) throw notFound('schedule');
        const [named] = await policies.policiesOnSchedule(tx, actor.tenantId, id);
        if (named) throw refuse('schedule_in_use', `SLA policy "${named.name}" counts on this schedule, and a policy keeps its schedule: change the schedule's hours instead.`);
        await store.deleteSchedule(tx, actor.tenantId, id);
      }),
  };
}

export type ScheduleService = ReturnType<typeof createScheduleService>;
