import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import type { Db, Executor } from '../../db';
import type { TicketEventRow, TicketRow } from '../../db/types';
import { notFound } from '../../lib/errors';
import { iso } from '../../lib/time';
import { searches, sortOf, ticketEvent, type ListTicketsQuery } from './schemas';
import type { SearchViewer, TicketSearch } from '../search/engine';
import { parseTicketQuery, requireSomethingToFind } from '../search/query';
import { pageOf } from '../../lib/paging';
import { legalNextStates } from './status';
import * as store from './store';
import type { TicketDetailRow, TimelineEventJson } from './store';
import type { AttachmentSummary } from '../files/types';

/** How tickets read: one event of a timeline, a list row, and the whole ticket with its timeline. */

/**
 * An event as the API shows it, from its row (a write's RETURNING) or from the detail read's JSON; its files
 * (issue 34) from the read's JSON or, for a write's new events, as the write bound them.
 */
export const presentEvent = (e: (TicketEventRow | TimelineEventJson) & { attachments?: AttachmentSummary[] | null }, files?: AttachmentSummary[]) => ({
  id: e.id,
  kind: e.kind,
  body: e.body,
  meta: e.meta,
  actor_type: e.actor_type,
  ...(e.actor_user_id ? { actor_user_id: e.actor_user_id } : {}),
  ...(e.actor_name ? { actor_name: e.actor_name } : {}),
  created_at: typeof e.created_at === 'string' ? e.created_at : iso(e.created_at),
  ...((files ?? e.attachments)?.length ? { attachments: (files ?? e.attachments)! } : {}),
});

export const presentSummary = (t: TicketRow) => ({
  id: t.id,
  subject: t.subject,
  status: t.status,
  priority: t.priority,
  source: t.source,
  ...(t.assignee_id ? { assignee_id: t.assignee_id } : {}),
  customer_id: t.customer_id,
  ...(t.team_id ? { team_id: t.team_id } : {}),
  tags: t.tags,
  first_response_due: iso(t.first_response_due),
  resolution_due: iso(t.resolution_due),
  sla_breached: t.sla_breached,
  ...(t.next_reply_due ? { next_reply_due: iso(t.next_reply_due) } : {}),
  ...(t.resolution_paused_at ? { resolution_paused_at: iso(t.resolution_paused_at), resolution_remaining_minutes: t.resolution_remaining_minutes ?? 0 } : {}),
  ...(t.merged_into_id ? { merged_into_id: t.merged_into_id } : {}),
  created_at: iso(t.created_at),
  updated_at: iso(t.updated_at),
});

/** The ticket as its read shows it, without the timeline, from its detail row (with its version, the ETag). */
export function presentDetail(t: TicketDetailRow) {
  return {
    ...presentSummary(t),
    description: t.description,
    ...(t.assignee_id && t.assignee_name ? { assignee_name: t.assignee_name, assignee_email: t.assignee_email! } : {}),
    customer_name: t.customer_name,
    customer_email: t.customer_email,
    ...(t.team_id && t.team_name ? { team_name: t.team_name } : {}),
    metadata: t.metadata,
    sla_policy_id: t.sla_policy_id,
    ...(t.reopened_at ? { reopened_at: iso(t.reopened_at) } : {}),
    status_entered_at: iso(t.status_entered_at),
    ...(t.last_customer_message_at ? { last_customer_message_at: iso(t.last_customer_message_at) } : {}),
    ...(t.last_agent_reply_at ? { last_agent_reply_at: iso(t.last_agent_reply_at) } : {}),
    legal_next_states: legalNextStates(t.status),
    time_total_minutes: t.time_total,
    time_billable_minutes: t.time_billable,
    todo_counts: { open: t.todos_open, done: t.todos_done, overdue: t.todos_overdue },
    /** Not in the body (the response schema drops it): the strong ETag of this read. */
    version: String(t.version),
  };
}

/**
 * Several tickets as their reads show them without the timeline, in one statement (the outbound events of a
 * batch, see `timeline.ts`); those in `fresh` (detail rows an UPDATE of this transaction returned) are not read
 * again. A plain function, not part of `createTicketQueries`, so the timeline below the commands can use it.
 */
export async function ticketsWithoutTimeline(exec: Executor, tenantId: string, ids: string[], fresh: TicketDetailRow[] = []) {
  const known = new Map(fresh.map((t) => [t.id, t]));
  const rows = [...fresh.filter((t) => ids.includes(t.id)), ...(await store.getTicketDetails(exec, tenantId, ids.filter((id) => !known.has(id))))];
  return new Map(rows.map((t) => [t.id, presentDetail(t)]));
}

