import { AppError, validationFailed, type FieldError } from './errors';

/**
 * Edge rules for caller text, applied to every operation before any schema or handler sees the input:
 * PostgreSQL cannot store U+0000 or an unpaired UTF-16 surrogate in text/jsonb (it answers 22021/22P05,
 * which used to surface as 500s), and deeply nested JSON makes every recursive consumer downstream
 * (serialisers, loggers, jsonb encoding, schema checks) overflow the stack or work for seconds.
 */

/** Objects and arrays may nest this deep (the outermost one is level 1); no payload of ours needs more than a handful. */
export const MAX_JSON_DEPTH = 64;

/** At most this many offending strings are named in one refusal; the rest are implied. */
const MAX_REPORTED = 10;

export const payloadTooComplex = () =>
  new AppError(400, 'payload_too_complex', 'Payload too complex', `JSON objects and arrays may nest at most ${MAX_JSON_DEPTH} levels deep.`);

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/**
 * Whether the JSON text nests deeper than `limit`, found in one linear pass without parsing. It runs before
 * JSON.parse, which builds a 1 MiB body of brackets (half a million levels) in about 400 ms on the event
 * loop; this pass stops at the first character past the limit. Bytes are read as UTF-8 (every byte of a
 * multi-byte character is >= 0x80, so structural ASCII cannot be mistaken inside one); a string is read by
 * UTF-16 code units (bodies in other charsets, decoded first).
 */
export function jsonDeeperThan(text: Uint8Array | string, limit = MAX_JSON_DEPTH): boolean {
  const at = typeof text === 'string' ? (i: number) => text.charCodeAt(i) : (i: number) => text[i]!;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = at(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/**
 * The body parser's `verify` hook: refuses a too-deep body before it is parsed. Bodies in a charset other
 * than UTF-8 are decoded for the scan when the platform can; otherwise the walk after parsing still refuses
 * them (with the parse cost bounded by the body size limit).
 */
export function refuseDeepJsonBody(_req: unknown, _res: unknown, buf: Buffer, encoding: string | null): void {
  let text: Uint8Array | string = buf;
  const charset = (encoding ?? 'utf-8').toLowerCase();
  if (charset !== 'utf-8' && charset !== 'utf8') {
    try {
      text = new TextDecoder(charset).decode(buf);
    } catch {
      return;
    }
  }
  if (jsonDeeperThan(text)) throw Object.assign(new Error('JSON nests too deep'), { type: TOO_DEEP });
}

/** The body parser error type `refuseDeepJsonBody` raises, answered as payloadTooComplex(). */
export const TOO_DEEP = 'entity.too.complex';

/** The string holds a character PostgreSQL text cannot: U+0000 or a surrogate without its pair. */
export function unstorableText(s: string): string | null {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0) return 'must not contain NUL (U+0000)';
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (next >= 0xdc00 && next <= 0xdfff) i++;
      else return 'must not contain an unpaired surrogate';
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return 'must not contain an unpaired surrogate';
    }
  }
  return null;
}

/**
 * Walks a parsed JSON value with an explicit stack (never recursion, so no input can overflow the call
 * stack): whether it nests deeper than MAX_JSON_DEPTH, and each string or object key that cannot be stored
 * as text, by path. `prefix` names where the value came from: "body", "query".
 */
export function inspectJson(value: unknown, prefix: string): { tooDeep: boolean; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const stack: { v: unknown; path: string; depth: number }[] = [{ v: value, path: prefix, depth: 0 }];
  while (stack.length > 0) {
    const { v, path, depth } = stack.pop()!;
    if (typeof v === 'string') {
      const why = unstorableText(v);
      if (why && errors.length < MAX_REPORTED) errors.push({ path: path || '(root)', message: why });
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > MAX_JSON_DEPTH) return { tooDeep: true, errors };
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], path: join(path, String(i)), depth: depth + 1 });
      continue;
    }
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      const why = unstorableText(key);
      // The key cannot be echoed faithfully either: the path names its parent and says so.
      if (why) {
        if (errors.length < MAX_REPORTED) errors.push({ path: path || '(root)', message: `a field name ${why}` });
        continue;
      }
      stack.push({ v: (v as Record<string, unknown>)[key], path: join(path, key), depth: depth + 1 });
    }
  }
  return { tooDeep: false, errors };
}

/** inspectJson as a refusal: 400 payload_too_complex, else 400 validation_failed naming each path. */
export function assertStorableJson(value: unknown, prefix: string): void {
  const { tooDeep, errors } = inspectJson(value, prefix);
  if (tooDeep) throw payloadTooComplex();
  if (errors.length > 0) throw validationFailed(errors, 'The request holds text that cannot be stored: NUL characters and unpaired surrogates are refused.');
}

const join = (path: string, key: string) => (path ? `${path}.${key}` : key);
