import { payloadTooComplex, validationFailed, type DomainError, type FieldError } from './errors';

/**
 * Limits for caller text and JSON, pure (no HTTP): the router applies them to every operation's input, and
 * the webhook intake to the raw bytes it verifies. Edge rules for caller text, applied to every operation before any schema or handler sees the input:
 * PostgreSQL cannot store U+0000 or an unpaired UTF-16 surrogate in text/jsonb (it answers 22021/22P05,
 * which used to surface as 500s), and deeply nested JSON makes every recursive consumer downstream
 * (serialisers, loggers, jsonb encoding, schema checks) overflow the stack or work for seconds.
 */

/** Objects and arrays may nest this deep (the outermost one is level 1); no payload of ours needs more than a handful. */
export const MAX_JSON_DEPTH = 64;

/** At most this many offending strings are named in one refusal; the rest are implied. */
const MAX_REPORTED = 10;

/**
 * Values (array elements, object members, containers) one JSON body may hold. JSON.parse is linear, but a
 * 1 MiB body of 300,000 empty objects still takes ~100 ms of the event loop, and 80,000 keys in one object
 * ~50 ms; no payload of ours comes near this (a 100-message WhatsApp batch is a few thousand values).
 */
export const MAX_JSON_VALUES = 20_000;

/** The refusal for a body the scan or the walk found over a structural limit. */
export function jsonTooComplex(reason: 'too_deep' | 'too_many'): DomainError {
  return payloadTooComplex([
    reason === 'too_deep'
      ? { path: 'body', message: `JSON objects and arrays may nest at most ${MAX_JSON_DEPTH} levels deep` }
      : { path: 'body', message: `a JSON body may hold at most ${MAX_JSON_VALUES} values (array elements, object members and containers)` },
  ]);
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const LETTER_U = 0x75;
const COMMA = 0x2c;
const ZERO = 0x30;

/** What a pass over JSON text found, before any parsing. */
export type JsonScan = 'clean' | 'too_deep' | 'too_many' | 'suspect_text';

/** `\u0000` or `\uD800`–`\uDFFF` starts at bytes[i] (a backslash inside a string). */
function suspectEscape(bytes: Uint8Array, i: number): boolean {
  if (bytes[i + 1] !== LETTER_U) return false;
  const a = bytes[i + 2]!;
  const b = bytes[i + 3]!;
  if (a === ZERO && b === ZERO && bytes[i + 4] === ZERO && bytes[i + 5] === ZERO) return true;
  // d or D, then 8, 9, a-f or A-F: a surrogate code unit (its pair, if any, is checked after parsing).
  return (a === 0x64 || a === 0x44) && ((b >= 0x38 && b <= 0x39) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46));
}

/**
 * One linear pass over JSON bytes (UTF-8) without parsing: 'too_deep' as soon as objects and arrays nest
 * deeper than `limit` (bracket depth outside strings, escapes honoured), else 'suspect_text' when a string
 * holds a `\u0000` or surrogate escape (the only ways JSON text can carry NUL or a lone surrogate: raw
 * control characters are invalid JSON, and surrogate bytes in UTF-8 decode to U+FFFD), else 'clean'. It runs
 * before JSON.parse, which builds a 1 MiB body of brackets (half a million levels) in about 400 ms on the
 * event loop, and it lets a clean body skip the walk after parsing. Every byte of a multi-byte UTF-8
 * character is >= 0x80, so structural ASCII cannot be mistaken inside one.
 */
export function scanJson(bytes: Uint8Array, limit = MAX_JSON_DEPTH, maxValues = MAX_JSON_VALUES): JsonScan {
  let depth = 0;
  let values = 0;
  let inString = false;
  let suspect = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === BACKSLASH) {
        if (!suspect && suspectEscape(bytes, i)) suspect = true;
        i++;
      } else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limit) return 'too_deep';
      if (++values > maxValues) return 'too_many';
    } else if (c === COMMA) {
      if (++values > maxValues) return 'too_many';
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return suspect ? 'suspect_text' : 'clean';
}

const SUSPECT = /[\u0000\uD800-\uDFFF]/;

