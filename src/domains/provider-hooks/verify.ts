import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * How each provider that posts straight to `POST /v1/hooks/{channel}/{inbound_token}` proves the request is
 * its own (DESIGN.md §7): Twilio HMAC-SHA1 over URL and params, Meta `X-Hub-Signature-256`, the Telegram
 * secret-token header, Postmark HTTP basic auth. Plus the two pieces the Twilio check needs from the
 * request: its form fields and the URL Twilio signed. Pure: no I/O, nothing here throws on caller input,
 * every comparison with a secret runs in constant time, and everything the caller sends is bounded
 * (DESIGN.md §6). Provider facts: shared/providers.md, "Sending replies and native provider hooks".
 */

// ------------------------------------------------------------------------------------------ helpers

/**
 * Constant-time equality of two strings of any length. Both sides are hashed to 32 bytes first:
 * timingSafeEqual needs equal lengths, and comparing lengths directly would tell a caller how long the
 * secret is. SHA-256 is not a secret-keyed MAC, but equal digests mean equal inputs for any input a caller
 * can find.
 */
function secretEquals(expected: string, given: string): boolean {
  const a = createHash('sha256').update(expected, 'utf8').digest();
  const b = createHash('sha256').update(given, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/** Standard base64 alphabet with at most two trailing `=`; checked in one pass, no regular expression. */
function isBase64(text: string): boolean {
  if (text.length === 0) return false;
  let padding = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x3d /* = */) {
      padding++;
      if (padding > 2) return false;
      continue;
    }
    if (padding > 0) return false; // data after padding
    const alnum = (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39);
    if (!alnum && c !== 0x2b /* + */ && c !== 0x2f /* / */) return false;
  }
  return padding < text.length;
}

/** Lower-case or upper-case hex of exactly `length` characters. */
function isHex(text: string, length: number): boolean {
  if (text.length !== length) return false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const hex = (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
    if (!hex) return false;
  }
  return true;
}

/** UTF-8 byte order (= Unicode code point order), the "Unix-style case-sensitive" sort Twilio's docs name. */
function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

// ------------------------------------------------------------------------------------------- Twilio

/** base64 of a 20-byte HMAC-SHA1: always 28 characters ending in one `=`. */
const TWILIO_SIGNATURE_LENGTH = 28;

/**
 * The names-and-values part of Twilio's signed string: every parameter name in byte order, each followed by
 * its value; a repeated name contributes each distinct value, values sorted, name repeated before each —
 * what Twilio's own helper does (twilio-node src/webhooks/webhooks.ts, `toFormUrlEncodedParam`: dedupes
 * with a Set, then sorts). Undefined when a value is neither a string nor a list of strings.
 */
function twilioParamString(params: Record<string, string | string[]>): string | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  const names = Object.keys(params).sort(byteOrder);
  let out = '';
  for (const name of names) {
    const value: unknown = params[name];
    if (typeof value === 'string') {
      out += name + value;
    } else if (Array.isArray(value)) {
      if (!value.every((v): v is string => typeof v === 'string')) return undefined;
      for (const v of [...new Set(value)].sort(byteOrder)) out += name + v;
    } else {
      return undefined;
    }
  }
  return out;
}

/**
 * The URLs a genuine Twilio signature may have been computed over. Twilio's backend is inconsistent about
 * the scheme's default port: it signs `https://host/path` for some webhooks and `https://host:443/path` for
 * others (twilio-node's validateRequest says so — "signature generation on the back end is inconsistent" —
 * and checks both), so a hook
 * that checked only the URL as configured would refuse real deliveries now and then. We accept: the URL as
 * given, its WHATWG serialisation without the default port, and with it spelled out (`:443` for https,
 * `:80` for http). A non-default port is part of the configured URL and is kept as is; unlike twilio-node
 * we do not also try the URL with it stripped, which would accept a signature made for another origin.
 * Every candidate still needs the auth token to sign, so accepting both spellings weakens nothing.
 */
function twilioUrlCandidates(url: string): string[] {
  const candidates = new Set<string>([url]);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return [...candidates];
  }
  const defaultPort = parsed.protocol === 'https:' ? '443' : parsed.protocol === 'http:' ? '80' : undefined;
  // The URL API drops a default port (`new URL('https://h:443/').port === ''`), so `parsed.port` is empty
  // both when it was absent and when it was the default one.
  if (defaultPort !== undefined && parsed.port === '') {
    candidates.add(parsed.toString());
    const userinfo = parsed.username ? `${parsed.username}${parsed.password ? `:${parsed.password}` : ''}@` : '';
    candidates.add(`${parsed.protocol}//${userinfo}${parsed.host}:${defaultPort}${parsed.pathname}${parsed.search}${parsed.hash}`);
  }
  return [...candidates];
}

