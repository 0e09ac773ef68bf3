import type { Logger } from 'pino';
import type { Db, Executor } from '../../db';
import type { ReadRouting } from '../../db/reads';
import type { CsatResponseRow, TimeEntryRow } from '../../db/types';
import type { Principal } from '../identity/principal';
import type { QueueHub } from '../../queue/hub';
import * as store from './store';

const DAY_MS = 24 * 3600 * 1000;
// Writes within the same window of this length fold in one job (see requestFold).
const FOLD_DELAY_MS = 500;

const split = (minutes: number, billable: number) => ({ minutes, billable_minutes: billable, non_billable_minutes: minutes - billable });

/** A time entry's contribution to its bucket, signed: +1 on create, −1 for the old version on edit or delete. */
/** A satisfaction response's contribution to its bucket. */
export const csatDelta = (row: CsatResponseRow): store.Delta => ({ kind: 'csat', day: store.dayOf(row.created_at), user_id: row.assignee_id, team_id: null, worked_on: null, billable: null, score: row.score, entries: 1, minutes: 0 });

export const timeDelta = (e: TimeEntryRow, sign: 1 | -1): store.Delta => ({
  kind: 'time',
  day: store.dayOf(e.created_at),
  user_id: e.user_id,
  team_id: e.team_id,
  worked_on: e.worked_on,
  billable: e.billable,
  score: null,
  entries: sign,
  minutes: sign * e.minutes,
});

/**
 * The rollups read from the work on tickets (time entries, todos, satisfaction responses: the work domain
 * writes them): every source write journals its signed delta in its own transaction (`journaled`) and asks
 * for a fold; reads are exact whether or not the fold has run (see store.timeGroups).
 */