const timelineSchema = z.array(ticketEvent);

/** A ticket's timeline as GET answers it, checked against the response schema and serialized, at one version. */
interface RenderedTimeline {
  version: string;
  json: Buffer;
}

export function createTicketQueries(deps: { db: Db; timelineCacheBytes?: number; search: TicketSearch }) {
  const { db } = deps;
  /**
   * Rendered timelines by workspace and ticket, this process's own (bounded by bytes, least recently read
   * dropped first). An entry is only ever used for the version it was rendered at, and that is checked in
   * the statement that reads the ticket, so it cannot be stale; only committed reads (outside any
   * transaction) fill it, so a version a transaction then rolled back is never kept.
   */
  const timelines = deps.timelineCacheBytes
    ? new LRUCache<string, RenderedTimeline>({ maxSize: deps.timelineCacheBytes, sizeCalculation: (t) => t.json.length + 128 })
    : null;

  /** The whole ticket as its read shows it, read with `exec` (inside a writer's transaction), in one statement. */
  async function detailIn(exec: Executor, tenantId: string, id: string) {
    const row = await store.getTicketWithTimeline(exec, tenantId, id);
    if (!row) throw notFound('ticket');
    const { version, ...fields } = presentDetail(row);
    // No version held: the statement always reads the timeline.
    return { ...fields, events: (row.events ?? []).map((e) => presentEvent(e)), version };
  }

  /** The ticket as its read shows it, without the timeline. */
  async function withoutTimeline(exec: Executor, tenantId: string, id: string) {
    const [t] = await store.getTicketDetails(exec, tenantId, [id]);
    if (!t) throw notFound('ticket');
    return presentDetail(t);
  }

  return {
    detailIn,
    withoutTimeline,
    manyWithoutTimeline: ticketsWithoutTimeline,
    /** The ticket row, for other domains' writes about it (work logged on it); undefined when there is none. */
    find: (exec: Executor, tenantId: string, id: string) => store.getTicket(exec, tenantId, id),
    // One statement is one snapshot: the row and its timeline cannot disagree (read as separate statements, a
    // change committing in between showed its event next to the fields from before it).
    detail: (tenantId: string, id: string) => detailIn(db, tenantId, id),

    /**
     * GET's read: the ticket without its timeline, and the timeline rendered (JSON bytes). The timeline is read,
     * checked and serialized only when this process holds none at the ticket's current version; the version is
     * compared in the same statement (one snapshot), which then leaves the timeline out.
     */
    async rendered(tenantId: string, id: string) {
      const key = `${tenantId}/${id}`;
      const held = timelines?.get(key);
      const row = await store.getTicketWithTimeline(db, tenantId, id, held?.version ?? -1);
      if (!row) {
        timelines?.delete(key);
        throw notFound('ticket');
      }
      const { version, ...ticket } = presentDetail(row);
      if (held && row.events === null) return { ticket, events: held.json, version };
      const json = Buffer.from(JSON.stringify(timelineSchema.parse((row.events ?? []).map((e) => presentEvent(e)))));
      timelines?.set(key, { version, json });
      return { ticket, events: json, version };
    },

    /**
     * GET /v1/tickets: a plain page of the list, or with `q` a search (issue 36) through the search engine. The
     * plain list is untouched by search: no parse, no extra statement, no transaction.
     */
    async list(tenantId: string, query: ListTicketsQuery, viewer: SearchViewer, from: Db = db) {
      const { limit, after, sort: _given, q: text, ...filters } = query;
      const sort = sortOf(query);
      if (searches(query)) {
        const parsed = parseTicketQuery(text!, deps.search.limits);
        requireSomethingToFind(parsed, Object.values(filters).some((v) => v !== undefined));
        const rows = await deps.search.engine.searchTickets(from, tenantId, parsed, filters, { limit, sort, after }, viewer);
        return pageOf('tickets', rows, limit, sort, presentSummary);
      }
      // The schema refuses sort=relevance without q.
      if (sort === 'relevance') throw new Error('sort=relevance reached the plain list');
      const rows = await store.listTickets(from, tenantId, filters, { limit, sort, after });
      return pageOf('tickets', rows, limit, sort, presentSummary);
    },
  };
}

export type TicketQueries = ReturnType<typeof createTicketQueries>;
export type TicketDetail = Awaited<ReturnType<TicketQueries['detailIn']>>;
