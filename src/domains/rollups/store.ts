import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { RollupJournalTable } from '../../db/types';

// ---- journal and buckets ----

/** One signed change to a bucket: a journal row without its id and workspace. */
export type Delta = Omit<RollupJournalTable, 'id' | 'tenant_id'>;

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
  // One statement per kind: the moved deltas go to the fine buckets and to both grains of the dimensions.
  const time = await sql<{ n: number }>`
    with moved as (
      delete from rollup_journal where tenant_id = ${tenantId} and kind = 'time'
      returning day, user_id, team_id, worked_on, billable, entries, minutes
    ), fine as (
      insert into time_buckets (tenant_id, day, user_id, team_id, worked_on, billable, entries, minutes)
      select ${tenantId}::uuid, day, user_id, team_id, worked_on, billable, sum(entries), sum(minutes)
      from moved group by day, user_id, team_id, worked_on, billable
      on conflict on constraint time_buckets_key
      do update set entries = time_buckets.entries + excluded.entries, minutes = time_buckets.minutes + excluded.minutes
      returning 1
    ), dims as (
      insert into time_dims (tenant_id, grain, period, dim, key, billable, entries, minutes)
      select ${tenantId}::uuid, g.grain, case when g.grain = 'd' then m.day else date_trunc('month', m.day)::date end as period, d.dim, d.key, m.billable,
             sum(m.entries), sum(m.minutes)
      from moved m
      cross join (values ('d'), ('m')) as g(grain)
      cross join lateral (values ('agent', m.user_id::text), ('team', m.team_id::text), ('day', m.worked_on::text)) as d(dim, key)
      group by g.grain, 3, d.dim, d.key, m.billable
      on conflict on constraint time_dims_key
      do update set entries = time_dims.entries + excluded.entries, minutes = time_dims.minutes + excluded.minutes
      returning 1
    )
    select (select count(*) from moved)::int as n, (select count(*) from fine) + (select count(*) from dims) as written`.execute(db);
  const csat = await sql<{ n: number }>`
    with moved as (
      delete from rollup_journal where tenant_id = ${tenantId} and kind = 'csat'
      returning day, user_id, score, entries
    ), fine as (
      insert into csat_buckets (tenant_id, day, assignee_id, score, responses)
      select ${tenantId}::uuid, day, user_id, score, sum(entries) from moved group by day, user_id, score
      on conflict on constraint csat_buckets_key do update set responses = csat_buckets.responses + excluded.responses
      returning 1
    ), dims as (
      insert into csat_dims (tenant_id, grain, period, dim, key, responses, score_sum)
      select ${tenantId}::uuid, g.grain, case when g.grain = 'd' then m.day else date_trunc('month', m.day)::date end as period, d.dim, d.key,
             sum(m.entries), sum(m.entries * m.score)
      from moved m
      cross join (values ('d'), ('m')) as g(grain)
      cross join lateral (values ('agent', m.user_id::text), ('score', m.score::text)) as d(dim, key)
      group by g.grain, 3, d.dim, d.key
      on conflict on constraint csat_dims_key
      do update set responses = csat_dims.responses + excluded.responses, score_sum = csat_dims.score_sum + excluded.score_sum
      returning 1
    )
    select (select count(*) from moved)::int as n, (select count(*) from fine) + (select count(*) from dims) as written`.execute(db);
  // Buckets emptied by deletes are dropped, so they cost reads nothing.
  await sql`delete from time_buckets where tenant_id = ${tenantId} and entries = 0 and minutes = 0`.execute(db);
  await sql`delete from time_dims where tenant_id = ${tenantId} and entries = 0 and minutes = 0`.execute(db);
  await sql`delete from csat_buckets where tenant_id = ${tenantId} and responses = 0`.execute(db);
  await sql`delete from csat_dims where tenant_id = ${tenantId} and responses = 0`.execute(db);
  return { moved: (time.rows[0]?.n ?? 0) + (csat.rows[0]?.n ?? 0) };
}

