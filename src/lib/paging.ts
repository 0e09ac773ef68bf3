import { z } from 'zod';

/**
 * Cursor paging for every list that can grow (tickets, notifications, the audit log, ingest deliveries, time
 * entries, members, transcripts). A page is a keyset read, `(sort key, id)` past the last row the client
 * saw, so it stays stable while rows arrive (a new ticket never shifts page 2 by one) and page 10,000 costs
 * what page 1 costs. The cursor is opaque to clients (base64url of a small JSON), but not trusted: it is
 * parsed back under explicit limits and every part is checked before it reaches SQL.
 */

/**
 * How a list's sort key is written in a cursor: a timestamp at PostgreSQL's microsecond precision, a sequence,
 * or a search rank (a `real`, written as PostgreSQL writes it: the shortest text that reads back as the same value).
 */
export type KeyKind = 'timestamp' | 'sequence' | 'rank';

/** What a cursor carries: the sort it belongs to, the last row's sort key and its id (the tie-breaker; '' when the key is unique). */
export interface Cursor {
  sort: string;
  key: string;
  id: string;
}

/** One page as every list answers it: the rows under the list's own name, and where to go on (null at the end). */
export type Page<Name extends string, Row> = { [K in Name]: Row[] } & { next_cursor: string | null };

const MAX_CURSOR_CHARS = 256;

const wire = z.strictObject({ s: z.string().max(32), k: z.string().max(32), i: z.string().max(64) });

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify({ s: c.sort, k: c.key, i: c.id })).toString('base64url');
}

const isDigits = (s: string) => s.length > 0 && [...s].every((c) => c >= '0' && c <= '9');

/**
 * `2025-03-14T09:26:53.412345Z` exactly (what the stores write): checked by a round trip through Date for
 * the millisecond part, so "2025-02-30" or "25:00" never reach PostgreSQL as a cast that fails.
 */
function isMicrosecondTimestamp(k: string): boolean {
  if (k.length !== 27 || k[26] !== 'Z' || !isDigits(k.slice(23, 26))) return false;
  const millis = `${k.slice(0, 23)}Z`;
  const d = new Date(millis);
  return !Number.isNaN(d.getTime()) && d.toISOString() === millis;
}

/** A bigint sequence value: digits, within PostgreSQL's bigint. */
const isSequence = (k: string) => isDigits(k) && k.length <= 19 && BigInt(k) <= 9223372036854775807n;

/**
 * A rank: a finite, non-negative decimal number (`0.1`, `1.5e-05`), checked character by character and then as a
 * number, so `NaN`, `Infinity` or anything PostgreSQL's `real` input would refuse never reaches it.
 */
function isRank(k: string): boolean {
  if (k.length === 0 || ![...k].every((c) => (c >= '0' && c <= '9') || c === '.' || c === 'e' || c === '-' || c === '+')) return false;
  const n = Number(k);
  return Number.isFinite(n) && n >= 0;
}

const keyOfKind: Record<KeyKind, (k: string) => boolean> = { timestamp: isMicrosecondTimestamp, sequence: isSequence, rank: isRank };

/** A cursor as the first sort of a list would give it out (the OpenAPI example). */
function exampleCursor(sorts: Record<string, KeyKind>, tie: z.ZodType<string>): string {
  const [sort, kind] = Object.entries(sorts)[0]!;
  const id = tie.safeParse('595be628-f6f2-4262-9c10-6389c6c4a5b8').success ? '595be628-f6f2-4262-9c10-6389c6c4a5b8' : '';
  return encodeCursor({ sort, key: kind === 'timestamp' ? '2025-03-14T09:26:53.412345Z' : kind === 'rank' ? '0.3' : '1042', id });
}

/**
 * The `after` query parameter of a list: decodes the cursor and checks it belongs to this list's sorts, with
 * a key of the right kind and an id of the right shape. Anything else is a 400 on `after`, never a 500.
 */
