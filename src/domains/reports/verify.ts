import type { Db, Executor } from '../../db';
import { clockOf } from '../schedules/clocks';
import { BUCKET_BOUNDS } from './buckets';
import { datesBetween, type ReportName, type ReportQuery } from './present';
import { businessMinutes } from './service';
import * as store from './store';
import * as raw from './verify-store';

/*
 * reports:verify and the comparisons of the tests and the bench: each report computed from raw rows with plain SQL
 * (verify-store.ts), shaped as the API answers it, without any of the precomputed days, the journal or the
 * answer-building code the service uses.
 */

const bound = (b: number | null) => (b === null ? null : BUCKET_BOUNDS[b]!);
const round = (x: number, places: number) => Math.round(x * 10 ** places) / 10 ** places;
const ratio = (a: number, b: number, places: number) => (b === 0 ? null : round(a / b, places));

/** One report recomputed from raw rows, in the API's shape (`time_zone` is the zone the days are cut in). */
export async function rawReport(db: Executor, tenantId: string, name: ReportName, q: ReportQuery) {
  const zone = await store.bucketZone(db, tenantId);
  const filters = {
    ...(q.team_id ? { team_id: q.team_id } : {}),
    ...(q.agent_id ? { agent_id: q.agent_id } : {}),
    ...(q.channel ? { channel: q.channel } : {}),
    ...(q.priority ? { priority: q.priority } : {}),
  };
  const base = { report: name, from: q.from, to: q.to, time_zone: zone, filters };
  const dates = datesBetween(q.from, q.to);
  /** Day rows by date and the total row (day null), zero-filled by `zero`. */
  const fill = <R extends { day: string | null }, O>(rows: R[], shape: (r: R | undefined) => O) => {
    const byDay = new Map(rows.filter((r) => r.day !== null).map((r) => [r.day!, r]));
    return { days: dates.map((date) => ({ date, ...shape(byDay.get(date)) })), total: shape(rows.find((r) => r.day === null)) };
  };
  switch (name) {
    case 'first_response_time':
    case 'resolution_time': {
      const rows = await raw.rawTimes(db, tenantId, name === 'first_response_time' ? 'frt' : 'res', q);
      return {
        ...base,
        ...fill(rows, (r) => ({
          tickets: r?.n ?? 0,
          median_minutes: bound(r?.p50 ?? null),
          p90_minutes: bound(r?.p90 ?? null),
          mean_minutes: r ? ratio(r.sum, r.n, 1) : null,
          median_business_minutes: bound(r?.bp50 ?? null),
          p90_business_minutes: bound(r?.bp90 ?? null),
          mean_business_minutes: r ? ratio(r.bsum, r.n, 1) : null,
        })),
      };
    }
    case 'replies_per_ticket':
    case 'reopens': {
      const rows = await raw.rawSolvedTickets(db, tenantId, q);
      return {
        ...base,
        ...fill(rows, (r) =>
          name === 'replies_per_ticket'
            ? { solved_tickets: r?.solved ?? 0, replies: r?.replies ?? 0, replies_per_ticket: r ? ratio(r.replies, r.solved, 2) : null }
            : { solved_tickets: r?.solved ?? 0, reopened_tickets: r?.reopened ?? 0, reopens: r?.reopens ?? 0, reopened_share: r ? ratio(r.reopened, r.solved, 4) : null },
        ),
      };
    }
    case 'backlog': {
      const rows = await raw.rawBacklog(db, tenantId, q);
      return { ...base, days: rows.map((r) => ({ date: r.day, backlog: r.backlog })), total: { opening: rows[0]?.opening ?? 0, closing: rows.at(-1)?.backlog ?? 0 } };
    }
    case 'sla': {
      const rows = await raw.rawSla(db, tenantId, q);
      const part = (n: number, met: number) => ({ measured: n, met, share: ratio(met, n, 4) });
      return { ...base, ...fill(rows, (r) => ({ first_reply: part(r?.first_n ?? 0, r?.first_met ?? 0), resolution: part(r?.res_n ?? 0, r?.res_met ?? 0) })) };
    }
    case 'volume': {
      const rows = await raw.rawVolume(db, tenantId, q);
      return { ...base, ...fill(rows, (r) => ({ created: r?.created ?? 0, solved: r?.solved ?? 0, reopened: r?.reopened ?? 0 })) };
    }
    case 'agent_activity': {
      const rows = await raw.rawActivity(db, tenantId, q);
      const shape = (r: (typeof rows)[number] | undefined) => ({ replies: r?.replies ?? 0, notes: r?.notes ?? 0, solved: r?.solved ?? 0, time_entries: r?.entries ?? 0, minutes_logged: r?.minutes ?? 0 });
      const perDay = rows.filter((r) => r.grouped_agent === 1);
      const perAgent = rows.filter((r) => r.grouped_agent === 0 && r.day === null);
      const names = await store.memberNames(db, tenantId, perAgent.flatMap((r) => (r.agent ? [r.agent] : [])));
      const agents = perAgent
        .map((r) => ({ agent_id: r.agent, ...(r.agent && names.has(r.agent) ? { agent_name: names.get(r.agent)! } : {}), ...shape(r) }))
        .sort((x, y) => y.replies - x.replies || y.solved - x.solved || y.minutes_logged - x.minutes_logged || String(x.agent_id).localeCompare(String(y.agent_id)));
      return { ...base, ...fill(perDay, shape), agents };
    }
  }
}

export interface Verification {
  /** Cells of report_days (plus the journal) that differ from the raw recomputation. */
  differences: raw.Difference[];
  /** Tickets whose recorded business minutes differ from a measurement on their schedule as it is now. */
  remeasured: { ticket_id: string; fact: 'first_reply' | 'resolution'; recorded: number | null; now: number }[];
}

/**
 * Every day and filter key against raw rows, in one REPEATABLE READ snapshot; then each scheduled ticket's recorded
 * business minutes against today's schedule (a difference there is a schedule that changed since, not an error of
 * the reports: --remeasure records today's measurement).
 */
export async function verifyWorkspace(db: Db, tenantId: string, limit = 1000): Promise<Verification> {
  const differences = await db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute((tx) => raw.differences(tx, tenantId, limit));
  const remeasured: Verification['remeasured'] = [];
  let after: string | null = null;
  for (;;) {
    const rows = await raw.recordedBusiness(db, tenantId, after, 5000);
    if (rows.length === 0) break;
    const clocks = new Map((await store.schedules(db, tenantId, [...new Set(rows.map((r) => r.schedule_id))])).map((s) => [s.id, clockOf(s)]));
    for (const r of rows) {
      const clock = clocks.get(r.schedule_id) ?? null;
      if (r.first_reply_at) {
        const now = businessMinutes(clock, r.created_at, r.first_reply_at);
        if (now !== r.frt_business) remeasured.push({ ticket_id: r.ticket_id, fact: 'first_reply', recorded: r.frt_business, now });
      }
      if (r.resolved_at) {
        const now = businessMinutes(clock, r.created_at, r.resolved_at);
        if (now !== r.res_business) remeasured.push({ ticket_id: r.ticket_id, fact: 'resolution', recorded: r.res_business, now });
      }
    }
    after = rows.at(-1)!.ticket_id;
  }
  return { differences, remeasured };
}
