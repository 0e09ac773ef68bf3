/**
 * Channel config rules: what a read may show, and what a write must never carry.
 */
/** What a read shows in place of any value that is not an operator descriptor. */
export const REDACTED = '***';

function redactDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactDeep);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactDeep(v)]));
  }
  return REDACTED;
}

const isDescriptorValue = (v: unknown) =>
  typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || (Array.isArray(v) && v.every((x) => typeof x === 'string'));

/**
 * Every value at any depth becomes "***", except the channel's top-level operator descriptors, and those only
 * when they are plain values: a descriptor key holding an object is redacted like anything else.
 */
export function redactConfig(config: Record<string, unknown>, safeKeys: readonly string[]): Record<string, unknown> {
  const safe = new Set(safeKeys);
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, safe.has(k) && isDescriptorValue(v) ? v : redactDeep(v)]));
}

const TOKEN_KEYS = new Set(['access_token', 'refresh_token', 'id_token', 'oauth_token', 'bearer_token', 'oauth_access_token', 'oauth_refresh_token']);
/** accessToken, access-token and ACCESS_TOKEN all name the same thing. */
const normaliseKey = (k: string) => k.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase().replace(/-/g, '_');

const BEARER_VALUE = /^bearer\s+\S{8,}/i;
const JWT_VALUE = /^eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*$/;
const GOOGLE_ACCESS_TOKEN = /^ya29\.[A-Za-z0-9_-]{10,}/;
const GOOGLE_REFRESH_TOKEN = /^1\/\/[A-Za-z0-9_-]{20,}/;

/** The dotted path of the first OAuth token found anywhere in the config, or null. */
export function findMisplacedCredential(value: unknown, path = 'config'): string | null {
  if (typeof value === 'string') {
    return BEARER_VALUE.test(value) || JWT_VALUE.test(value) || GOOGLE_ACCESS_TOKEN.test(value) || GOOGLE_REFRESH_TOKEN.test(value) ? path : null;
  }
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const hit = findMisplacedCredential(v, `${path}.${i}`);
      if (hit) return hit;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (TOKEN_KEYS.has(normaliseKey(k))) return `${path}.${k}`;
      const hit = findMisplacedCredential(v, `${path}.${k}`);
      if (hit) return hit;
    }
  }
  return null;
}

/** How many origins one web chat connection may allow. */
export const MAX_ALLOWED_ORIGINS = 50;

/**
 * A browser origin as `allowed_origins` holds it: `http(s)://host[:port]`, nothing else (no path, query,
 * credentials), normalised as browsers send it (lower-case host, default port dropped). `null` (what sandboxed
 * frames and file:// pages send, so anyone can), `*`, and other schemes are not origins a widget is served from.
 * Null when `value` is not such an origin.
 */
export function normalOrigin(value: string): string | null {
  if (value.length > 2048) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
  if (url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) return null;
  return url.origin;
}