/**
 * Twilio's `X-Twilio-Signature`: base64(HMAC-SHA1(authToken, url + each POST parameter's name and value,
 * names sorted)). `url` is the full URL Twilio requested, query string included (see publicUrl); `params`
 * the decoded form fields (see parseForm). Checked against the URL with and without the default port (see
 * twilioUrlCandidates). A header of the wrong length, a missing header, an empty token → false; never throws.
 * Twilio's newer Webhook Rules can sign with HMAC-SHA256 and a shared key instead: such a header is 44
 * characters and is refused here.
 */
export function twilioSignatureValid(
  authToken: string,
  url: string,
  params: Record<string, string | string[]>,
  header: string | undefined,
): boolean {
  try {
    if (typeof authToken !== 'string' || authToken === '' || typeof url !== 'string') return false;
    if (typeof header !== 'string' || header.length !== TWILIO_SIGNATURE_LENGTH) return false;
    const given = Buffer.from(header, 'utf8');
    if (given.length !== TWILIO_SIGNATURE_LENGTH) return false; // non-ASCII characters in the header
    const signed = twilioParamString(params);
    if (signed === undefined) return false;
    let valid = false;
    // Every candidate is computed and compared, whichever matches, so the time taken does not say which.
    for (const candidate of twilioUrlCandidates(url)) {
      const expected = Buffer.from(createHmac('sha1', authToken).update(candidate, 'utf8').update(signed, 'utf8').digest('base64'), 'utf8');
      if (timingSafeEqual(given, expected)) valid = true;
    }
    return valid;
  } catch {
    return false;
  }
}

// --------------------------------------------------------------------------------------------- Meta

const META_PREFIX = 'sha256=';
/** `sha256=` + 64 hex characters (a 32-byte HMAC-SHA256). */
const META_SIGNATURE_LENGTH = META_PREFIX.length + 64;

/**
 * Meta's `X-Hub-Signature-256`: `sha256=` + hex HMAC-SHA256(app secret, raw body bytes). The raw bytes, not
 * re-serialised JSON: Meta escapes non-ASCII characters (`\u00e9`) that a round trip through JSON.parse and
 * JSON.stringify would not reproduce. Hex of either case; wrong length or prefix → false; never throws.
 */
export function metaSignatureValid(appSecret: string, rawBody: Buffer, header: string | undefined): boolean {
  try {
    if (typeof appSecret !== 'string' || appSecret === '' || !Buffer.isBuffer(rawBody)) return false;
    if (typeof header !== 'string' || header.length !== META_SIGNATURE_LENGTH || !header.startsWith(META_PREFIX)) return false;
    const hex = header.slice(META_PREFIX.length);
    if (!isHex(hex, 64)) return false;
    const expected = createHmac('sha256', appSecret).update(rawBody).digest();
    return timingSafeEqual(Buffer.from(hex, 'hex'), expected);
  } catch {
    return false;
  }
}

// ----------------------------------------------------------------------------------------- Telegram

/** Telegram's limit on `secret_token` (setWebhook: 1-256 characters `A-Z`, `a-z`, `0-9`, `_`, `-`). */
const TELEGRAM_SECRET_MAX = 256;

/**
 * Telegram's `X-Telegram-Bot-Api-Secret-Token`: the `secret_token` given to setWebhook, sent verbatim with
 * every update. Compared in constant time without revealing the expected length (secretEquals). An empty
 * expected secret never matches: a missing setting must not accept a missing header.
 */
export function telegramSecretValid(expected: string, header: string | undefined): boolean {
  try {
    if (typeof expected !== 'string' || expected === '') return false;
    if (typeof header !== 'string' || header === '' || header.length > TELEGRAM_SECRET_MAX) return false;
    return secretEquals(expected, header);
  } catch {
    return false;
  }
}

// ------------------------------------------------------------------------------------------ Postmark

/**
 * The longest `Authorization` header read. Our inbound hook credentials are generated and short; this bounds
 * the base64 decode and the hashing of a caller's header.
 */
const MAX_AUTHORIZATION_LENGTH = 1024;

/**
 * Postmark's inbound and event webhooks are secured by HTTP basic auth in the webhook URL
 * (`https://user:pass@host/…`), which Postmark sends as `Authorization: Basic base64(user:pass)` (RFC 7617).
 * The scheme is matched case-insensitively; the user-id ends at the first `:` (RFC 7617 forbids `:` in it,
 * the password may contain any). Username and password are both compared in constant time, and both always,
 * so the time taken does not say which was wrong. An empty expected password never matches. Parsed with
 * indexOf and a one-pass alphabet check, no regular expression; header length bounded.
 */