/** Workspaces with deltas waiting (the sweep folds them if their coalesced job was lost). */
export async function crossTenantWithJournal(db: Executor): Promise<string[]> {
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
  await sql`delete from time_dims where tenant_id = ${tenantId}`.execute(db);
  await sql`delete from csat_dims where tenant_id = ${tenantId}`.execute(db);
  await sql`
    insert into time_dims (tenant_id, grain, period, dim, key, billable, entries, minutes)
    select b.tenant_id, g.grain, case when g.grain = 'd' then b.day else date_trunc('month', b.day)::date end, d.dim, d.key, b.billable, sum(b.entries), sum(b.minutes)
    from time_buckets b
    cross join (values ('d'), ('m')) as g(grain)
    cross join lateral (values ('agent', b.user_id::text), ('team', b.team_id::text), ('day', b.worked_on::text)) as d(dim, key)
    where b.tenant_id = ${tenantId}
    group by 1, 2, 3, 4, 5, 6`.execute(db);
  await sql`
    insert into csat_dims (tenant_id, grain, period, dim, key, responses, score_sum)
    select b.tenant_id, g.grain, case when g.grain = 'd' then b.day else date_trunc('month', b.day)::date end, d.dim, d.key, sum(b.responses), sum(b.score * b.responses)
    from csat_buckets b
    cross join (values ('d'), ('m')) as g(grain)
    cross join lateral (values ('agent', b.assignee_id::text), ('score', b.score::text)) as d(dim, key)
    where b.tenant_id = ${tenantId}
    group by 1, 2, 3, 4, 5`.execute(db);
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
  // The dimension rows, both grains, against the fine buckets plus journal they summarise.
  const { rows: dims } = await sql<{ table: string; grain: string; period: string; dim: string; key: string | null; stored: number; expected: number }>`
    with fine as (
      select day, user_id, team_id, worked_on, billable, entries, minutes from time_buckets where tenant_id = ${tenantId}
      union all
      select day, user_id, team_id, worked_on, billable, entries, minutes from rollup_journal where tenant_id = ${tenantId} and kind = 'time'
    ), expected as (
      select g.grain, case when g.grain = 'd' then f.day else date_trunc('month', f.day)::date end as period, d.dim, d.key, f.billable,
             sum(f.entries) as entries, sum(f.minutes) as minutes
      from fine f cross join (values ('d'), ('m')) as g(grain)
      cross join lateral (values ('agent', f.user_id::text), ('team', f.team_id::text), ('day', f.worked_on::text)) as d(dim, key)
      group by 1, 2, 3, 4, 5
    ), stored as (
      select grain, period, dim, key, billable, sum(entries) as entries, sum(minutes) as minutes from (
        select grain::text, period, dim, key, billable, entries, minutes from time_dims where tenant_id = ${tenantId}
        union all
        select g.grain, case when g.grain = 'd' then j.day else date_trunc('month', j.day)::date end, d.dim, d.key, j.billable, j.entries, j.minutes
        from rollup_journal j cross join (values ('d'), ('m')) as g(grain)
        cross join lateral (values ('agent', j.user_id::text), ('team', j.team_id::text), ('day', j.worked_on::text)) as d(dim, key)
        where j.tenant_id = ${tenantId} and j.kind = 'time'
      ) s group by 1, 2, 3, 4, 5
    )
    select 'time_dims' as table, coalesce(s.grain, e.grain) as grain, coalesce(s.period, e.period)::text as period, coalesce(s.dim, e.dim) as dim,
           coalesce(s.key, e.key) as key, coalesce(s.minutes, 0)::bigint as stored, coalesce(e.minutes, 0)::bigint as expected
    from stored s full join expected e
      on s.grain = e.grain and s.period = e.period and s.dim = e.dim and s.key is not distinct from e.key and s.billable = e.billable
    where coalesce(s.minutes, 0) <> coalesce(e.minutes, 0) or coalesce(s.entries, 0) <> coalesce(e.entries, 0)`.execute(db);
  const { rows: csatDims } = await sql<{ table: string; grain: string; period: string; dim: string; key: string | null; stored: number; expected: number }>`
    with fine as (
      select day, assignee_id, score, responses from csat_buckets where tenant_id = ${tenantId}
      union all
      select day, user_id, score, entries from rollup_journal where tenant_id = ${tenantId} and kind = 'csat'
    ), expected as (
      select g.grain, case when g.grain = 'd' then f.day else date_trunc('month', f.day)::date end as period, d.dim, d.key,
             sum(f.responses) as responses, sum(f.responses * f.score) as score_sum
      from fine f cross join (values ('d'), ('m')) as g(grain)
      cross join lateral (values ('agent', f.assignee_id::text), ('score', f.score::text)) as d(dim, key)
      group by 1, 2, 3, 4
    ), stored as (
      select grain, period, dim, key, sum(responses) as responses, sum(score_sum) as score_sum from (
        select grain::text, period, dim, key, responses, score_sum from csat_dims where tenant_id = ${tenantId}
        union all
        select g.grain, case when g.grain = 'd' then j.day else date_trunc('month', j.day)::date end, d.dim, d.key, j.entries, j.entries * j.score
        from rollup_journal j cross join (values ('d'), ('m')) as g(grain)
        cross join lateral (values ('agent', j.user_id::text), ('score', j.score::text)) as d(dim, key)
        where j.tenant_id = ${tenantId} and j.kind = 'csat'
      ) s group by 1, 2, 3, 4
    )
    select 'csat_dims' as table, coalesce(s.grain, e.grain) as grain, coalesce(s.period, e.period)::text as period, coalesce(s.dim, e.dim) as dim,
           coalesce(s.key, e.key) as key, coalesce(s.responses, 0)::bigint as stored, coalesce(e.responses, 0)::bigint as expected
    from stored s full join expected e on s.grain = e.grain and s.period = e.period and s.dim = e.dim and s.key is not distinct from e.key
    where coalesce(s.responses, 0) <> coalesce(e.responses, 0) or coalesce(s.score_sum, 0) <> coalesce(e.score_sum, 0)`.execute(db);
  return { time, csat, dims: [...dims, ...csatDims] };
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
  // A key whose deltas cancel out (an entry created and deleted before the fold) has no entries: no row.
  return mapAgents(db, tenantId, groups.filter((g) => g.dim === 'total' || g.entries !== 0));
}

