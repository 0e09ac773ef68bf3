/**
 * Reports (issue 37): writes made straight in SQL and handed to the reports' write path (`reports.track` and
 * `reports.entriesChanged`, what the ticket timeline and the work service call in their transactions), so a test
 * can place events at chosen instants, out of order, and a generator can make a million of them set-based.
 */
import { sql } from 'kysely';
import type { Db, Executor } from '../../src/db';
import type { Principal } from '../../src/domains/identity/principal';
import type { ReportName, ReportQuery } from '../../src/domains/reports/present';
import type { ReportService } from '../../src/domains/reports/service';
import { rawReport } from '../../src/domains/reports/verify';
import type { TimeEntryRow } from '../../src/db/types';
import { newId } from '../../src/lib/ids';

export const REPORTS: ReportName[] = ['first_response_time', 'resolution_time', 'replies_per_ticket', 'reopens', 'backlog', 'sla', 'volume', 'agent_activity'];

/** The workspace's owner as a principal (reports read as anyone in it would). */
export const ownerOf = (tenantId: string, userId: string): Principal => ({ kind: 'user', tenantId, userId, role: 'owner', apiKeyId: null, scopes: null, agentIds: [] });

export interface EventSpec {
  kind: string;
  at: string;
  meta?: Record<string, unknown>;
  actor?: string | null;
}

/**
 * One write to a ticket: its row changed (`set`, SQL assignments), events appended at the instants given, then the
 * reports told in the same transaction, as the timeline tells them.
 */
export async function writeTicket(db: Db, reports: ReportService, tenantId: string, ticketId: string, w: { set?: Record<string, unknown>; events?: EventSpec[] }) {
  await db.transaction().execute(async (tx) => {
    if (w.set && Object.keys(w.set).length > 0) {
      await tx.updateTable('tickets').set(w.set as never).where('tenant_id', '=', tenantId).where('id', '=', ticketId).execute();
    }
    const ids: string[] = [];
    for (const e of w.events ?? []) {
      const id = newId();
      ids.push(id);
      await tx
        .insertInto('ticket_events')
        .values({ id, tenant_id: tenantId, ticket_id: ticketId, kind: e.kind, body: '', meta: JSON.stringify(e.meta ?? {}), actor_type: e.actor ? 'user' : 'system', actor_user_id: e.actor ?? null, actor_name: null, created_at: new Date(e.at) } as never)
        .execute();
    }
    await reports.track(tx, tenantId, [ticketId], ids);
  });
}

/** A ticket opened at `at` with its first event, tracked as the ticket commands' open is. */
export async function openTicket(
  db: Db,
  reports: ReportService,
  tenantId: string,
  t: { at: string; customerId: string; policyId: string; team_id?: string | null; assignee_id?: string | null; source?: string; priority?: string; first_response_due: string; resolution_due: string },
): Promise<string> {
  const id = newId();
  await db.transaction().execute(async (tx) => {
    await tx
      .insertInto('tickets')
      .values({
        id,
        tenant_id: tenantId,
        subject: 'Scenario',
        description: '',
        status: 'open',
        priority: t.priority ?? 'normal',
        source: t.source ?? 'email',
        customer_id: t.customerId,
        assignee_id: t.assignee_id ?? null,
        team_id: t.team_id ?? null,
        metadata: '{}',
        sla_policy_id: t.policyId,
        first_response_due: new Date(t.first_response_due),
        resolution_due: new Date(t.resolution_due),
        created_at: new Date(t.at),
        updated_at: new Date(t.at),
        status_entered_at: new Date(t.at),
      } as never)
      .execute();
    const eventId = newId();
    await tx
      .insertInto('ticket_events')
      .values({ id: eventId, tenant_id: tenantId, ticket_id: id, kind: 'created', body: '', meta: '{}', actor_type: 'system', actor_user_id: null, actor_name: null, created_at: new Date(t.at) } as never)
      .execute();
    await reports.track(tx, tenantId, [id], [eventId]);
  });
  return id;
}

/** Time logged on a ticket at `at`, journaled as the work service journals it. */
export async function logTime(db: Db, reports: ReportService, tenantId: string, ticketId: string, userId: string, minutes: number, at: string) {
  await db.transaction().execute(async (tx) => {
    const row = (await tx
      .insertInto('time_entries')
      .values({ id: newId(), tenant_id: tenantId, ticket_id: ticketId, user_id: userId, team_id: null, minutes, billable: true, worked_on: null, created_at: new Date(at) } as never)
      .returningAll()
      .executeTakeFirstOrThrow()) as TimeEntryRow;
    await reports.entriesChanged(tx, tenantId, ticketId, { added: [row] });
  });
}

