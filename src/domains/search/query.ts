import type { TicketStatus } from '../../db/types';
import { refuse } from '../../lib/errors';
import { TICKET_SOURCES } from '../channels/registry';
import { LIMITS } from '../tickets/schemas';
import { STATUSES } from '../tickets/status';
import { isLetterOrDigit, tooLong, type SearchLimits } from './limits';

/**
 * The query language of `q` on GET /v1/tickets (issue 36), parsed by one left-to-right pass over the text: every
 * character is looked at a bounded number of times, and the only patterns applied to caller text are tests of
 * one character against a fixed class, so no input can make the parse slow (a backtracking regex over the whole
 * query could be). The limits are checked before anything else is done with the text.
 *
 * - words: all must match; the last bare word is a prefix (`refu` finds "refund");
 * - `"a phrase"`: its words adjacent and in order;
 * - `-word` and `-"a phrase"`: tickets holding it are left out;
 * - operators, the value after the colon or quoted (`tag:"two words"`), names case-insensitive:
 *   `from:` (a fragment of the customer's name, email or handle; a phone fragment matches by its digits), `tag:`,
 *   `status:` and `channel:` (repeatable, or comma-separated: any of), `assignee:me|none|<user id>` (repeatable:
 *   any of), `before:` and `after:` (a date, the UTC day's start, or an ISO datetime with its offset);
 * - anything else shaped like `word:` is a plain word ("re: invoice").
 */

export type { SearchLimits } from './limits';

/**
 * The most any deployment accepts (the settings' upper bounds in src/config.ts): what a stored search (a saved
 * view's `q`) is checked against when saved, since the deployment that runs it may allow more than another.
 */
export const SEARCH_LIMIT_CEILING: SearchLimits = { maxChars: 4096, maxTerms: 256 };

export interface WordTerm {
  text: string;
  /** Matches any word it begins (the query's last bare word, when it is letters and digits only). */
  prefix: boolean;
}

/** A `from:` fragment: matched within the customer's name, email and handles; a phone fragment also by its digits. */
export interface FromFragment {
  text: string;
  /** The fragment's digits when it is written as a phone number (digits and + - ( ) . and spaces), else null. */
  digits: string | null;
}

export type AssigneeTerm = { kind: 'me' } | { kind: 'none' } | { kind: 'user'; id: string };

export interface TicketQuery {
  words: WordTerm[];
  phrases: string[];
  excludedWords: string[];
  excludedPhrases: string[];
  /** Any of them. */
  from: FromFragment[];
  /** All of them, each exactly as the tag is written (as the `tag` filter). */
  tags: string[];
  /** Any of them. */
  statuses: TicketStatus[];
  /** Any of them. */
  assignees: AssigneeTerm[];
  /** Any of them (the ticket's `source`). */
  channels: string[];
  /** created_at before this instant (the earliest, when repeated). */
  before: Date | null;
  /** created_at at or after this instant (the latest, when repeated). */
  after: Date | null;
}

const OPERATORS = ['from', 'tag', 'status', 'assignee', 'channel', 'before', 'after'] as const;
type Operator = (typeof OPERATORS)[number];
const isOperator = (name: string): name is Operator => (OPERATORS as readonly string[]).includes(name);

/** Shortest `from:` fragment (characters, or digits of a phone fragment): shorter ones match nearly everyone. */
const MIN_FRAGMENT = 3;
const SEARCHABLE_STATUSES = STATUSES.filter((s) => s !== 'merged');

// One character against a fixed class each: linear in the text, whatever it holds.
const SPACE = /^\s$/u;
const isSpace = (c: string) => SPACE.test(c);
const isDigit = (c: string) => c >= '0' && c <= '9';
const isHex = (c: string) => isDigit(c) || (c >= 'a' && c <= 'f');
const PHONE_PUNCTUATION = new Set(['+', '-', '(', ')', '.', ' ']);

const invalid = (message: string, path: string) => refuse('query_invalid', `The search query is not valid: ${message}.`, [{ path, message }]);