/** An agent who is not (or no longer) a member is grouped under the null key: their rows merge into it. */
async function mapAgents(db: Executor, tenantId: string, groups: TimeGroup[]): Promise<TimeGroup[]> {
  const agentIds = groups.filter((g) => g.dim === 'agent' && g.key).map((g) => g.key!);
  const members = new Set(
    agentIds.length === 0
      ? []
      : (await db.selectFrom('memberships').select('user_id').where('tenant_id', '=', tenantId).where('user_id', 'in', agentIds).execute()).map((m) => m.user_id),
  );
  const out: TimeGroup[] = [];
  let unknown: TimeGroup | undefined;
  for (const g of groups) {
    if (g.dim === 'agent' && (g.key === null || !members.has(g.key))) unknown = unknown ? merge(unknown, { ...g, key: null }) : { ...g, key: null };
    else out.push(g);
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
  /** The agent's name while they are a member of the workspace. */
  name?: string | null;
}

const monthOf = (day: string) => `${day.slice(0, 7)}-01`;
const monthAfter = (day: string) => {
  const d = new Date(`${monthOf(day)}T00:00:00Z`);
  d.setUTCMonth(d.getUTCMonth() + 1);
  return d.toISOString().slice(0, 10);
};

/**
 * The unfiltered time read: per-dimension rows, day grain for the rest of the edge day's month and month
 * grain for every later month (the current one included: nothing exists after now), plus the journal and
 * the raw edge day exploded into the same dimensions — one statement, one snapshot. Total is the sum of the
 * team rows (every entry has exactly one team key, null included).
 */
export async function timeDimGroups(db: Executor, tenantId: string, w: Window): Promise<TimeGroup[]> {
  const { rows } = await sql<{ dim: 'agent' | 'team' | 'day'; key: string | null; entries: number; minutes: number; billable: number }>`
    with facts as (
      select dim, key, billable, entries, minutes from time_dims
      where tenant_id = ${tenantId} and grain = 'd' and period > ${w.edgeDay}::date and period < ${monthAfter(w.edgeDay)}::date
      union all
      select dim, key, billable, entries, minutes from time_dims
      where tenant_id = ${tenantId} and grain = 'm' and period > ${monthOf(w.edgeDay)}::date
      union all
      select d.dim, d.key, j.billable, j.entries, j.minutes
      from (
        select user_id, team_id, worked_on, billable, entries, minutes from rollup_journal
        where tenant_id = ${tenantId} and kind = 'time' and day > ${w.edgeDay}::date
        union all
        -- The edge day's raw rows, summed per key before they are exploded into the three dimensions: the
        -- day holds 1/since_days of the window's entries (55,000 at 10 million), and exploding each row
        -- made the read grow with the table.
        select user_id, team_id, worked_on, billable, count(*), sum(minutes) from time_entries
        where tenant_id = ${tenantId} and created_at > ${w.cutoff} and created_at < (${w.edgeDay}::date + 1)::timestamp at time zone 'UTC'
        group by user_id, team_id, worked_on, billable
      ) as j
      cross join lateral (values ('agent', j.user_id::text), ('team', j.team_id::text), ('day', j.worked_on::text)) as d(dim, key)
    )
    select dim, key, sum(entries)::bigint as entries, sum(minutes)::bigint as minutes, coalesce(sum(minutes) filter (where billable), 0)::bigint as billable
    from facts group by dim, key having sum(entries) <> 0`.execute(db);
  const groups: TimeGroup[] = rows.map((r) => ({ dim: r.dim, key: r.key, entries: Number(r.entries), minutes: Number(r.minutes), billable: Number(r.billable) }));
  const teams = groups.filter((g) => g.dim === 'team');
  groups.push({ dim: 'total', key: null, ...teams.reduce((t, g) => ({ entries: t.entries + g.entries, minutes: t.minutes + g.minutes, billable: t.billable + g.billable }), { entries: 0, minutes: 0, billable: 0 }) });
  return mapAgents(db, tenantId, groups);
}

/** Satisfaction from its dimension rows at two grains, the journal and the raw edge day, in one statement. */
export async function csatGroups(db: Executor, tenantId: string, w: Pick<Window, 'cutoff' | 'edgeDay'>): Promise<CsatGroup[]> {
  const { rows } = await sql<CsatGroup>`
    with facts as (
      select dim, key, responses, score_sum from csat_dims
      where tenant_id = ${tenantId} and grain = 'd' and period > ${w.edgeDay}::date and period < ${monthAfter(w.edgeDay)}::date
      union all
      select dim, key, responses, score_sum from csat_dims
      where tenant_id = ${tenantId} and grain = 'm' and period > ${monthOf(w.edgeDay)}::date
      union all
      select d.dim, d.key, j.n, j.n * j.score
      from (
        select user_id as assignee_id, score, entries as n from rollup_journal where tenant_id = ${tenantId} and kind = 'csat' and day > ${w.edgeDay}::date
        union all
        select assignee_id, score, 1 from csat_responses
        where tenant_id = ${tenantId} and created_at > ${w.cutoff} and created_at < (${w.edgeDay}::date + 1)::timestamp at time zone 'UTC'
      ) as j
      cross join lateral (values ('agent', j.assignee_id::text), ('score', j.score::text)) as d(dim, key)
    )
    , grouped as (
      select dim, key, sum(responses)::bigint as responses, sum(score_sum)::bigint as score_sum from facts group by dim, key having sum(responses) <> 0
    )
    select g.dim, g.key, g.responses, g.score_sum, u.name
    from grouped g
    left join memberships m on g.dim = 'agent' and m.tenant_id = ${tenantId} and m.user_id::text = g.key
    left join users u on u.id = m.user_id`.execute(db);
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

