import type { z } from 'zod';
import type { InboundMessage, ParseResult } from './types';

/** Small helpers shared by the channel adapters. Pure: no I/O. */

export const fail = (reason: string): ParseResult => ({ ok: false, reason });
export const ok = (messages: InboundMessage[]): ParseResult => ({ ok: true, messages });

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** "what the payload is" for a refusal: "an array", "null", "a string"… */
export function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  const t = typeof value;
  return t === 'object' ? 'an object' : `a ${t}`;
}

/** The first few zod issues as one line: `entry.0.changes: Invalid input: expected array, received string`. */
export function formatIssues(error: z.ZodError, max = 3): string {
  const parts = error.issues.slice(0, max).map((issue) => {
    const path = issue.path.map(String).join('.');
    const field = issue.path.length > 0 ? String(issue.path[issue.path.length - 1]) : '';
    // Our own messages already name the field ("MessageSid is required"); zod's generic ones need the path.
    return path && !issue.message.startsWith(`${field} `) ? `${path}: ${issue.message}` : issue.message;
  });
  const more = error.issues.length - max;
  return more > 0 ? `${parts.join('; ')} (and ${more} more)` : parts.join('; ');
}

/** A trimmed string, or undefined when absent or blank. */
export function nonBlank(value: string | null | undefined): string | undefined {
  if (typeof value !== 'string') return undefined;
  const t = value.trim();
  return t === '' ? undefined : t;
}

/** Unix seconds (number or numeric string) as an ISO timestamp; undefined when not a plausible time. */
export function unixToIso(value: number | string | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  const seconds = typeof value === 'number' ? value : /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isFinite(seconds) || seconds <= 0) return undefined;
  const d = new Date(seconds * 1000);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** Any date string Date can read, as ISO; undefined otherwise. */
export function dateToIso(value: string | null | undefined): string | undefined {
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}

/**
 * The longest provider message id or sender handle an adapter accepts. Real ones are far shorter (a Twilio
 * sid is 34 characters, a WhatsApp wamid under 100); these become primary-key values, and a key of ~2.7 KB
 * fails PostgreSQL's index, so the ingest job would fail after the caller was kept waiting.
 */
export const MAX_ID_LENGTH = 256;

export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