/** Parses `q`; refuses (400 query_invalid, query_too_long or query_too_complex, naming the problem) what it cannot take. */
export function parseTicketQuery(text: string, limits: SearchLimits, path = 'q'): TicketQuery {
  // Length first, before the text is split or scanned: one count of its characters. UTF-16 units are at least as
  // many as characters, so only a text over the limit in units is counted in characters.
  if (text.length > limits.maxChars) {
    const chars = countChars(text);
    if (chars > limits.maxChars) {
      throw tooLong(chars, limits.maxChars, path);
    }
  }
  const cs = Array.from(text.normalize('NFC'));
  const q: TicketQuery = { words: [], phrases: [], excludedWords: [], excludedPhrases: [], from: [], tags: [], statuses: [], assignees: [], channels: [], before: null, after: null };
  let terms = 0;
  const counted = () => {
    terms += 1;
    if (terms > limits.maxTerms) {
      throw refuse('query_too_complex', `The search query holds more than ${limits.maxTerms} terms; at most ${limits.maxTerms} (SEARCH_QUERY_MAX_TERMS) are accepted.`, [
        { path, message: `at most ${limits.maxTerms} words, phrases and operators` },
      ]);
    }
  };

  /** The text between the quote at `open` and the next one, and where scanning goes on. */
  const quoted = (open: number): { value: string; end: number } => {
    let k = open + 1;
    while (k < cs.length && cs[k] !== '"') k += 1;
    if (k >= cs.length) throw invalid(`unclosed quote (opened at character ${open + 1})`, path);
    return { value: cs.slice(open + 1, k).join(''), end: k + 1 };
  };

  let i = 0;
  while (i < cs.length) {
    if (isSpace(cs[i]!)) {
      i += 1;
      continue;
    }
    const negated = cs[i] === '-' && i + 1 < cs.length && !isSpace(cs[i + 1]!);
    if (negated) i += 1;
    if (cs[i] === '"') {
      const { value, end } = quoted(i);
      i = end;
      if (!hasLetterOrDigit(value)) continue;
      counted();
      (negated ? q.excludedPhrases : q.phrases).push(value);
      continue;
    }
    // A bare token: up to the next space or quote.
    let j = i;
    while (j < cs.length && !isSpace(cs[j]!) && cs[j] !== '"') j += 1;
    const token = cs.slice(i, j).join('');
    const colon = token.indexOf(':');
    const name = colon > 0 ? token.slice(0, colon).toLowerCase() : '';
    if (isOperator(name)) {
      if (negated) throw invalid(`the operator ${name}: cannot be excluded (only words and phrases can: -word, -"a phrase")`, path);
      let value = token.slice(colon + 1);
      if (value === '' && j < cs.length && cs[j] === '"') {
        const q2 = quoted(j);
        value = q2.value;
        j = q2.end;
      }
      value = value.trim();
      if (value === '') throw invalid(`the operator ${name}: has no value`, path);
      counted();
      applyOperator(q, name, value, path);
    } else if (hasLetterOrDigit(token)) {
      counted();
      if (negated) q.excludedWords.push(token);
      else q.words.push({ text: token, prefix: false });
    }
    i = j;
  }

  const last = q.words[q.words.length - 1];
  if (last && isPrefixable(last.text)) last.prefix = true;
  if (terms === 0) throw invalid('nothing to search for (no words, phrases or operators)', path);
  return q;
}

/**
 * A query of exclusions alone ("everything but…") would read the whole workspace: it is refused unless another
 * filter (an operator of the query, or a filter of the request) narrows it.
 */
export function requireSomethingToFind(q: TicketQuery, otherFilters: boolean, path = 'q'): void {
  const positive =
    q.words.length + q.phrases.length + q.from.length + q.tags.length + q.statuses.length + q.assignees.length + q.channels.length > 0 || q.before !== null || q.after !== null;
  if (!positive && !otherFilters) throw invalid('only exclusions; add a word, a phrase or a filter to search within', path);
}

/**
 * Letters and digits only: what may be matched as a prefix. Nothing in such a word can be read as tsquery syntax
 * (operators, quotes, weights, `:*`), so the engine may hand it to to_tsquery with `:*` appended.
 */
export const isPrefixable = (text: string) => text.length > 0 && Array.from(text).every(isLetterOrDigit);

/** Whether the query has text to match (words or phrases), so it has a relevance to rank by. */
export const hasText = (q: TicketQuery) => q.words.length + q.phrases.length > 0;

function applyOperator(q: TicketQuery, name: Operator, value: string, path: string): void {
  switch (name) {
    case 'status':
      for (const v of value.toLowerCase().split(',')) {
        if (v === 'merged') throw invalid('status:merged never matches: search leaves merged tickets out (their text is found on the ticket they were merged into)', path);
        if (!(SEARCHABLE_STATUSES as readonly string[]).includes(v)) throw invalid(`unknown status "${shown(v)}" (one of ${SEARCHABLE_STATUSES.join(', ')})`, path);
        if (!q.statuses.includes(v as TicketStatus)) q.statuses.push(v as TicketStatus);
      }
      return;
    case 'channel':
      for (const v of value.toLowerCase().split(',')) {
        if (!(TICKET_SOURCES as readonly string[]).includes(v)) throw invalid(`unknown channel "${shown(v)}" (one of ${TICKET_SOURCES.join(', ')})`, path);
        if (!q.channels.includes(v)) q.channels.push(v);
      }
      return;
    case 'tag':
      if (Array.from(value).length > LIMITS.tag) throw invalid(`tag:${shown(value)} is longer than ${LIMITS.tag} characters, the longest a tag can be`, path);
      if (!q.tags.includes(value)) q.tags.push(value);
      return;
    case 'assignee': {
      const v = value.toLowerCase();
      if (v === 'me' || v === 'none') q.assignees.push({ kind: v });
      else if (isUuidText(v)) q.assignees.push({ kind: 'user', id: v });
      else throw invalid(`assignee:${shown(value)} is not me, none or a user id`, path);
      return;
    }
    case 'from':
      q.from.push(fromFragment(value, path));
      return;
    case 'before':
    case 'after': {
      const at = instantOf(value);
      if (!at) throw invalid(`${name}:${shown(value)} is not a date (YYYY-MM-DD) or an ISO datetime with its offset`, path);
      if (name === 'before') q.before = q.before && q.before < at ? q.before : at;
      else q.after = q.after && q.after > at ? q.after : at;
      return;
    }
  }
}