export function createRollupService(deps: { db: Db; queues: QueueHub; logger: Logger; reads?: Pick<ReadRouting, 'forReading'> }) {
  const { db, queues, logger } = deps;
  const reads = deps.reads ?? { forReading: async () => db };

  /** After commit: a lost enqueue (Redis down) only delays the fold; the per-minute sweep catches up. */
  async function requestFold(tenantId: string) {
    try {
      // One job per workspace and half-second window: writes of a burst share it, and a job always starts
      // after its window has passed, so a write landing while it runs gets the next window's job instead of
      // being swallowed by the running one.
      const window = Math.floor(Date.now() / FOLD_DELAY_MS);
      await queues.enqueue('rollups.fold', { tenant_id: tenantId, window }, { delayMs: FOLD_DELAY_MS });
    } catch (err) {
      logger.warn({ tenant_id: tenantId, err: (err as Error).message }, 'rollup fold not queued; the sweep will fold');
    }
  }

  async function journaled<T>(tenantId: string, work: (tx: Executor) => Promise<{ result: T; deltas: store.Delta[] }>): Promise<T> {
    const { result, deltas } = await db.transaction().execute(async (tx) => {
      const out = await work(tx);
      await store.journal(tx, tenantId, out.deltas);
      return out;
    });
    if (deltas.length > 0) await requestFold(tenantId);
    return result;
  }

  /** One read-only snapshot for every statement of a rollup read, on the replica when the caller may use it. */
  const snapshot = async <T>(actor: Principal, fn: (tx: Executor) => Promise<T>) =>
    (await reads.forReading(actor)).transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(fn);

  const windowOf = (sinceDays: number, userId?: string, teamId?: string): store.Window => {
    const cutoff = new Date(Date.now() - sinceDays * DAY_MS);
    return { cutoff, edgeDay: store.dayOf(cutoff), userId: userId?.toLowerCase() ?? null, teamId: teamId?.toLowerCase() ?? null };
  };

  return {
    /**
     * A write to a rollup source (time entries, satisfaction responses) in one transaction with the signed
     * deltas it journals; a fold is asked for after commit.
     */
    journaled,

    async timeSummary(actor: Principal, q: { since_days: number; user_id?: string; team_id?: string; by_ticket_limit: number }) {
      const w = windowOf(q.since_days, q.user_id, q.team_id);
      return snapshot(actor, async (tx) => {
        // Unfiltered reads sum the per-dimension rows; a user or team filter needs the joint fine buckets.
        const groups = w.userId || w.teamId ? await store.timeGroups(tx, actor.tenantId, w) : await store.timeDimGroups(tx, actor.tenantId, w);
        const todos = await store.todoGroups(tx, actor.tenantId, w);
        const userIds = [...new Set([...groups.filter((g) => g.dim === 'agent' && g.key).map((g) => g.key!), ...todos.filter((t) => t.dim === 'assignee' && t.key).map((t) => t.key!)])];
        const teamIds = groups.filter((g) => g.dim === 'team' && g.key).map((g) => g.key!);
        const { users, teams } = await store.names(tx, actor.tenantId, userIds, teamIds);
        const of = (dim: store.TimeGroup['dim']) => groups.filter((g) => g.dim === dim).sort((a, b) => b.minutes - a.minutes || String(a.key).localeCompare(String(b.key)));
        const total = groups.find((g) => g.dim === 'total') ?? { entries: 0, minutes: 0, billable: 0 };
        const todoTotal = todos.find((t) => t.dim === 'total');
        const counts = (t: { total: number; open: number; done: number; overdue: number }) => ({ total: t.total, open: t.open, done: t.done, overdue: t.overdue });
        return {
          since_days: q.since_days,
          total: { entries: total.entries, ...split(total.minutes, total.billable) },
          by_agent: of('agent').map((g) => ({
            ...(g.key ? { user_id: g.key } : {}),
            ...(g.key && users.has(g.key) ? { user_name: users.get(g.key)! } : {}),
            entries: g.entries,
            ...split(g.minutes, g.billable),
          })),
          by_day: groups
            .filter((g) => g.dim === 'day')
            .sort((a, b) => (a.key === null ? 1 : b.key === null ? -1 : a.key.localeCompare(b.key)))
            .map((g) => ({ day: g.key, ...split(g.minutes, g.billable) })),
          by_team: of('team').map((g) => ({
            ...(g.key ? { team_id: g.key } : {}),
            ...(g.key && teams.has(g.key) ? { team_name: teams.get(g.key)! } : {}),
            ...split(g.minutes, g.billable),
          })),
          todos: {
            total: todoTotal ? counts(todoTotal) : { total: 0, open: 0, done: 0, overdue: 0 },
            by_assignee: todos
              .filter((t) => t.dim === 'assignee')
              .sort((a, b) => b.total - a.total || String(a.key).localeCompare(String(b.key)))
              .map((t) => ({ ...(t.key ? { assignee_id: t.key } : {}), ...(t.key && users.has(t.key) ? { assignee_name: users.get(t.key)! } : {}), ...counts(t) })),
            by_ticket: todos
              .filter((t) => t.dim === 'ticket')
              .sort((a, b) => b.open - a.open || b.total - a.total || String(a.key).localeCompare(String(b.key)))
              .slice(0, q.by_ticket_limit)
              .map((t) => ({ ticket_id: t.key!, ticket_subject: t.subject ?? '', ...counts(t) })),
            by_ticket_limit: q.by_ticket_limit,
          },
        };
      });
    },

    async csatAggregate(actor: Principal, q: { since_days: number }) {
      const w = windowOf(q.since_days);
      // A single statement already reads one snapshot (and names it): no transaction round trips needed.
      {
        const groups = await store.csatGroups(await reads.forReading(actor), actor.tenantId, w);
        const agents = groups.filter((g) => g.dim === 'agent');
        const users = new Map(agents.filter((g) => g.key && g.name).map((g) => [g.key!, g.name!]));
        const scores = groups.filter((g) => g.dim === 'score');
        const responses = scores.reduce((n, g) => n + g.responses, 0);
        const sum = scores.reduce((n, g) => n + g.score_sum, 0);
        const distribution = Object.fromEntries(['1', '2', '3', '4', '5'].map((k) => [k, scores.find((g) => g.key === k)?.responses ?? 0]));
        return {
          since_days: q.since_days,
          overall: { responses, avg_score: responses > 0 ? sum / responses : null, distribution },
          per_agent: agents
            .sort((a, b) => b.responses - a.responses || String(a.key).localeCompare(String(b.key)))
            .map((g) => ({
              ...(g.key ? { assignee_id: g.key } : {}),
              ...(g.key && users.has(g.key) ? { assignee_name: users.get(g.key)! } : {}),
              responses: g.responses,
              avg_score: g.responses > 0 ? g.score_sum / g.responses : null,
            })),
        };
      }
    },

    /** The rollups.fold job. */
    fold: (tenantId: string) => db.transaction().execute((tx) => store.fold(tx, tenantId)),

    /** The per-minute sweep: folds every workspace with deltas waiting (their job may have been lost). */
    async sweep() {
      const tenants = await store.crossTenantWithJournal(db);
      for (const t of tenants) await db.transaction().execute((tx) => store.fold(tx, t));
      return { folded: tenants.length };
    },

    verify: (tenantId: string) => store.differences(db, tenantId),
    rebuild: (tenantId: string) => db.transaction().execute((tx) => store.rebuild(tx, tenantId)),
  };
}

export type RollupService = ReturnType<typeof createRollupService>;
