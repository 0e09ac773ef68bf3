import { sql, type RawBuilder } from 'kysely';
import type { Executor } from '../../db';
import type { MacroRow } from '../../db/types';
import type { TicketFilters } from '../tickets/schemas';
import { filteredTickets } from '../tickets/store';
import type { MacroAction, TimeAnchor } from './schemas';

export async function insertMacro(
  db: Executor,
  tenantId: string,
  m: { id: string; name: string; description: string; actions: unknown[]; enabled: boolean; trigger: object | null; created_by_user_id: string },
): Promise<MacroRow> {
  return db
    .insertInto('macros')
    .values({ ...m, tenant_id: tenantId, actions: JSON.stringify(m.actions), trigger: m.trigger ? JSON.stringify(m.trigger) : null })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listMacros(db: Executor, tenantId: string): Promise<MacroRow[]> {
  return db.selectFrom('macros').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
}

export async function getMacro(db: Executor, tenantId: string, id: string): Promise<MacroRow | undefined> {
  return db.selectFrom('macros').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

/** The macro, locked for a change (its version checked against the caller's If-Match before the write). */
export async function lockMacro(db: Executor, tenantId: string, id: string): Promise<MacroRow | undefined> {
  return db.selectFrom('macros').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
}

/** Each sent field is its own column write; `trigger` is written only when the patch names it. */
export async function updateMacro(
  db: Executor,
  tenantId: string,
  id: string,
  patch: { name?: string; description?: string; actions?: unknown[]; enabled?: boolean; trigger?: object | null },
): Promise<MacroRow | undefined> {
  return db
    .updateTable('macros')
    .set({
      ...(patch.name !== undefined ? { name: patch.name } : {}),
      ...(patch.description !== undefined ? { description: patch.description } : {}),
      ...(patch.actions !== undefined ? { actions: JSON.stringify(patch.actions) } : {}),
      ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
      ...(patch.trigger !== undefined ? { trigger: patch.trigger === null ? null : JSON.stringify(patch.trigger) } : {}),
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function triggeredBy(db: Executor, tenantId: string, event: string): Promise<MacroRow[]> {
  return db
    .selectFrom('macros')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('enabled', '=', true)
    .where(sql`trigger->>'event'`, '=', event)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

export async function anyTriggeredBy(db: Executor, tenantId: string, event: string): Promise<boolean> {
  const row = await db
    .selectFrom('macros')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('enabled', '=', true)
    .where(sql`trigger->>'event'`, '=', event)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Claims the (macro, event) pair; false when a previous run already did, so a re-run changes nothing. */
export async function claimRun(db: Executor, tenantId: string, macroId: string, eventId: string): Promise<boolean> {
  const result = await db
    .insertInto('macro_runs')
    .values({ tenant_id: tenantId, macro_id: macroId, event_id: eventId })
    .onConflict((oc) => oc.columns(['tenant_id', 'macro_id', 'event_id']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

// ------------------------------------------------------------------------------- time rules (issue 37)

/**
 * Every workspace's enabled time rules, for the minute's sweep: the partial index macros_time_rules (0041) read
 * whole. A cross-workspace read by design, and small: it returns rules, never tickets.
 */
export async function crossTenantTimeRules(db: Executor): Promise<{ tenant_id: string; id: string }[]> {
  return db
    .selectFrom('macros')
    .select(['tenant_id', 'id'])
    .where('enabled', '=', true)
    .where(sql<string>`trigger->>'event'`, '=', 'time')
    .orderBy('tenant_id')
    .orderBy('id')
    .execute();
}

/** The column each anchor is, and what else a ticket must be for the anchor to mean anything. */
const ANCHORS: Record<TimeAnchor, { column: string; implied: RawBuilder<boolean> }> = (() => {
  // Rules touch only tickets still being worked (solved is final but for a reopen, closed, spam and merged too).
  // Literals, not parameters, so the planner matches them to the partial indexes' predicates (0041).
  const live = sql<boolean>`tickets.status IN ('open', 'pending', 'on_hold')`;
  return {
    created: { column: 'created_at', implied: live },
    updated: { column: 'updated_at', implied: live },
    last_customer_message: { column: 'last_customer_message_at', implied: live },
    last_agent_reply: { column: 'last_agent_reply_at', implied: live },
    status_entered: { column: 'status_entered_at', implied: live },
    first_response_due: { column: 'first_response_due', implied: sql<boolean>`${live} AND tickets.first_responded_at IS NULL` },
    // Set while a customer message after a reply awaits an answer (0040); the reply clears it.
    next_reply_due: { column: 'next_reply_due', implied: sql<boolean>`${live} AND tickets.next_reply_due IS NOT NULL` },
    // A paused resolution clock (pending, on hold) is not running out: its due time is stale until the clock resumes.
    resolution_due: { column: 'resolution_due', implied: sql<boolean>`${live} AND tickets.solved_at IS NULL AND tickets.resolution_paused_at IS NULL` },
  };
})();

/**
 * True on a ticket the actions would not change (every one of them already holds), so the rule leaves it alone
 * and never fires on it: "open 2 days → on hold" stops once it is on hold, "→ add tag stale" once it carries the tag.
 * A note always changes the ticket, so a rule with one has no such test (null).
 */
function satisfiedBy(actions: MacroAction[]): RawBuilder<boolean> | null {
  const parts: RawBuilder<boolean>[] = [];
  for (const a of actions) {
    switch (a.type) {
      case 'set_status':
        parts.push(sql`tickets.status = ${a.status}`);
        break;
      case 'set_priority':
        parts.push(sql`tickets.priority = ${a.priority}`);
        break;
      case 'add_tags':
        parts.push(sql`tickets.tags @> ${a.tags}::text[]`);
        break;
      case 'remove_tags':
        parts.push(sql`NOT (tickets.tags && ${a.tags}::text[])`);
        break;
      case 'assign_team':
        parts.push(sql`tickets.team_id IS NOT DISTINCT FROM ${a.team_id}::uuid`);
        break;
      case 'assign_user':
        parts.push(sql`tickets.assignee_id IS NOT DISTINCT FROM ${a.user_id}::uuid`);
        break;
      case 'add_note':
        return null;
    }
  }
  return parts.length > 0 ? sql<boolean>`(${sql.join(parts, sql` AND `)})` : null;
}

/** One time rule as the sweep runs it. `after`: the keyset position (the anchor as text, then id) past the last batch. */
export interface RuleQuery {
  macroId: string;
  anchor: TimeAnchor;
  /** `since`: the anchor at least `minutes` ago; `until`: at most `minutes` ahead. */
  direction: 'since' | 'until';
  minutes: number;
  filters: TicketFilters;
  actions: MacroAction[];
  after: { stretch: string; id: string } | null;
  limit: number;
}

/**
 * A candidate of a batch: its id, the stretch (the anchor's value: as text for the keyset, PostgreSQL's
 * microseconds kept, and as a time), and whether this batch claimed it.
 */
export interface RuleCandidate {
  id: string;
  stretch: string;
  stretch_at: Date;
  claimed: boolean;
}

/**
 * One batch of a time rule, in one statement, inside the caller's transaction: the next `limit` tickets past the
 * keyset that pass the rule (its time condition, its filters, not yet fired for this stretch, not already what its
 * actions make them), in anchor order, locked FOR UPDATE SKIP LOCKED (a ticket another transaction holds is left
 * to the next sweep, never waited for); then one firing row each, ON CONFLICT DO NOTHING. A ticket is `claimed`
 * only when its row went in here: a second worker, or a retried job, that reaches the same ticket and stretch
 * inserts nothing and must apply nothing. The locks last until the caller's commit: one batch.
 */
export async function claimRuleBatch(db: Executor, tenantId: string, q: RuleQuery): Promise<RuleCandidate[]> {
  const { column, implied } = ANCHORS[q.anchor];
  const col = sql.ref(`tickets.${column}`);
  const cutoff = q.direction === 'since' ? sql`now() - make_interval(mins => ${q.minutes})` : sql`now() + make_interval(mins => ${q.minutes})`;
  const satisfied = satisfiedBy(q.actions);
  let candidates = filteredTickets(db, tenantId, q.filters)
    .clearSelect()
    .select(['tickets.id', sql<Date>`${col}`.as('stretch')])
    .where(implied)
    .where(sql<boolean>`${col} <= ${cutoff}`)
    // OFFSET 0 keeps this a probe of the firings' primary key per candidate: as an anti join the planner may read
    // every firing of the rule once per candidate (seen: 2 s a batch at 12,500 firings, against 11 ms).
    .where(
      sql<boolean>`NOT EXISTS (SELECT 1 FROM time_rule_firings f
        WHERE f.tenant_id = tickets.tenant_id AND f.macro_id = ${q.macroId} AND f.ticket_id = tickets.id AND f.stretch = ${col} OFFSET 0)`,
    );
  if (satisfied) candidates = candidates.where(sql<boolean>`NOT ${satisfied}`);
  if (q.after) candidates = candidates.where(sql<boolean>`(${col}, tickets.id) > (${q.after.stretch}::timestamptz, ${q.after.id}::uuid)`);
  const locked = candidates.orderBy(col).orderBy('tickets.id').limit(q.limit).forUpdate().skipLocked();
  const { rows } = await sql<RuleCandidate>`
    WITH c AS (${locked}),
    ins AS (
      INSERT INTO time_rule_firings (tenant_id, macro_id, ticket_id, stretch)
      SELECT ${tenantId}::uuid, ${q.macroId}::uuid, c.id, c.stretch FROM c
      ON CONFLICT DO NOTHING
      RETURNING ticket_id
    )
    SELECT c.id, c.stretch::text AS stretch, c.stretch AS stretch_at, (ins.ticket_id IS NOT NULL) AS claimed
    FROM c LEFT JOIN ins ON ins.ticket_id = c.id
    ORDER BY c.stretch, c.id`.execute(db);
  return rows;
}