function fromFragment(value: string, path: string): FromFragment {
  const chars = Array.from(value.toLowerCase());
  const phone = chars.some(isDigit) && chars.every((c) => isDigit(c) || PHONE_PUNCTUATION.has(c));
  if (phone) {
    const digits = chars.filter(isDigit).join('');
    if (digits.length < MIN_FRAGMENT) throw invalid(`from:${shown(value)} has fewer than ${MIN_FRAGMENT} digits (a phone fragment needs at least ${MIN_FRAGMENT})`, path);
    return { text: chars.join(''), digits };
  }
  if (chars.length < MIN_FRAGMENT) throw invalid(`from:${shown(value)} is shorter than ${MIN_FRAGMENT} characters (a fragment needs at least ${MIN_FRAGMENT})`, path);
  return { text: chars.join(''), digits: null };
}

const hasLetterOrDigit = (s: string) => Array.from(s).some(isLetterOrDigit);

/** A value as an error message quotes it: the start of a long one. */
const shown = (v: string) => (v.length > 40 ? `${v.slice(0, 40)}…` : v);

/** Counts characters (code points): a pair of surrogates is one. */
function countChars(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    // A high surrogate followed by a low one is one character.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i += 1;
    }
    n += 1;
  }
  return n;
}

/** A uuid in its usual text form (8-4-4-4-12 hex digits), lower case. */
function isUuidText(v: string): boolean {
  if (v.length !== 36) return false;
  for (let i = 0; i < 36; i += 1) {
    const dash = i === 8 || i === 13 || i === 18 || i === 23;
    if (dash ? v[i] !== '-' : !isHex(v[i]!)) return false;
  }
  return true;
}

const digitsAt = (s: string, from: number, count: number) => {
  for (let i = from; i < from + count; i += 1) if (!isDigit(s[i] ?? '')) return false;
  return true;
};

/** `YYYY-MM-DD` (that UTC day's start), or `YYYY-MM-DDTHH:MM[:SS[.fraction]]` with `Z` or `±HH:MM`; null otherwise. */
function instantOf(v: string): Date | null {
  if (v.length < 10 || !digitsAt(v, 0, 4) || v[4] !== '-' || !digitsAt(v, 5, 2) || v[7] !== '-' || !digitsAt(v, 8, 2)) return null;
  const day = v.slice(0, 10);
  // A calendar date that exists (2026-02-30 does not): Date would roll it over, so it is checked by a round trip.
  const midnight = new Date(`${day}T00:00:00.000Z`);
  if (Number.isNaN(midnight.getTime()) || midnight.toISOString().slice(0, 10) !== day) return null;
  if (v.length === 10) return midnight;
  if (v[10] !== 'T' && v[10] !== 't') return null;
  let i = 11;
  const two = (max: number) => {
    if (!digitsAt(v, i, 2)) return null;
    const n = Number(v.slice(i, i + 2));
    i += 2;
    return n <= max ? n : null;
  };
  const hh = two(23);
  if (hh === null || v[i] !== ':') return null;
  i += 1;
  const mm = two(59);
  if (mm === null) return null;
  let ss = 0;
  let ms = 0;
  if (v[i] === ':') {
    i += 1;
    const s = two(59);
    if (s === null) return null;
    ss = s;
    if (v[i] === '.') {
      i += 1;
      const start = i;
      while (i < v.length && isDigit(v[i]!)) i += 1;
      if (i === start || i - start > 9) return null;
      ms = Number(v.slice(start, Math.min(i, start + 3)).padEnd(3, '0'));
    }
  }
  let offsetMinutes = 0;
  if (v[i] === 'Z' || v[i] === 'z') i += 1;
  else if (v[i] === '+' || v[i] === '-') {
    const sign = v[i] === '-' ? -1 : 1;
    i += 1;
    const oh = two(23);
    if (oh === null || v[i] !== ':') return null;
    i += 1;
    const om = two(59);
    if (om === null) return null;
    offsetMinutes = sign * (oh * 60 + om);
  } else return null;
  if (i !== v.length) return null;
  return new Date(midnight.getTime() + ((hh * 60 + mm - offsetMinutes) * 60 + ss) * 1000 + ms);
}
