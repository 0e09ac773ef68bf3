import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { ScheduleRow } from '../../db/types';

/** Holidays are `date[]`: read as text (`YYYY-MM-DD`), as the driver keeps a single date (src/db/index.ts). */
const DATES = [sql<string[]>`holidays::text[]`.as('holidays'), sql<string[]>`ical_holidays::text[]`.as('ical_holidays')] as const;
const COLUMNS = ['tenant_id', 'id', 'name', 'time_zone', 'weekly', 'ical_url', 'ical_fetched_at', 'ical_error', 'version', 'created_at', 'updated_at'] as const;

export interface NewSchedule {
  id: string;
  name: string;
  time_zone: string;
  weekly: [number, number][][];
  holidays: string[];
  ical_url: string | null;
}

export async function insertSchedule(db: Executor, tenantId: string, s: NewSchedule): Promise<ScheduleRow> {
  return db
    .insertInto('schedules')
    .values({ ...s, tenant_id: tenantId, weekly: JSON.stringify(s.weekly) })
    .returning([...COLUMNS, ...DATES])
    .executeTakeFirstOrThrow();
}

export async function listSchedules(db: Executor, tenantId: string): Promise<ScheduleRow[]> {
  return db.selectFrom('schedules').select([...COLUMNS, ...DATES]).where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
}

export async function getSchedule(db: Executor, tenantId: string, id: string): Promise<ScheduleRow | undefined> {
  return db.selectFrom('schedules').select([...COLUMNS, ...DATES]).where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

/** The schedule, locked for a change (its version checked against the caller's If-Match before the write). */
export async function lockSchedule(db: Executor, tenantId: string, id: string): Promise<ScheduleRow | undefined> {
  return db.selectFrom('schedules').select([...COLUMNS, ...DATES]).where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
}

/**
 * The schedule a ticket's due times are computed on, share-locked until the writing transaction ends: a change to
 * the schedule waits for it, so the recompute the change queues (after its commit) sees every due time computed on
 * the old hours. Two ticket writes share the lock; only a schedule change waits.
 */
export async function scheduleForClock(db: Executor, tenantId: string, id: string): Promise<ScheduleRow | undefined> {
  return db.selectFrom('schedules').select([...COLUMNS, ...DATES]).where('tenant_id', '=', tenantId).where('id', '=', id).forShare().executeTakeFirst();
}

/** Each sent field is its own column write. */
export async function updateSchedule(
  db: Executor,
  tenantId: string,
  id: string,
  patch: { name?: string; time_zone?: string; weekly?: [number, number][][]; holidays?: string[]; ical_url?: string | null; ical_holidays?: string[]; ical_fetched_at?: Date | null; ical_error?: string | null },
): Promise<ScheduleRow | undefined> {
  const { weekly, ...rest } = patch;
  return db
    .updateTable('schedules')
    .set({ ...rest, ...(weekly !== undefined ? { weekly: JSON.stringify(weekly) } : {}), updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning([...COLUMNS, ...DATES])
    .executeTakeFirst();
}

export async function deleteSchedule(db: Executor, tenantId: string, id: string): Promise<boolean> {
  const r = await db.deleteFrom('schedules').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/**
 * What an iCal read found: the dates when it was read (the row then counts as read now), or why it failed (the
 * dates kept). Written only while the row still names the URL that was read (an admin may have changed it since).
 * Returns the row as written, or undefined when the schedule or its URL changed meanwhile.
 */
export async function recordFeedRead(
  db: Executor,
  tenantId: string,
  id: string,
  url: string,
  read: { dates: string[] } | { error: string },
): Promise<ScheduleRow | undefined> {
  return db
    .updateTable('schedules')
    .set('dates' in read ? { ical_holidays: read.dates, ical_fetched_at: sql`now()`, ical_error: null } : { ical_error: read.error })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('ical_url', '=', url)
    .returning([...COLUMNS, ...DATES])
    .executeTakeFirst();
}

/**
 * The schedules whose feed was last read before `readBefore` (or never), oldest first, across workspaces: the daily
 * sweep queues a read for each. Cross-workspace by design (a scheduled job over every feed), from a partial index of
 * the schedules that have a feed.
 */
export async function crossTenantFeedsDue(db: Executor, readBefore: Date, limit: number): Promise<{ tenant_id: string; id: string }[]> {
  return db
    .selectFrom('schedules')
    .select(['tenant_id', 'id'])
    .where('ical_url', 'is not', null)
    .where((eb) => eb.or([eb('ical_fetched_at', 'is', null), eb('ical_fetched_at', '<', readBefore)]))
    .orderBy(sql`ical_fetched_at NULLS FIRST`)
    .limit(limit)
    .execute();
}
