import { sql, type RawBuilder } from 'kysely';
import type { Cursor, KeyKind } from '../lib/paging';

/**
 * The SQL of one keyset page (src/lib/paging.ts): order by `(key, tie)` in one direction, start past the
 * cursor's row, and select the key as exact text for the next cursor. Every list this serves has an index
 * that starts with the tenant and then `(key, tie)`, so any page is one index range scan of `limit + 1` rows.
 */
export interface Keyset {
  /** The sort column and the unique column that breaks its ties (the row id); none when the key is unique. */
  key: string;
  tie?: string;
  kind: KeyKind;
  direction: 'asc' | 'desc';
}

/** The key as the cursor writes it: UTC with microseconds for timestamps (a JS Date would drop them). */
export function pageKey(k: Keyset): RawBuilder<string> {
  return k.kind === 'timestamp'
    ? sql<string>`to_char(${sql.ref(k.key)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`
    : sql<string>`${sql.ref(k.key)}::text`;
}

/** The rows strictly past the cursor's row in the page order (a row tuple comparison, one index range). */
export function pastCursor(k: Keyset, after: Cursor): RawBuilder<boolean> {
  const value = k.kind === 'timestamp' ? sql`${after.key}::timestamptz` : k.kind === 'rank' ? sql`${after.key}::real` : sql`${after.key}::bigint`;
  const op = sql.raw(k.direction === 'desc' ? '<' : '>');
  if (k.tie === undefined) return sql<boolean>`${sql.ref(k.key)} ${op} ${value}`;
  return sql<boolean>`(${sql.ref(k.key)}, ${sql.ref(k.tie)}) ${op} (${value}, ${after.id})`;
}