/** Every report, and each of `queries`, read through the service and recomputed from raw rows: they must be equal. */
export async function expectReportsEqualRaw(db: Db, reports: ReportService, actor: Principal, queries: ReportQuery[]) {
  let compared = 0;
  for (const q of queries) {
    for (const name of REPORTS) {
      const got = await reports.report(actor, name, q);
      const want = await rawReport(db, actor.tenantId, name, q);
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        // The first differing day, for a readable failure.
        expect({ name, q, got }).toEqual({ name, q, got: want });
      }
      compared += 1;
    }
  }
  return compared;
}

export const journalRows = async (db: Executor, tenantId: string) =>
  Number((await sql<{ n: string }>`SELECT count(*) AS n FROM report_journal WHERE tenant_id = ${tenantId}`.execute(db)).rows[0]!.n);

// ---- the generator: many events, set-based, out of order ----

export interface Generated {
  tickets: number;
  events: number;
  entries: number;
  tracked: number;
  /** Seconds spent per action (writes and tracking) and folding. */
  seconds: Record<string, number>;
}

interface World {
  db: Db;
  reports: ReportService;
  tenantId: string;
  agents: string[];
  teams: string[];
  customerId: string;
  policyId: string;
}

const TRACK_CHUNK = 5000;

/** Hands what one transaction wrote (ticket, event pairs) to the reports' write path, a chunk of tickets at a time. */
async function trackAll(tx: Executor, w: World, rows: { ticket_id: string; event_id: string | null }[]) {
  const byTicket = new Map<string, string[]>();
  for (const r of rows) {
    const list = byTicket.get(r.ticket_id) ?? [];
    if (r.event_id) list.push(r.event_id);
    byTicket.set(r.ticket_id, list);
  }
  const tickets = [...byTicket.keys()];
  for (let i = 0; i < tickets.length; i += TRACK_CHUNK) {
    const chunk = tickets.slice(i, i + TRACK_CHUNK);
    await w.reports.track(tx, w.tenantId, chunk, chunk.flatMap((t) => byTicket.get(t)!));
  }
  return tickets.length;
}

/** A generator transaction writes tens of thousands of rows (and their search documents) per statement: ten minutes, not 15 s. */
const bulk = (tx: Executor) => sql`SELECT set_config('statement_timeout', '600000', true)`.execute(tx);

const pick = (arr: string) => sql.raw(`(${arr})[1 + floor(random() * cardinality(${arr}))::int]`);

/**
 * One action on a random share `p` of the tickets that can take it, as one transaction: the rows written set-based,
 * then tracked. Instants are random within days of the ticket's start, so events arrive out of order (a reply
 * earlier than one already counted, a reopen dated before the solve it undoes, a move between dimensions).
 */