export function afterParam(sorts: Record<string, KeyKind>, id: z.ZodType<string> = z.uuid()) {
  return z
    .string()
    .min(1)
    .max(MAX_CURSOR_CHARS)
    .transform((raw, ctx): Cursor => {
      const bad = (message: string) => {
        ctx.addIssue({ code: 'custom', message });
        return z.NEVER;
      };
      let json: unknown;
      try {
        json = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
      } catch {
        return bad('not a cursor this list gave out');
      }
      const parsed = wire.safeParse(json);
      if (!parsed.success) return bad('not a cursor this list gave out');
      const { s, k, i } = parsed.data;
      const kind = Object.hasOwn(sorts, s) ? sorts[s] : undefined;
      if (kind === undefined) return bad('not a cursor this list gave out');
      if (!keyOfKind[kind](k) || !id.safeParse(i).success) return bad('not a cursor this list gave out');
      return { sort: s, key: k, id: i };
    })
    .meta({ description: 'The `next_cursor` of the previous page (opaque). Omit it for the first page.', examples: [exampleCursor(sorts, id)] });
}

/**
 * Cuts a page from rows read with one extra (`limit + 1`): the extra row only says there is a next page,
 * whose cursor is the last row shown.
 */
export function pageOf<Name extends string, Row extends { page_key: string; id?: string }, Out>(
  name: Name,
  rows: Row[],
  limit: number,
  sort: string,
  present: (row: Row) => Out,
  tieOf: (row: Row) => string = (row) => row.id ?? '',
): Page<Name, Out> {
  const shown = rows.slice(0, limit);
  const last = shown[shown.length - 1];
  const next = rows.length > limit && last ? encodeCursor({ sort, key: last.page_key, id: tieOf(last) }) : null;
  return { [name]: shown.map(present), next_cursor: next } as Page<Name, Out>;
}

/** A list's envelope schema: the rows under the list's name and `next_cursor`. */
export function pageSchema<Name extends string, Item extends z.ZodType>(name: Name, item: Item) {
  return z.object({
    [name]: z.array(item),
    next_cursor: z.string().nullable().meta({ description: 'Pass as `after` for the next page; null on the last page.', examples: [null] }),
  } as { [K in Name]: z.ZodArray<Item> } & { next_cursor: z.ZodNullable<z.ZodString> });
}

/** Each multi-value filter's item schema, for the OpenAPI document (which shows the parameter as an array). */
const LIST_ITEMS = new WeakMap<z.ZodType, { item: z.ZodType; max: number }>();
export const listParamItems = (schema: z.ZodType) => LIST_ITEMS.get(schema);

/**
 * A multi-value filter, sent either way a client writes an array in a query string: comma-separated
 * (`status=open,pending`) or the key repeated (`status=open&status=pending`, OpenAPI's default
 * `style: form, explode: true`, what openapi-fetch sends), or both at once. Express's query parser gives a
 * repeated key as an array; its parts are joined with commas, so both forms meet the same limits (at most
 * `max * 80` characters, at most `max` distinct values). Each value is checked by `item`, duplicates folded;
 * a bad value is reported on the parameter itself, naming its position.
 */
export function listParam<T extends string>(item: z.ZodType<T, string>, max: number) {
  const schema = z
    .preprocess((sent) => (Array.isArray(sent) && sent.every((v) => typeof v === 'string') ? sent.join(',') : sent), z.string().max(max * 80))
    .transform((raw, ctx): T[] => {
      const values = [...new Set(raw.split(','))];
      if (values.length > max) {
        ctx.addIssue({ code: 'custom', message: `at most ${max} values` });
        return z.NEVER;
      }
      const parsed = values.map((v) => item.safeParse(v));
      parsed.forEach((r, i) => {
        if (!r.success) ctx.addIssue({ code: 'custom', message: `value ${i + 1}: ${r.error.issues[0]?.message ?? 'not valid'}` });
      });
      return parsed.flatMap((r) => (r.success ? [r.data] : []));
    });
  LIST_ITEMS.set(schema, { item, max });
  return schema;
}
