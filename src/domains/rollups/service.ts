import type { Logger } from 'pino';
import type { Db, Executor } from '../../db';
import type { TimeEntryRow, TodoRow } from '../../db/types';
import { notFound, refuse } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import * as ticketStore from '../tickets/store';
import * as store from './store';

const DAY_MS = 24 * 3600 * 1000;
// Writes within the same window of this length fold in one job (see requestFold).
const FOLD_DELAY_MS = 500;

const split = (minutes: number, billable: number) => ({ minutes, billable_minutes: billable, non_billable_minutes: minutes - billable });

const presentEntry = (e: TimeEntryRow) => ({
  id: e.id,
  ticket_id: e.ticket_id,
  ...(e.user_id ? { user_id: e.user_id } : {}),
  ...(e.team_id ? { team_id: e.team_id } : {}),
  minutes: e.minutes,
  billable: e.billable,
  worked_on: e.worked_on,
  created_at: iso(e.created_at),
});

const presentTodo = (t: TodoRow) => ({
  id: t.id,
  ticket_id: t.ticket_id,
  title: t.title,
  ...(t.assignee_id ? { assignee_id: t.assignee_id } : {}),
  due_at: t.due_at ? iso(t.due_at) : null,
  done: t.done_at !== null,
  done_at: t.done_at ? iso(t.done_at) : null,
  created_at: iso(t.created_at),
});