async function act(w: World, action: string, p: number): Promise<number> {
  const { tenantId: t } = w;
  return w.db.transaction().execute(async (tx) => {
    await bulk(tx);
    const agentsArr = `'{${w.agents.join(',')}}'::uuid[]`;
    const teamsArr = `'{${w.teams.join(',')}}'::uuid[]`;
    let q;
    switch (action) {
      case 'reply':
      case 'note':
        q = sql<{ ticket_id: string; event_id: string }>`
          WITH s AS (SELECT id, created_at, assignee_id FROM tickets WHERE tenant_id = ${t} AND status NOT IN ('merged', 'spam') AND random() < ${p}),
          ins AS (
            INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, actor_user_id, created_at)
            SELECT gen_random_uuid(), ${t}, s.id, ${action === 'reply' ? 'reply' : 'internal_note'}, '', '{}', 'user',
                   CASE WHEN random() < 0.7 THEN coalesce(s.assignee_id, ${pick(agentsArr)}) ELSE ${pick(agentsArr)} END,
                   s.created_at + random() * interval '4 days'
            FROM s RETURNING id, ticket_id, created_at, kind
          ),
          up AS (
            UPDATE tickets t SET first_responded_at = coalesce(t.first_responded_at, ins.created_at), updated_at = now()
            FROM ins WHERE ins.kind = 'reply' AND t.tenant_id = ${t} AND t.id = ins.ticket_id
          )
          SELECT ticket_id, id AS event_id FROM ins`;
        break;
      case 'solve':
      case 'close':
      case 'pend':
      case 'spam': {
        const from = action === 'close' ? `('solved')` : action === 'spam' ? `('open', 'pending')` : `('open', 'pending', 'on_hold')`;
        const to = action === 'solve' ? `CASE WHEN random() < 0.85 THEN 'solved' ELSE 'closed' END` : action === 'close' ? `'closed'` : action === 'spam' ? `'spam'` : `CASE WHEN random() < 0.5 THEN 'pending' ELSE 'on_hold' END`;
        q = sql<{ ticket_id: string; event_id: string }>`
          WITH x AS MATERIALIZED (
            SELECT id, status, coalesce(reopened_at, created_at) + random() * interval '6 days' AS at, ${sql.raw(to)} AS next, ${pick(agentsArr)} AS actor
            FROM tickets WHERE tenant_id = ${t} AND status IN ${sql.raw(from)} AND random() < ${p}
          ),
          up AS (
            UPDATE tickets t SET status = x.next, status_entered_at = x.at, updated_at = now(),
                   solved_at = CASE WHEN x.next IN ('solved', 'closed') THEN coalesce(t.solved_at, x.at) ELSE t.solved_at END
            FROM x WHERE t.tenant_id = ${t} AND t.id = x.id
          ),
          ins AS (
            INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, actor_user_id, created_at)
            SELECT gen_random_uuid(), ${t}, x.id, 'status_changed', '', jsonb_build_object('from', x.status, 'to', x.next), 'user', x.actor, x.at FROM x
            RETURNING id, ticket_id
          )
          SELECT ticket_id, id AS event_id FROM ins`;
        break;
      }
      case 'unspam':
        q = sql<{ ticket_id: string; event_id: string }>`
          WITH x AS MATERIALIZED (SELECT id, created_at + random() * interval '8 days' AS at FROM tickets WHERE tenant_id = ${t} AND status = 'spam' AND random() < ${p}),
          up AS (UPDATE tickets t SET status = 'open', status_entered_at = x.at, updated_at = now() FROM x WHERE t.tenant_id = ${t} AND t.id = x.id),
          ins AS (
            INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, actor_user_id, created_at)
            SELECT gen_random_uuid(), ${t}, x.id, 'status_changed', '', '{"from": "spam", "to": "open"}', 'system', NULL, x.at FROM x RETURNING id, ticket_id
          )
          SELECT ticket_id, id AS event_id FROM ins`;
        break;
      case 'reopen':
        q = sql<{ ticket_id: string; event_id: string }>`
          WITH x AS MATERIALIZED (
            SELECT id, status, created_at + random() * interval '10 days' AS at, ${pick(agentsArr)} AS actor
            FROM tickets WHERE tenant_id = ${t} AND status IN ('solved', 'closed') AND random() < ${p}
          ),
          up AS (
            UPDATE tickets t SET status = 'open', status_entered_at = x.at, reopened_at = x.at, solved_at = NULL, first_responded_at = NULL,
                   first_response_breached_at = NULL, resolution_breached_at = NULL, updated_at = now(),
                   first_response_due = x.at + interval '2 hours', resolution_due = x.at + interval '2 days'
            FROM x WHERE t.tenant_id = ${t} AND t.id = x.id
          ),
          ins AS (
            INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, actor_user_id, created_at)
            SELECT gen_random_uuid(), ${t}, x.id, k.kind, '', k.meta, 'user', x.actor, x.at
            FROM x CROSS JOIN LATERAL (VALUES ('reopen', jsonb_build_object('from', x.status)), ('status_changed', jsonb_build_object('from', x.status, 'to', 'open'))) AS k(kind, meta)
            RETURNING id, ticket_id
          )
          SELECT ticket_id, id AS event_id FROM ins`;
        break;
      case 'dims':
        q = sql<{ ticket_id: string; event_id: string }>`
          WITH x AS MATERIALIZED (
            SELECT id, created_at, (ARRAY['low', 'normal', 'high', 'urgent'])[1 + floor(random() * 4)::int] AS priority,
                   CASE WHEN random() < 0.1 THEN NULL ELSE ${pick(teamsArr)} END AS team_id,
                   CASE WHEN random() < 0.1 THEN NULL ELSE ${pick(agentsArr)} END AS assignee_id,
                   CASE WHEN random() < 0.2 THEN (ARRAY['email', 'chat', 'api', 'whatsapp', 'web'])[1 + floor(random() * 5)::int] END AS source
            FROM tickets WHERE tenant_id = ${t} AND status <> 'merged' AND random() < ${p}
          ),
          up AS (
            UPDATE tickets t SET priority = x.priority, team_id = x.team_id, assignee_id = x.assignee_id, source = coalesce(x.source, t.source), updated_at = now()
            FROM x WHERE t.tenant_id = ${t} AND t.id = x.id
          ),
          ins AS (
            INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, created_at)
            SELECT gen_random_uuid(), ${t}, x.id, 'fields_changed', '', '{}', 'system', x.created_at + random() * interval '5 days' FROM x RETURNING id, ticket_id
          )
          SELECT ticket_id, id AS event_id FROM ins`;
        break;
      case 'log': {
        const added = await sql<TimeEntryRow>`
          INSERT INTO time_entries (id, tenant_id, ticket_id, user_id, team_id, minutes, billable, created_at)
          SELECT gen_random_uuid(), ${t}, id, ${pick(agentsArr)}, team_id, 1 + floor(random() * 120)::int, random() < 0.7, created_at + random() * interval '5 days'
          FROM tickets WHERE tenant_id = ${t} AND status <> 'merged' AND random() < ${p}
          RETURNING *`.execute(tx);
        return entriesChanged(tx, w, [], added.rows);
      }
      case 'relog':
      case 'unlog': {
        const old = await sql<TimeEntryRow>`SELECT * FROM time_entries WHERE tenant_id = ${t} AND random() < ${p} FOR UPDATE`.execute(tx);
        const ids = old.rows.map((r) => r.id);
        if (action === 'unlog') {
          await sql`DELETE FROM time_entries WHERE tenant_id = ${t} AND id = ANY(${ids}::uuid[])`.execute(tx);
          return entriesChanged(tx, w, old.rows, []);
        }
        const now = await sql<TimeEntryRow>`
          UPDATE time_entries SET minutes = 1 + floor(random() * 200)::int, user_id = CASE WHEN random() < 0.3 THEN ${pick(agentsArr)} ELSE user_id END
          WHERE tenant_id = ${t} AND id = ANY(${ids}::uuid[]) RETURNING *`.execute(tx);
        return entriesChanged(tx, w, old.rows, now.rows);
      }
      case 'merge': {
        // Pairs of live tickets: the first of each pair merged into the second, its events copied there (via_merge).
        const pairs = await sql<{ source: string; target: string; status: string }>`
          WITH s AS (SELECT id, status, row_number() OVER (ORDER BY random()) AS i FROM tickets WHERE tenant_id = ${t} AND status IN ('open', 'pending', 'on_hold') AND random() < ${p})
          SELECT a.id AS source, b.id AS target, a.status FROM s a JOIN s b ON b.i = a.i + 1 WHERE a.i % 2 = 1`.execute(tx);
        const rows: { ticket_id: string; event_id: string }[] = [];
        for (const pr of pairs.rows) {
          const at = (await sql<{ at: Date }>`SELECT created_at + interval '3 days' AS at FROM tickets WHERE id = ${pr.source}`.execute(tx)).rows[0]!.at;
          await sql`
            INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, actor_user_id, created_at)
            SELECT gen_random_uuid(), tenant_id, ${pr.target}, kind, body, meta || jsonb_build_object('via_merge', ${pr.source}::text), actor_type, actor_user_id, created_at
            FROM ticket_events WHERE tenant_id = ${t} AND ticket_id = ${pr.source}`.execute(tx);
          await sql`UPDATE tickets SET status = 'merged', merged_into_id = ${pr.target}, status_entered_at = ${at} WHERE tenant_id = ${t} AND id = ${pr.source}`.execute(tx);
          const ev = await sql<{ ticket_id: string; event_id: string }>`
            INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, actor_user_id, created_at)
            VALUES (gen_random_uuid(), ${t}, ${pr.source}, 'merged', '', jsonb_build_object('merged_into', ${pr.target}::text, 'from_status', ${pr.status}::text), 'user', ${w.agents[0]}, ${at}),
                   (gen_random_uuid(), ${t}, ${pr.target}, 'merged', '', jsonb_build_object('merged_from', ${pr.source}::text), 'user', ${w.agents[0]}, ${at})
            RETURNING ticket_id, id AS event_id`.execute(tx);
          rows.push(...ev.rows);
        }
        return trackAll(tx, w, rows);
      }
      default:
        throw new Error(`unknown action ${action}`);
    }
    const { rows } = await q.execute(tx);
    return trackAll(tx, w, rows);
  });
}

