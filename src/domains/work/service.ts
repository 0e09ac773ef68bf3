import type { Db, Executor } from '../../db';
import type { TimeEntryRow, TodoRow } from '../../db/types';
import { notFound, refuse } from '../../lib/errors';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { pageOf, type Cursor } from '../../lib/paging';
import { TIME_ENTRY_SORT } from './schemas';
import type { Principal } from '../identity/principal';
import { isMember } from '../members/store';
import { csatDelta, timeDelta, type RollupService } from '../rollups/service';
import type { EventSink } from '../events/types';
import type { ReportService } from '../reports/service';
import * as store from './store';

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

/**
 * Work on a ticket: time logged, todos, satisfaction responses. Time and satisfaction writes journal their
 * deltas for the rollups in the same transaction (rollups.journaled); todos are read live.
 */
export function createWorkService(deps: {
  db: Db;
  rollups: Pick<RollupService, 'journaled'>;
  /** The ticket a write is about (its team and assignee are recorded with the work). */
  tickets: {
    find(exec: Executor, tenantId: string, id: string): Promise<{ id: string; team_id: string | null; assignee_id: string | null } | undefined>;
    /** The ticket's read shows work totals: each change to its work moves the ticket's version (ETag) on. */
    bumpVersion(exec: Executor, tenantId: string, id: string): Promise<void>;
  };
  /** Where csat.created goes (issue 19). */
  events?: EventSink;
  /** Told about time logged, changed or removed, in the same transaction (agent activity reports, issue 37). */
  reports?: Pick<ReportService, 'entriesChanged'>;
}) {
  const { db, rollups } = deps;

  async function ticketIn(tx: Executor, tenantId: string, id: string) {
    const t = await deps.tickets.find(tx, tenantId, id);
    if (!t) throw notFound('ticket');
    return t;
  }

  async function memberOrRefuse(tx: Executor, tenantId: string, userId: string | null | undefined, field: string) {
    if (userId && !(await isMember(tx, tenantId, userId))) {
      throw refuse('member_unknown', 'No such member in this workspace.', [{ path: `body.${field}`, message: 'not a member of the workspace' }]);
    }
  }

  return {
    async addTimeEntry(actor: Principal, ticketId: string, input: { minutes: number; billable: boolean; user_id?: string; worked_on?: string }) {
      return rollups.journaled(actor.tenantId, async (tx) => {
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
        await deps.tickets.bumpVersion(tx, actor.tenantId, row.ticket_id);
        // After the ticket's row is locked (the version bump): a move of the ticket's dimensions waits or is seen.
        await deps.reports?.entriesChanged(tx, actor.tenantId, row.ticket_id, { added: [row] });
        return { result: presentEntry(row), deltas: [timeDelta(row, 1)] };
      });
    },

    async patchTimeEntry(actor: Principal, id: string, input: { minutes?: number; billable?: boolean; user_id?: string | null; worked_on?: string | null }) {
      return rollups.journaled(actor.tenantId, async (tx) => {
        const old = await store.lockTimeEntry(tx, actor.tenantId, id);
        if (!old) throw notFound('time entry');
        await memberOrRefuse(tx, actor.tenantId, input.user_id, 'user_id');
        const row = await store.updateTimeEntry(tx, actor.tenantId, id, input);
        await deps.tickets.bumpVersion(tx, actor.tenantId, row.ticket_id);
        await deps.reports?.entriesChanged(tx, actor.tenantId, row.ticket_id, { removed: [old], added: [row] });
        return { result: presentEntry(row), deltas: [timeDelta(old, -1), timeDelta(row, 1)] };
      });
    },

    async deleteTimeEntry(actor: Principal, id: string) {
      await rollups.journaled(actor.tenantId, async (tx) => {
        const old = await store.lockTimeEntry(tx, actor.tenantId, id);
        if (!old) throw notFound('time entry');
        await store.deleteTimeEntry(tx, actor.tenantId, id);
        await deps.tickets.bumpVersion(tx, actor.tenantId, old.ticket_id);
        await deps.reports?.entriesChanged(tx, actor.tenantId, old.ticket_id, { removed: [old] });
        return { result: undefined, deltas: [timeDelta(old, -1)] };
      });
    },

    async listTimeEntries(actor: Principal, ticketId: string, page: { limit: number; after?: Cursor }) {
      await ticketIn(db, actor.tenantId, ticketId);
      const rows = await store.listTimeEntries(db, actor.tenantId, ticketId, page);
      return pageOf('time_entries', rows, page.limit, TIME_ENTRY_SORT, presentEntry);
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
        await deps.tickets.bumpVersion(tx, actor.tenantId, row.ticket_id);
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
        await deps.tickets.bumpVersion(tx, actor.tenantId, current.ticket_id);
        return presentTodo(row!);
      });
    },

    async deleteTodo(actor: Principal, id: string) {
      await db.transaction().execute(async (tx) => {
        const ticketId = await store.deleteTodo(tx, actor.tenantId, id);
        if (!ticketId) throw notFound('todo');
        await deps.tickets.bumpVersion(tx, actor.tenantId, ticketId);
      });
    },

    async addCsat(actor: Principal, ticketId: string, input: { score: number; comment?: string }) {
      return rollups.journaled(actor.tenantId, async (tx) => {
        const ticket = await ticketIn(tx, actor.tenantId, ticketId);
        const row = await store.insertCsat(tx, actor.tenantId, {
          id: newId(),
          ticket_id: ticket.id,
          assignee_id: ticket.assignee_id,
          score: input.score,
          comment: input.comment ?? '',
          created_by_user_id: actor.userId,
        });
        const delta = csatDelta(row);
        const result = { id: row.id, ticket_id: row.ticket_id, ...(row.assignee_id ? { assignee_id: row.assignee_id } : {}), score: row.score, comment: row.comment, created_at: iso(row.created_at) };
        await deps.events?.emit(tx, actor.tenantId, [{ type: 'csat.created', ticketId: row.ticket_id, data: result }]);
        return { result, deltas: [delta] };
      });
    },

  };
}

export type WorkService = ReturnType<typeof createWorkService>;