/** A time entry's contribution to its bucket, signed: +1 on create, −1 for the old version on edit or delete. */
const timeDelta = (e: TimeEntryRow, sign: 1 | -1): store.Delta => ({
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
 * The rollup sources (time entries, todos, satisfaction responses) and the rollups read from them. Every
 * source write journals its signed delta in its own transaction and asks for a fold; reads are exact
 * whether or not the fold has run (see store.timeGroups).
 */
export function createRollupService(deps: { db: Db; queues: QueueHub; logger: Logger }) {
  const { db, queues, logger } = deps;

  async function ticketIn(tx: Executor, tenantId: string, id: string) {
    const t = await ticketStore.getTicket(tx, tenantId, id);
    if (!t) throw notFound('ticket');
    return t;
  }

  async function memberOrRefuse(tx: Executor, tenantId: string, userId: string | null | undefined, field: string) {
    if (userId && !(await store.isMember(tx, tenantId, userId))) {
      throw refuse('member_unknown', 'No such member in this workspace.', [{ path: `body.${field}`, message: 'not a member of the workspace' }]);
    }
  }

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

  /** One read-only snapshot for every statement of a rollup read. */
  const snapshot = <T>(fn: (tx: Executor) => Promise<T>) => db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(fn);

  const windowOf = (sinceDays: number, userId?: string, teamId?: string): store.Window => {
    const cutoff = new Date(Date.now() - sinceDays * DAY_MS);
    return { cutoff, edgeDay: store.dayOf(cutoff), userId: userId?.toLowerCase() ?? null, teamId: teamId?.toLowerCase() ?? null };
  };

  return {
    async addTimeEntry(actor: Principal, ticketId: string, input: { minutes: number; billable: boolean; user_id?: string; worked_on?: string }) {
      return journaled(actor.tenantId, async (tx) => {
        const ticket = await ticketIn(tx, actor.tenantId, ticketId);
        await memberOrRefuse(tx, actor.tenantId, input.user_id, 'user_id');
        const row = await store.insertTimeEntry(tx, actor.tenantId, {
          id: newId(),
          ticket_id: ticket.id,
          user_id: input.user_id ?? actor.userId,
          // The team the ticket had when the time was logged: a later move does not re-attribute past work.
          team_id: ticket.team_id,
          minutes: input.minutes,
          billable: input.billable,
          worked_on: input.worked_on ?? null,
        });
        return { result: presentEntry(row), deltas: [timeDelta(row, 1)] };
      });
    },

    async patchTimeEntry(actor: Principal, id: string, input: { minutes?: number; billable?: boolean; user_id?: string | null; worked_on?: string | null }) {
      return journaled(actor.tenantId, async (tx) => {
        const old = await store.lockTimeEntry(tx, actor.tenantId, id);
        if (!old) throw notFound('time entry');
        await memberOrRefuse(tx, actor.tenantId, input.user_id, 'user_id');
        const row = await store.updateTimeEntry(tx, actor.tenantId, id, input);
        return { result: presentEntry(row), deltas: [timeDelta(old, -1), timeDelta(row, 1)] };
      });
    },

    async deleteTimeEntry(actor: Principal, id: string) {
      await journaled(actor.tenantId, async (tx) => {
        const old = await store.lockTimeEntry(tx, actor.tenantId, id);
        if (!old) throw notFound('time entry');
        await store.deleteTimeEntry(tx, actor.tenantId, id);
        return { result: undefined, deltas: [timeDelta(old, -1)] };
      });
    },

    async listTimeEntries(actor: Principal, ticketId: string) {
      await ticketIn(db, actor.tenantId, ticketId);
      return { time_entries: (await store.listTimeEntries(db, actor.tenantId, ticketId)).map(presentEntry) };
    },

    async addTodo(actor: Principal, ticketId: string, input: { title: string; assignee_id?: string; due_at?: string }) {
      return db.transaction().execute(async (tx) => {
        const ticket = await ticketIn(tx, actor.tenantId, ticketId);
        await memberOrRefuse(tx, actor.tenantId, input.assignee_id, 'assignee_id');
        const row = await store.insertTodo(tx, actor.tenantId, {
          id: newId(),
          ticket_id: ticket.id,
          title: input.title,
          assignee_id: input.assignee_id ?? null,
          due_at: input.due_at ? new Date(input.due_at) : null,
        });
        return presentTodo(row);
      });
    },

    async patchTodo(actor: Principal, id: string, input: { title?: string; done?: boolean; assignee_id?: string | null; due_at?: string | null }) {
      return db.transaction().execute(async (tx) => {
        const current = await store.getTodo(tx, actor.tenantId, id);
        if (!current) throw notFound('todo');
        await memberOrRefuse(tx, actor.tenantId, input.assignee_id, 'assignee_id');
        const row = await store.updateTodo(tx, actor.tenantId, id, {
          ...(input.title !== undefined ? { title: input.title } : {}),
          ...(input.assignee_id !== undefined ? { assignee_id: input.assignee_id } : {}),
          ...(input.due_at !== undefined ? { due_at: input.due_at === null ? null : new Date(input.due_at) } : {}),
          // Marking done twice keeps the first time it was done.
          ...(input.done !== undefined ? { done_at: input.done ? (current.done_at ?? new Date()) : null } : {}),
        });
        return presentTodo(row!);
      });
    },

    async deleteTodo(actor: Principal, id: string) {
      if (!(await store.deleteTodo(db, actor.tenantId, id))) throw notFound('todo');
    },

    async addCsat(actor: Principal, ticketId: string, input: { score: number; comment?: string }) {
      return journaled(actor.tenantId, async (tx) => {
        const ticket = await ticketIn(tx, actor.tenantId, ticketId);
        const row = await store.insertCsat(tx, actor.tenantId, {
          id: newId(),
          ticket_id: ticket.id,
          assignee_id: ticket.assignee_id,
          score: input.score,
          comment: input.comment ?? '',
          created_by_user_id: actor.userId,
        });
        const delta: store.Delta = { kind: 'csat', day: store.dayOf(row.created_at), user_id: row.assignee_id, team_id: null, worked_on: null, billable: null, score: row.score, entries: 1, minutes: 0 };
        return {
          result: { id: row.id, ticket_id: row.ticket_id, ...(row.assignee_id ? { assignee_id: row.assignee_id } : {}), score: row.score, comment: row.comment, created_at: iso(row.created_at) },
          deltas: [delta],
        };
      });
    },

    async timeSummary(actor: Principal, q: { since_days: number; user_id?: string; team_id?: string; by_ticket_limit: number }) {
      const w = windowOf(q.since_days, q.user_id, q.team_id);
      return snapshot(async (tx) => {
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
        const groups = await store.csatGroups(db, actor.tenantId, w);
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