/** Time entries changed in `tx`: each ticket's removed and added versions to the reports, as the work service hands them. */
async function entriesChanged(tx: Executor, w: World, removed: TimeEntryRow[], added: TimeEntryRow[]) {
  const byTicket = new Map<string, { removed: TimeEntryRow[]; added: TimeEntryRow[] }>();
  const of = (id: string) => byTicket.get(id) ?? byTicket.set(id, { removed: [], added: [] }).get(id)!;
  for (const r of removed) of(r.ticket_id).removed.push(r);
  for (const a of added) of(a.ticket_id).added.push(a);
  for (const [ticketId, change] of byTicket) await w.reports.entriesChanged(tx, w.tenantId, ticketId, change);
  return byTicket.size;
}

/**
 * At least about `events` timeline events and time entries over 120 days (6.96 a ticket measured at 1,000,000, so
 * 6.9 is planned): tickets opened set-based, then rounds of random
 * actions (replies, notes, solves, closes, reopens, pending, spam and back, moves between teams, agents, channels
 * and priorities, merges, time logged, edited and deleted), every one through the reports' write path, with folds
 * between some of them so reads meet both folded days and an unfolded journal.
 */
export async function generate(w: World, events: number, opts: { start: string; onRound?: (round: number) => Promise<void> }): Promise<Generated> {
  const { tenantId: t } = w;
  const tickets = Math.max(50, Math.ceil(events / 6.9));
  let tracked = 0;
  const opening = Date.now();
  for (let done = 0; done < tickets; done += 20_000) {
    const n = Math.min(20_000, tickets - done);
    tracked += await w.db.transaction().execute(async (tx) => {
      await bulk(tx);
      const { rows } = await sql<{ ticket_id: string; event_id: string }>`
        WITH x AS MATERIALIZED (SELECT gen_random_uuid() AS id, ${opts.start}::timestamptz + random() * interval '120 days' AS c FROM generate_series(1, ${n}) g),
        ins AS (
          INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, assignee_id, team_id, sla_policy_id,
                               first_response_due, resolution_due, created_at, updated_at, status_entered_at)
          SELECT id, ${t}, 'Generated', '', 'open', (ARRAY['low', 'normal', 'high', 'urgent'])[1 + floor(random() * 4)::int],
                 (ARRAY['email', 'chat', 'api', 'whatsapp', 'web'])[1 + floor(random() * 5)::int], ${w.customerId},
                 CASE WHEN random() < 0.1 THEN NULL ELSE ${pick(`'{${w.agents.join(',')}}'::uuid[]`)} END,
                 CASE WHEN random() < 0.05 THEN NULL ELSE ${pick(`'{${w.teams.join(',')}}'::uuid[]`)} END,
                 ${w.policyId}, c + interval '1 hour' * (1 + floor(random() * 8)), c + interval '1 day' * (1 + floor(random() * 3)), c, c, c
          FROM x RETURNING id, created_at
        ),
        ev AS (
          INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, created_at)
          SELECT gen_random_uuid(), ${t}, id, 'created', '', '{}', 'system', created_at FROM ins RETURNING id, ticket_id
        )
        SELECT ticket_id, id AS event_id FROM ev`.execute(tx);
      return trackAll(tx, w, rows);
    });
  }
  const round = [
    ['reply', 0.5],
    ['note', 0.25],
    ['log', 0.25],
    ['solve', 0.45],
    ['pend', 0.15],
    ['dims', 0.08],
    ['reply', 0.2],
    ['close', 0.2],
    ['reopen', 0.2],
    ['spam', 0.01],
    ['unspam', 0.5],
    ['relog', 0.05],
    ['unlog', 0.03],
    ['merge', 0.002],
  ] as const;
  await sql`ANALYZE tickets, ticket_events, time_entries, report_tickets`.execute(w.db);
  const seconds: Record<string, number> = { open: (Date.now() - opening) / 1000 };
  for (let r = 0; r < 3; r++) {
    for (const [i, [action, p]] of round.entries()) {
      const started = Date.now();
      tracked += await act(w, action, p);
      seconds[action] = (seconds[action] ?? 0) + (Date.now() - started) / 1000;
      // Statistics keep up with a table grown by hundreds of thousands of rows a minute (autovacuum lags behind).
      if (i % 4 === 3) await sql`ANALYZE tickets, ticket_events, time_entries, report_tickets, report_days`.execute(w.db);
      // No fold after the last round's last actions: the comparisons then meet a journal not yet folded.
      if (Math.random() < 0.3 && !(r === 2 && i >= round.length - 6)) {
        const folding = Date.now();
        await w.reports.fold(t);
        seconds.fold = (seconds.fold ?? 0) + (Date.now() - folding) / 1000;
      }
    }
    await opts.onRound?.(r);
  }
  const counts = await sql<{ events: string; entries: string }>`
    SELECT (SELECT count(*) FROM ticket_events WHERE tenant_id = ${t}) AS events, (SELECT count(*) FROM time_entries WHERE tenant_id = ${t}) AS entries`.execute(w.db);
  return { tickets, events: Number(counts.rows[0]!.events), entries: Number(counts.rows[0]!.entries), tracked, seconds };
}
