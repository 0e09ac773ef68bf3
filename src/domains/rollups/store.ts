import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { CsatResponseRow, TimeEntryRow, TodoRow } from '../../db/types';

// ---- sources ----

export async function insertTimeEntry(db: Executor, tenantId: string, e: Omit<TimeEntryRow, 'tenant_id' | 'created_at'>): Promise<TimeEntryRow> {
  return db.insertInto('time_entries').values({ ...e, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

export async function lockTimeEntry(db: Executor, tenantId: string, id: string): Promise<TimeEntryRow | undefined> {
  return db.selectFrom('time_entries').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
}

export async function updateTimeEntry(db: Executor, tenantId: string, id: string, patch: Partial<Pick<TimeEntryRow, 'minutes' | 'billable' | 'user_id' | 'worked_on'>>) {
  return db.updateTable('time_entries').set(patch).where('tenant_id', '=', tenantId).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export async function deleteTimeEntry(db: Executor, tenantId: string, id: string): Promise<void> {
  await db.deleteFrom('time_entries').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
}

export async function listTimeEntries(db: Executor, tenantId: string, ticketId: string): Promise<TimeEntryRow[]> {
  return db.selectFrom('time_entries').selectAll().where('tenant_id', '=', tenantId).where('ticket_id', '=', ticketId).orderBy('created_at').orderBy('id').execute();
}

export async function insertTodo(db: Executor, tenantId: string, t: Omit<TodoRow, 'tenant_id' | 'created_at' | 'done_at'>): Promise<TodoRow> {
  return db.insertInto('todos').values({ ...t, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

export async function updateTodo(db: Executor, tenantId: string, id: string, patch: Partial<Pick<TodoRow, 'title' | 'assignee_id' | 'due_at' | 'done_at'>>) {
  return db.updateTable('todos').set(patch).where('tenant_id', '=', tenantId).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function deleteTodo(db: Executor, tenantId: string, id: string): Promise<boolean> {
  const r = await db.deleteFrom('todos').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

export async function getTodo(db: Executor, tenantId: string, id: string): Promise<TodoRow | undefined> {
  return db.selectFrom('todos').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

export async function insertCsat(db: Executor, tenantId: string, c: Omit<CsatResponseRow, 'tenant_id' | 'created_at'>): Promise<CsatResponseRow> {
  return db.insertInto('csat_responses').values({ ...c, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

export async function isMember(db: Executor, tenantId: string, userId: string): Promise<boolean> {
  return (await db.selectFrom('memberships').select('user_id').where('tenant_id', '=', tenantId).where('user_id', '=', userId).executeTakeFirst()) !== undefined;
}

// ---- journal and buckets ----

export interface Delta {
  kind: 'time' | 'csat';
  /** The UTC day of the source row's created_at: the bucket it belongs to. */
  day: string;
  user_id: string | null;
  team_id: string | null;
  worked_on: string | null;
  billable: boolean | null;
  score: number | null;
  entries: number;
  minutes: number;
}

export async function journal(db: Executor, tenantId: string, deltas: Delta[]): Promise<void> {
  if (deltas.length === 0) return;
  await db
    .insertInto('rollup_journal')
    .values(deltas.map((d) => ({ ...d, tenant_id: tenantId })))
    .execute();
}

export const dayOf = (at: Date) => at.toISOString().slice(0, 10);

/**
 * Moves the workspace's journal into its buckets in one transaction (one fold at a time per workspace).
 * A delta committed after this statement's snapshot stays in the journal for the next fold; reads count
 * it from there meanwhile.
 */
export async function fold(db: Executor, tenantId: string): Promise<{ moved: number }> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`rollups|${tenantId}`}, 0))`.execute(db);
  const time = await sql<{ n: number }>`
    with moved as (
      delete from rollup_journal where tenant_id = ${tenantId} and kind = 'time'
      returning day, user_id, team_id, worked_on, billable, entries, minutes
    ), grouped as (
      select day, user_id, team_id, worked_on, billable, sum(entries) as entries, sum(minutes) as minutes, count(*) as n
      from moved group by day, user_id, team_id, worked_on, billable
    ), applied as (
      insert into time_buckets (tenant_id, day, user_id, team_id, worked_on, billable, entries, minutes)
      select ${tenantId}::uuid, day, user_id, team_id, worked_on, billable, entries, minutes from grouped
      on conflict on constraint time_buckets_key
      do update set entries = time_buckets.entries + excluded.entries, minutes = time_buckets.minutes + excluded.minutes
      returning 1
    )
    select coalesce(sum(n), 0)::int as n from grouped where (select count(*) from applied) >= 0`.execute(db);
  const csat = await sql<{ n: number }>`
    with moved as (
      delete from rollup_journal where tenant_id = ${tenantId} and kind = 'csat'
      returning day, user_id, score, entries
    ), grouped as (
      select day, user_id, score, sum(entries) as responses, count(*) as n from moved group by day, user_id, score
    ), applied as (
      insert into csat_buckets (tenant_id, day, assignee_id, score, responses)
      select ${tenantId}::uuid, day, user_id, score, responses from grouped
      on conflict on constraint csat_buckets_key do update set responses = csat_buckets.responses + excluded.responses
      returning 1
    )
    select coalesce(sum(n), 0)::int as n from grouped where (select count(*) from applied) >= 0`.execute(db);
  // Buckets emptied by deletes are dropped, so they cost reads nothing.
  await sql`delete from time_buckets where tenant_id = ${tenantId} and entries = 0 and minutes = 0`.execute(db);
  await sql`delete from csat_buckets where tenant_id = ${tenantId} and responses = 0`.execute(db);
  return { moved: (time.rows[0]?.n ?? 0) + (csat.rows[0]?.n ?? 0) };
}

/** Workspaces with deltas waiting (the sweep folds them if their coalesced job was lost). */
export async function tenantsWithJournal(db: Executor): Promise<string[]> {
  const { rows } = await sql<{ tenant_id: string }>`select distinct tenant_id from rollup_journal`.execute(db);
  return rows.map((r) => r.tenant_id);
}

/** Rebuilds the workspace's buckets from raw rows (the bench's loader and the repair after a verify). */
export async function rebuild(db: Executor, tenantId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`rollups|${tenantId}`}, 0))`.execute(db);
  await sql`delete from rollup_journal where tenant_id = ${tenantId}`.execute(db);
  await sql`delete from time_buckets where tenant_id = ${tenantId}`.execute(db);
  await sql`delete from csat_buckets where tenant_id = ${tenantId}`.execute(db);
  await sql`
    insert into time_buckets (tenant_id, day, user_id, team_id, worked_on, billable, entries, minutes)
    select tenant_id, (created_at at time zone 'UTC')::date, user_id, team_id, worked_on, billable, count(*), sum(minutes)
    from time_entries where tenant_id = ${tenantId}
    group by tenant_id, 2, user_id, team_id, worked_on, billable`.execute(db);
  await sql`
    insert into csat_buckets (tenant_id, day, assignee_id, score, responses)
    select tenant_id, (created_at at time zone 'UTC')::date, assignee_id, score, count(*)
    from csat_responses where tenant_id = ${tenantId}
    group by tenant_id, 2, assignee_id, score`.execute(db);
}

/** Buckets plus journal versus raw rows, per bucket key; the rows where they differ. */
export async function differences(db: Executor, tenantId: string) {
  const { rows: time } = await sql<{ day: string; user_id: string | null; team_id: string | null; worked_on: string | null; billable: boolean; folded_minutes: number; raw_minutes: number; folded_entries: number; raw_entries: number }>`
    with folded as (
      select day, user_id, team_id, worked_on, billable, sum(entries)::bigint as entries, sum(minutes)::bigint as minutes from (
        select day, user_id, team_id, worked_on, billable, entries, minutes from time_buckets where tenant_id = ${tenantId}
        union all
        select day, user_id, team_id, worked_on, billable, entries, minutes from rollup_journal where tenant_id = ${tenantId} and kind = 'time'
      ) f group by 1, 2, 3, 4, 5
    ), raw as (
      select (created_at at time zone 'UTC')::date as day, user_id, team_id, worked_on, billable, count(*)::bigint as entries, sum(minutes)::bigint as minutes
      from time_entries where tenant_id = ${tenantId} group by 1, 2, 3, 4, 5
    )
    select coalesce(f.day, r.day)::text as day, coalesce(f.user_id, r.user_id) as user_id, coalesce(f.team_id, r.team_id) as team_id,
           coalesce(f.worked_on, r.worked_on)::text as worked_on, coalesce(f.billable, r.billable) as billable,
           coalesce(f.minutes, 0) as folded_minutes, coalesce(r.minutes, 0) as raw_minutes, coalesce(f.entries, 0) as folded_entries, coalesce(r.entries, 0) as raw_entries
    from folded f full join raw r
      on f.day = r.day and f.user_id is not distinct from r.user_id and f.team_id is not distinct from r.team_id
     and f.worked_on is not distinct from r.worked_on and f.billable = r.billable
    where coalesce(f.minutes, 0) <> coalesce(r.minutes, 0) or coalesce(f.entries, 0) <> coalesce(r.entries, 0)`.execute(db);
  const { rows: csat } = await sql<{ day: string; assignee_id: string | null; score: number; folded: number; raw: number }>`
    with folded as (
      select day, assignee_id, score, sum(responses)::bigint as responses from (
        select day, assignee_id, score, responses from csat_buckets where tenant_id = ${tenantId}
        union all
        select day, user_id, score, entries from rollup_journal where tenant_id = ${tenantId} and kind = 'csat'
      ) f group by 1, 2, 3
    ), raw as (
      select (created_at at time zone 'UTC')::date as day, assignee_id, score, count(*)::bigint as responses
      from csat_responses where tenant_id = ${tenantId} group by 1, 2, 3
    )
    select coalesce(f.day, r.day)::text as day, coalesce(f.assignee_id, r.assignee_id) as assignee_id, coalesce(f.score, r.score) as score,
           coalesce(f.responses, 0) as folded, coalesce(r.responses, 0) as raw
    from folded f full join raw r on f.day = r.day and f.assignee_id is not distinct from r.assignee_id and f.score = r.score
    where coalesce(f.responses, 0) <> coalesce(r.responses, 0)`.execute(db);
  return { time, csat };
}

// ---- reads ----

export interface Window {
  /** now() − since_days: entries strictly after it count. */
  cutoff: Date;
  /** The UTC day containing the cutoff: read from raw rows; later days from buckets and journal. */
  edgeDay: string;
  userId: string | null;
  teamId: string | null;
}

export interface TimeGroup {
  dim: 'total' | 'agent' | 'team' | 'day';
  key: string | null;
  entries: number;
  minutes: number;
  billable: number;
}

/**
 * One statement, so one snapshot: buckets and journal for the whole days after the edge day, raw rows for
 * the edge day's part inside the window, aggregated in one pass (grouping sets). A fold commits atomically,
 * so no delta is seen twice or missed. An agent who is no longer a member of the workspace (or never was) is
 * grouped under the null key.
 */
export async function timeGroups(db: Executor, tenantId: string, w: Window): Promise<TimeGroup[]> {
  const { rows } = await sql<TimeGroup>`
    with facts as (
      select user_id, team_id, worked_on, billable, entries, minutes from time_buckets
      where tenant_id = ${tenantId} and day > ${w.edgeDay}::date
        and (${w.userId}::uuid is null or user_id = ${w.userId}::uuid) and (${w.teamId}::uuid is null or team_id = ${w.teamId}::uuid)
      union all
      select user_id, team_id, worked_on, billable, entries, minutes from rollup_journal
      where tenant_id = ${tenantId} and kind = 'time' and day > ${w.edgeDay}::date
        and (${w.userId}::uuid is null or user_id = ${w.userId}::uuid) and (${w.teamId}::uuid is null or team_id = ${w.teamId}::uuid)
      union all
      select user_id, team_id, worked_on, billable, 1, minutes from time_entries
      where tenant_id = ${tenantId} and created_at > ${w.cutoff} and created_at < (${w.edgeDay}::date + 1)::timestamp at time zone 'UTC'
        and (${w.userId}::uuid is null or user_id = ${w.userId}::uuid) and (${w.teamId}::uuid is null or team_id = ${w.teamId}::uuid)
    )
    select case when grouping(user_id) = 0 then 'agent' when grouping(team_id) = 0 then 'team' when grouping(worked_on) = 0 then 'day' else 'total' end as dim,
           coalesce(case when grouping(user_id) = 0 then user_id::text end, case when grouping(team_id) = 0 then team_id::text end,
                    case when grouping(worked_on) = 0 then worked_on::text end) as key,
           coalesce(sum(entries), 0)::bigint as entries, coalesce(sum(minutes), 0)::bigint as minutes,
           coalesce(sum(minutes) filter (where billable), 0)::bigint as billable
    from facts
    group by grouping sets ((user_id), (team_id), (worked_on), ())`.execute(db);
  const groups = rows.map((r) => ({ ...r, entries: Number(r.entries), minutes: Number(r.minutes), billable: Number(r.billable) }));
  // An agent who is not (or no longer) a member is grouped under the null key: their rows merge into it.
  const agentIds = groups.filter((g) => g.dim === 'agent' && g.key).map((g) => g.key!);
  const members = new Set(
    agentIds.length === 0
      ? []
      : (await db.selectFrom('memberships').select('user_id').where('tenant_id', '=', tenantId).where('user_id', 'in', agentIds).execute()).map((m) => m.user_id),
  );
  const out: TimeGroup[] = [];
  let unknown: TimeGroup | undefined;
  for (const g of groups) {
    if (g.dim !== 'agent' || g.key === null || members.has(g.key)) {
      if (g.dim === 'agent' && g.key === null) unknown = unknown ? merge(unknown, g) : g;
      else out.push(g);
      continue;
    }
    unknown = unknown ? merge(unknown, { ...g, key: null }) : { ...g, key: null };
  }
  if (unknown) out.push(unknown);
  return out;
}

const merge = (a: TimeGroup, b: TimeGroup): TimeGroup => ({ ...a, entries: a.entries + b.entries, minutes: a.minutes + b.minutes, billable: a.billable + b.billable });

export interface CsatGroup {
  dim: 'agent' | 'score';
  key: string | null;
  responses: number;
  score_sum: number;
}

export async function csatGroups(db: Executor, tenantId: string, w: Pick<Window, 'cutoff' | 'edgeDay'>): Promise<CsatGroup[]> {
  const { rows } = await sql<CsatGroup>`
    with facts as materialized (
      select assignee_id, score, responses from csat_buckets where tenant_id = ${tenantId} and day > ${w.edgeDay}::date
      union all
      select user_id, score, entries from rollup_journal where tenant_id = ${tenantId} and kind = 'csat' and day > ${w.edgeDay}::date
      union all
      select assignee_id, score, 1 from csat_responses
      where tenant_id = ${tenantId} and created_at > ${w.cutoff} and created_at < (${w.edgeDay}::date + 1)::timestamp at time zone 'UTC'
    )
    select 'agent' as dim, assignee_id::text as key, sum(responses)::bigint as responses, sum(score * responses)::bigint as score_sum
    from facts group by assignee_id having sum(responses) <> 0
    union all
    select 'score', score::text, sum(responses)::bigint, sum(score * responses)::bigint from facts group by score`.execute(db);
  return rows.map((r) => ({ ...r, responses: Number(r.responses), score_sum: Number(r.score_sum) }));
}

export interface TodoGroup {
  dim: 'total' | 'assignee' | 'ticket';
  key: string | null;
  subject: string | null;
  total: number;
  open: number;
  done: number;
  overdue: number;
}

/** Todos straight from their rows (few per ticket, and `overdue` moves with the clock); served by todos_window. */
export async function todoGroups(db: Executor, tenantId: string, w: Window): Promise<TodoGroup[]> {
  const { rows } = await sql<TodoGroup & { g_ticket: number; g_assignee: number }>`
    select grouping(t.ticket_id, tk.subject) as g_ticket, grouping(t.assignee_id) as g_assignee,
           t.ticket_id::text as ticket_key, tk.subject, t.assignee_id::text as assignee_key,
           count(*)::int as total, count(*) filter (where t.done_at is null)::int as open,
           count(*) filter (where t.done_at is not null)::int as done,
           count(*) filter (where t.done_at is null and t.due_at < now())::int as overdue
    from todos t
    join tickets tk on tk.tenant_id = t.tenant_id and tk.id = t.ticket_id
    where t.tenant_id = ${tenantId} and t.created_at > ${w.cutoff}
      and (${w.userId}::uuid is null or t.assignee_id = ${w.userId}::uuid) and (${w.teamId}::uuid is null or tk.team_id = ${w.teamId}::uuid)
    group by grouping sets ((t.ticket_id, tk.subject), (t.assignee_id), ())`.execute(db);
  return rows.map((r) => {
    const row = r as unknown as { g_ticket: number; g_assignee: number; ticket_key: string | null; assignee_key: string | null; subject: string | null; total: number; open: number; done: number; overdue: number };
    const dim: TodoGroup['dim'] = row.g_ticket === 0 ? 'ticket' : row.g_assignee === 0 ? 'assignee' : 'total';
    return { dim, key: dim === 'ticket' ? row.ticket_key : dim === 'assignee' ? row.assignee_key : null, subject: row.subject, total: row.total, open: row.open, done: row.done, overdue: row.overdue };
  });
}

export async function names(db: Executor, tenantId: string, userIds: string[], teamIds: string[]) {
  const users = userIds.length
    ? await db
        .selectFrom('users as u')
        .innerJoin('memberships as m', 'm.user_id', 'u.id')
        .select(['u.id', 'u.name'])
        .where('m.tenant_id', '=', tenantId)
        .where('u.id', 'in', userIds)
        .execute()
    : [];
  const teams = teamIds.length ? await db.selectFrom('teams').select(['id', 'name']).where('tenant_id', '=', tenantId).where('id', 'in', teamIds).execute() : [];
  return { users: new Map(users.map((u) => [u.id, u.name])), teams: new Map(teams.map((t) => [t.id, t.name])) };
}