export function basicAuthValid(expected: { username: string; password: string }, header: string | undefined): boolean {
  try {
    if (typeof expected !== 'object' || expected === null) return false;
    if (typeof expected.username !== 'string' || typeof expected.password !== 'string' || expected.password === '') return false;
    if (typeof header !== 'string' || header.length > MAX_AUTHORIZATION_LENGTH) return false;
    const space = header.indexOf(' ');
    if (space <= 0 || header.slice(0, space).toLowerCase() !== 'basic') return false;
    const token = header.slice(space + 1).trim();
    if (!isBase64(token)) return false;
    const decoded = Buffer.from(token, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return false;
    const userOk = secretEquals(expected.username, decoded.slice(0, colon));
    const passwordOk = secretEquals(expected.password, decoded.slice(colon + 1));
    return userOk && passwordOk;
  } catch {
    return false;
  }
}

// ------------------------------------------------------------------------------------- form bodies

export type FormFields = Record<string, string | string[]>;
export type ParsedForm = { ok: true; fields: FormFields } | { ok: false; reason: string };

/**
 * Names that would reach an object's prototype machinery if a consumer ever copied the fields onto a plain
 * object (`Object.assign({}, fields)` with a `__proto__` array would replace the copy's prototype). No
 * provider sends them — Twilio's parameter names are fixed PascalCase words — so a form with one is refused
 * rather than carried along.
 */
const FORBIDDEN_NAMES: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * An `application/x-www-form-urlencoded` body (Twilio's webhooks) as decoded fields: `+` is a space,
 * percent-escapes are decoded as UTF-8 (URLSearchParams: the WHATWG parser, linear in the body's length).
 * A name sent more than once becomes a list of its values in the order sent. Refuses a body over
 * `maxBytes`, more than `maxFields` name=value pairs (repeats counted), and the names in FORBIDDEN_NAMES.
 * The result has no prototype (Object.create(null)): a field named `hasOwnProperty` or `toString` is only data.
 */
export function parseForm(raw: Buffer, limits: { maxFields: number; maxBytes: number }): ParsedForm {
  if (!Buffer.isBuffer(raw)) return { ok: false, reason: 'no raw form body' };
  // A limit that is NaN or missing would compare false with every count and so limit nothing.
  if (!Number.isSafeInteger(limits?.maxFields) || !Number.isSafeInteger(limits?.maxBytes) || limits.maxFields < 0 || limits.maxBytes < 0) {
    return { ok: false, reason: 'form limits are not set' };
  }
  if (raw.length > limits.maxBytes) return { ok: false, reason: `form body is ${raw.length} bytes, more than the ${limits.maxBytes} allowed` };
  const fields: FormFields = Object.create(null) as FormFields;
  let count = 0;
  for (const [name, value] of new URLSearchParams(raw.toString('utf8'))) {
    count++;
    if (count > limits.maxFields) return { ok: false, reason: `form has more than ${limits.maxFields} fields` };
    if (FORBIDDEN_NAMES.has(name)) return { ok: false, reason: `form field name "${name}" is not allowed` };
    const previous = fields[name];
    if (previous === undefined) fields[name] = value;
    else if (typeof previous === 'string') fields[name] = [previous, value];
    else previous.push(value);
  }
  return { ok: true, fields };
}

// ------------------------------------------------------------------------------------------ the URL

/**
 * The URL a provider requested, which is what Twilio signs: PUBLIC_BASE_URL (trailing slashes dropped) +
 * the request's path and query when it is set — behind a TLS-terminating proxy or load balancer the
 * service itself sees `http` and an internal host, never the URL Twilio was given — else the request's
 * own protocol and host (Express 5's `req.host` keeps the port). `originalUrl` is used as received, still
 * percent-encoded: Twilio signs the URL as it requested it, not a decoded or re-encoded form.
 */
export function publicUrl(publicBaseUrl: string | undefined, req: { protocol: string; host: string; originalUrl: string }): string {
  const base = publicBaseUrl === undefined ? '' : withoutTrailingSlashes(publicBaseUrl.trim());
  if (base !== '') return base + req.originalUrl;
  return `${req.protocol}://${req.host}${req.originalUrl}`;
}

/** A loop rather than `/\/+$/`, which V8 runs in quadratic time over a long run of slashes not at the end. */
function withoutTrailingSlashes(url: string): string {
  let end = url.length;
  while (end > 0 && url[end - 1] === '/') end--;
  return url.slice(0, end);
}
