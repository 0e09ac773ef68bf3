import { sql } from 'kysely';
import type { Executor } from '../../db';

/**
 * What a web chat visitor may read (issue 33): the messages of their own conversation, i.e. of the workspace's
 * web_chat tickets whose conversation key is the visitor id, and of those only the visitor's messages and the
 * agents' replies. Internal notes, status changes, deliveries and every other kind are never read here, nor
 * copies a merge made (`meta.via_merge`: the visitor sees each message once, on the ticket it was written on).
 */
const SHOWN_KINDS = ['inbound_web_chat', 'reply'];

export interface MessageRow {
  id: string;
  /** The timeline's sequence (a bigint, as text). */
  seq: string;
  kind: string;
  body: string;
  actor_name: string | null;
  created_at: Date;
  provider_message_id: string | null;
}

/** The workspace's web chat connection: its inbound token's hash, whether it is enabled, and its config. */
export async function webChatConnection(db: Executor, tenantId: string) {
  return db
    .selectFrom('channel_connections')
    .select(['inbound_token_hash', 'enabled', 'config'])
    .where('tenant_id', '=', tenantId)
    .where('channel', '=', 'web_chat')
    .executeTakeFirst();
}

/** The workspace's last committed log position (null: nothing logged). One probe of the end of `events_log`. */
export async function logHead(db: Executor, tenantId: string): Promise<string | null> {
  const { rows } = await sql<{ head: string | null }>`select max(position)::text as head from events where tenant_id = ${tenantId} and position is not null`.execute(db);
  return rows[0]?.head ?? null;
}

/** Whether the event at this log position is still kept (not pruned by retention). */
export async function logHolds(db: Executor, tenantId: string, position: string): Promise<boolean> {
  const { rows } = await sql<{ kept: boolean }>`select exists (select 1 from events where tenant_id = ${tenantId} and position = ${position}::bigint) as kept`.execute(db);
  return rows[0]?.kept === true;
}

/**
 * The visitor's messages after timeline sequence `afterSeq`, in that order: the visitor's tickets by the
 * conversation index, then their events. A visitor's conversation is a handful of tickets.
 */
export async function visitorMessages(db: Executor, tenantId: string, visitorId: string, afterSeq: string, limit: number): Promise<MessageRow[]> {
  const { rows } = await sql<MessageRow>`
    select e.id, e.seq::text as seq, e.kind, e.body, e.actor_name, e.created_at, e.meta->>'provider_message_id' as provider_message_id
    from tickets t
    join ticket_events e on e.tenant_id = t.tenant_id and e.ticket_id = t.id
    where t.tenant_id = ${tenantId} and t.source = 'web_chat' and t.conversation_key = ${visitorId}
      and e.kind = any(${SHOWN_KINDS}::text[]) and e.meta->'via_merge' is null
      and e.seq > ${afterSeq}::bigint
    order by e.seq
    limit ${limit}`.execute(db);
  return rows;
}

/**
 * The visitor's messages committed past log position `after`, in commit order, reading at most `scan` entries
 * of the workspace's log (bounded work whatever the workspace writes meanwhile). Each message's `message.created`
 * event names its ticket; only the visitor's tickets are looked at, and the message itself is read from the
 * timeline (the same rule as visitorMessages). `last`: the last position scanned (null: none past `after`);
 * `scanned`: how many entries (equal to `scan` when more may follow).
 */
export async function visitorMessagesInLog(
  db: Executor,
  tenantId: string,
  visitorId: string,
  after: string,
  scan: number,
): Promise<{ rows: (MessageRow & { position: string })[]; last: string | null; scanned: number }> {
  const { rows } = await sql<Partial<MessageRow> & { position: string | null; last: string | null; scanned: number }>`
    with page as (
      select position, type, ticket_id, id from events
      where tenant_id = ${tenantId} and position is not null and position > ${after}::bigint
      order by position
      limit ${scan}
    ), span as (
      select max(position)::text as last, count(*)::int as scanned from page
    ), hits as (
      select p.position, (ev.data->'event'->>'id') as event_id
      from page p
      join tickets t on t.tenant_id = ${tenantId} and t.id = p.ticket_id
      join events ev on ev.tenant_id = ${tenantId} and ev.id = p.id
      where p.type = 'message.created' and t.source = 'web_chat' and t.conversation_key = ${visitorId}
    )
    select s.last, s.scanned, m.position::text as position, m.id, m.seq, m.kind, m.body, m.actor_name, m.created_at, m.provider_message_id
    from span s
    left join lateral (
      select h.position, e.id, e.seq::text as seq, e.kind, e.body, e.actor_name, e.created_at, e.meta->>'provider_message_id' as provider_message_id
      from hits h
      join ticket_events e on e.tenant_id = ${tenantId} and e.id = h.event_id::uuid
      where e.kind = any(${SHOWN_KINDS}::text[]) and e.meta->'via_merge' is null
    ) m on true
    order by m.position`.execute(db);
  const head = rows[0];
  return {
    rows: rows.filter((r) => r.position !== null).map((r) => ({ ...(r as MessageRow), position: r.position! })),
    last: head?.last ?? null,
    scanned: head?.scanned ?? 0,
  };
}

/** A file of a message the visitor reads (the same rule as their messages), as it is listed to them. */
export interface MessageFileRow {
  id: string;
  event_id: string;
  name: string;
  content_type: string;
  size: number;
  state: 'pending' | 'stored' | 'skipped' | 'failed' | 'infected';
}

/** The files of some of the visitor's messages, by the events' ids, in the order they were added; a note's never. */
export async function filesOfMessages(db: Executor, tenantId: string, eventIds: string[]): Promise<MessageFileRow[]> {
  if (eventIds.length === 0) return [];
  const rows = await db
    .selectFrom('attachments')
    .select(['id', 'event_id', 'name', 'content_type', 'size', 'state'])
    .where('tenant_id', '=', tenantId)
    .where('event_id', 'in', eventIds)
    .where('internal', '=', false)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ ...r, event_id: r.event_id!, size: Number(r.size) }));
}

/**
 * A file the visitor may download: bound to a message of their own conversation that they read (their own or an
 * agent's reply, by the same rule as visitorMessages: a web_chat ticket whose conversation key is the visitor,
 * never a note, never a merge's copy), in this workspace. Anything else is not found.
 */
export async function visitorFile(db: Executor, tenantId: string, visitorId: string, attachmentId: string) {
  return db
    .selectFrom('attachments as a')
    .innerJoin('ticket_events as e', (j) => j.onRef('e.tenant_id', '=', 'a.tenant_id').onRef('e.id', '=', 'a.event_id'))
    .innerJoin('tickets as t', (j) => j.onRef('t.tenant_id', '=', 'e.tenant_id').onRef('t.id', '=', 'e.ticket_id'))
    .selectAll('a')
    .where('a.tenant_id', '=', tenantId)
    .where('a.id', '=', attachmentId)
    .where('a.internal', '=', false)
    .where('t.source', '=', 'web_chat')
    .where('t.conversation_key', '=', visitorId)
    .where('e.kind', 'in', SHOWN_KINDS)
    .where(sql<boolean>`e.meta->'via_merge' is null`)
    .executeTakeFirst();
}
