/**
 * What an erasure looks for and how it replaces it (issue 38). A person is found in free text by literal terms
 * (their address, phone, handles and name), compared ignoring ASCII case, never by a pattern: the text is
 * caller text of any size, and a literal search is linear in it (String.prototype.indexOf per term).
 */

/** What erased text is replaced by. */
export const ERASED = '[erased]';

/** A literal to find: `word` ones (parts of a name) only where no letter or digit touches them. */
export interface Term {
  text: string;
  word: boolean;
}

/** The fewest characters a name part has to be erased on its own: shorter ones ("Al", "Li") are common inside other words. */
export const MIN_NAME_PART = 3;

/** Lower case for A to Z only: the result has the same length, so positions found in it are positions in the original. */
export function asciiLower(s: string): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < s.length; i += 1) {
    const c = s.charCodeAt(i);
    if (c >= 65 && c <= 90) {
      out += s.slice(from, i) + String.fromCharCode(c + 32);
      from = i + 1;
    }
  }
  return from === 0 ? s : out + s.slice(from);
}

const isWordChar = (s: string, i: number) => {
  if (i < 0 || i >= s.length) return false;
  const ch = s[i]!;
  return ch.toLowerCase() !== ch.toUpperCase() || (ch >= '0' && ch <= '9');
};

/**
 * A person's terms: every address, phone number and handle they hold (exact, and a phone also as its digits),
 * their display name whole, and each part of the name of at least MIN_NAME_PART characters as a word (agents
 * greet customers by their first name). Longest first, so "Maya Fischer" is replaced whole before "Maya".
 */
export function personTerms(person: { display_name: string; email: string; phone: string; handles: { kind: string; handle: string }[] }): Term[] {
  const exact = new Set<string>();
  const words = new Set<string>();
  const add = (v: string) => {
    const t = v.trim();
    if (t.length >= MIN_NAME_PART) exact.add(asciiLower(t));
  };
  add(person.email);
  add(person.phone);
  for (const h of person.handles) {
    add(h.handle);
    if (h.kind === 'phone' || h.kind === 'whatsapp_id') add([...h.handle].filter((c) => c >= '0' && c <= '9').join(''));
  }
  if (person.phone) add([...person.phone].filter((c) => c >= '0' && c <= '9').join(''));
  const name = person.display_name.trim();
  if (name !== '' && name !== ERASED) {
    add(name);
    for (const part of name.split(/\s+/)) if (part.length >= MIN_NAME_PART) words.add(asciiLower(part));
  }
  const terms = [...[...exact].map((text) => ({ text, word: false })), ...[...words].filter((w) => !exact.has(w)).map((text) => ({ text, word: true }))];
  return terms.sort((a, b) => b.text.length - a.text.length);
}

/** The text with every occurrence of the terms replaced by ERASED (the text itself when none occurs). */
export function eraseTerms(text: string, terms: readonly Term[]): string {
  if (text === '' || terms.length === 0) return text;
  const lower = asciiLower(text);
  const spans: [number, number][] = [];
  for (const t of terms) {
    let at = lower.indexOf(t.text);
    while (at >= 0) {
      const end = at + t.text.length;
      if (!t.word || (!isWordChar(text, at - 1) && !isWordChar(text, end))) spans.push([at, end]);
      at = lower.indexOf(t.text, end);
    }
  }
  if (spans.length === 0) return text;
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let out = '';
  let pos = 0;
  for (const [start, end] of spans) {
    if (end <= pos) continue;
    if (start >= pos) out += text.slice(pos, start) + ERASED;
    pos = end;
  }
  return out + text.slice(pos);
}

/** Whether any term occurs in the text (the same test eraseTerms makes). */
export const mentions = (text: string, terms: readonly Term[]) => eraseTerms(text, terms) !== text;

/** A JSON value with the terms erased from every string in it, keys included. */
export function eraseInJson(value: unknown, terms: readonly Term[]): unknown {
  if (typeof value === 'string') return eraseTerms(value, terms);
  if (Array.isArray(value)) return value.map((v) => eraseInJson(v, terms));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [eraseTerms(k, terms), eraseInJson(v, terms)]));
  }
  return value;
}

/** Keys of a message's metadata that name things (ids, the channel), not what the person wrote: kept, with the terms erased. */
const isNamingKey = (k: string) => k === 'id' || k.endsWith('_id') || k.endsWith('_ids') || k === 'channel' || k === 'kind' || k === 'direction';

/**
 * A person's own message's metadata: every string the person wrote or that names them replaced by ERASED whole,
 * except those under naming keys (ids, the channel), which keep their value with the terms erased. Numbers and
 * booleans stay.
 */
export function eraseMessageMeta(value: unknown, terms: readonly Term[], key = ''): unknown {
  if (typeof value === 'string') return isNamingKey(key) ? eraseTerms(value, terms) : ERASED;
  if (Array.isArray(value)) return value.map((v) => eraseMessageMeta(v, terms, key));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [eraseTerms(k, terms), eraseMessageMeta(v, terms, k)]));
  }
  return value;
}

/** The LIKE patterns (escaped: the terms are literals) a store prefilters rows with before eraseTerms decides. */
export const likePatterns = (terms: readonly Term[]) => terms.map((t) => `%${t.text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