/** The string holds a character PostgreSQL text cannot: U+0000 or a surrogate without its pair. */
export function unstorableText(s: string): string | null {
  // Almost all text has neither; the regular expression (a single character class, linear) rules it out fast.
  if (!SUSPECT.test(s)) return null;
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
 * Walks a parsed JSON value depth first with an explicit stack of frames (never recursion, so no input can
 * overflow the call stack; the stack never holds more than MAX_JSON_DEPTH frames): whether it nests
 * deeper than MAX_JSON_DEPTH, and each string or object key that cannot be stored as text, by path. Paths
 * are built only for what is reported, so a wide value costs one visit per element and nothing more.
 * `prefix` names where the value came from: "body", "query".
 */
export function inspectJson(value: unknown, prefix: string): { tooDeep: boolean; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const report = (segments: (string | number)[], message: string) => {
    if (errors.length < MAX_REPORTED) errors.push({ path: segments.filter((s) => s !== '').join('.') || '(root)', message });
  };
  if (typeof value === 'string') {
    const why = unstorableText(value);
    if (why) report([prefix], why);
    return { tooDeep: false, errors };
  }
  if (value === null || typeof value !== 'object') return { tooDeep: false, errors };

  // Frame i: a container, its keys (null for an array), the next child to visit and its own path segment.
  const nodes: object[] = [value];
  const keyLists: (string[] | null)[] = [Array.isArray(value) ? null : Object.keys(value)];
  const next: number[] = [0];
  // Array indexes stay numbers until a path is reported.
  const names: (string | number)[] = [prefix];
  while (nodes.length > 0) {
    const top = nodes.length - 1;
    const node = nodes[top]!;
    const keys = keyLists[top]!;
    const i = next[top]!;
    if (i >= (keys ? keys.length : (node as unknown[]).length)) {
      nodes.pop();
      keyLists.pop();
      next.pop();
      names.pop();
      continue;
    }
    next[top] = i + 1;
    let child: unknown;
    if (keys) {
      const key = keys[i]!;
      const why = unstorableText(key);
      // The key cannot be echoed faithfully either: the path names the object holding it and says so.
      if (why) {
        report(names, `a field name ${why}`);
        continue;
      }
      child = (node as Record<string, unknown>)[key];
    } else {
      child = (node as unknown[])[i];
    }
    if (typeof child === 'string') {
      const why = unstorableText(child);
      if (why) report([...names, keys ? keys[i]! : i], why);
    } else if (child !== null && typeof child === 'object') {
      if (nodes.length + 1 > MAX_JSON_DEPTH) return { tooDeep: true, errors };
      nodes.push(child);
      keyLists.push(Array.isArray(child) ? null : Object.keys(child));
      next.push(0);
      names.push(keys ? keys[i]! : i);
    }
  }
  return { tooDeep: false, errors };
}

/** inspectJson as a refusal: 400 payload_too_complex, else 400 validation_failed naming each path. */
export function assertStorableJson(value: unknown, prefix: string): void {
  const { tooDeep, errors } = inspectJson(value, prefix);
  if (tooDeep) throw jsonTooComplex('too_deep');
  if (errors.length > 0) throw validationFailed(errors, 'The request holds text that cannot be stored: NUL characters and unpaired surrogates are refused.');
}

/**
 * A body read as raw bytes (a provider's signed payload) parsed as a JSON object under the same limits as
 * every JSON body: depth and count checked on the bytes before JSON.parse builds anything, then NUL and
 * unpaired surrogates. `invalid` words the refusal in the caller's own code (not an object, unstorable text).
 */
export function parseJsonObject(raw: Buffer, invalid: (detail: string, errors?: FieldError[]) => DomainError): Record<string, unknown> {
  const scanned = scanJson(raw);
  if (scanned === 'too_deep' || scanned === 'too_many') throw jsonTooComplex(scanned);
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw validationFailed([{ path: '(body)', message: 'malformed JSON' }], 'The body is not valid JSON.');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('The payload must be a JSON object.');
  const inspected = scanned === 'clean' ? { tooDeep: false, errors: [] } : inspectJson(body, 'body');
  if (inspected.tooDeep) throw jsonTooComplex('too_deep');
  if (inspected.errors.length > 0) throw invalid('The payload contains a NUL character or an unpaired surrogate, which cannot be stored.', inspected.errors);
  return body as Record<string, unknown>;
}
