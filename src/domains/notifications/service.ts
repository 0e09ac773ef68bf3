import type { Db, Executor } from '../../db';
import type { NotificationRow } from '../../db/types';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso, isoOrNull } from '../../lib/time';
import { pageOf, type Cursor } from '../../lib/paging';
import { NOTIFICATION_SORT } from './schemas';
import * as store from './store';

const present = (n: NotificationRow) => ({
  id: n.id,
  kind: n.kind,
  ticket_id: n.ticket_id,
  body: n.body,
  meta: n.meta,
  read_at: isoOrNull(n.read_at),
  created_at: iso(n.created_at),
});

export interface NotificationDraft {
  kind: 'assigned' | 'reply_on_assigned' | 'mentioned';
  ticketId: string;
  body: string;
  meta?: Record<string, unknown>;
}

/** Where a UUID's hyphens sit (8-4-4-4-12); every other of its 36 characters is a hex digit. */
const HYPHENS = new Set([8, 13, 18, 23]);
const isHex = (c: number) => (c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70);
const uuidAt = (s: string, at: number) => {
  if (at + 36 > s.length) return false;
  for (let i = 0; i < 36; i++) {
    const c = s.charCodeAt(at + i);
    if (HYPHENS.has(i) ? c !== 45 : !isHex(c)) return false;
  }
  return true;
};

/**
 * `@<user uuid>` in a note mentions that user. Read by a scan over the '@'s (each looks at 36 characters at most),
 * not a global regular expression: recheck's fuzzer sometimes rated the pattern quadratic on long runs of '@', and a
 * note is caller text.
 */
export function mentionedIds(body: string): string[] {
  const ids = new Set<string>();
  for (let at = body.indexOf('@'); at !== -1; at = body.indexOf('@', at + 1)) {
    if (uuidAt(body, at + 1)) ids.add(body.slice(at + 1, at + 37).toLowerCase());
  }
  return [...ids];
}

export function createNotificationService(deps: { db: Db }) {
  const { db } = deps;
  return {
    /**
     * Written inside the caller's transaction. Only active members of the workspace are notified, and
     * never the person whose own action caused it.
     */
    async notify(tx: Executor, tenantId: string, userIds: string[], actorUserId: string | null, draft: NotificationDraft) {
      const wanted = [...new Set(userIds)].filter((id) => id !== actorUserId);
      await store.insertForActiveMembers(
        tx,
        tenantId,
        { kind: draft.kind, ticket_id: draft.ticketId, body: draft.body, meta: draft.meta ?? {} },
        wanted.map((user_id) => ({ id: newId(), user_id })),
      );
    },

    async list(actor: Principal, q: { unread_only: boolean; limit: number; after?: Cursor }) {
      const rows = await store.listForUser(db, actor.tenantId, actor.userId, { unreadOnly: q.unread_only, limit: q.limit, after: q.after });
      return pageOf('notifications', rows, q.limit, NOTIFICATION_SORT, present);
    },

    async markRead(actor: Principal, body: { ids?: string[]; all?: true }) {
      return { updated: await store.markRead(db, actor.tenantId, actor.userId, body.all ? 'all' : body.ids!) };
    },
  };
}

export type NotificationService = ReturnType<typeof createNotificationService>;
