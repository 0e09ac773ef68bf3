import type { z } from 'zod';
import type { InboundFileRef, InboundMessage, ParseResult } from './types';

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

/**
 * A file name as a provider gave it, bounded (the files domain sanitises it before storing; this only keeps a
 * hostile name from bloating the job and the event). Undefined when absent or blank.
 */
export function fileName(value: unknown): string | undefined {
  return typeof value === 'string' ? nonBlank(value)?.slice(0, 1024) : undefined;
}

/** A declared MIME type when it looks like one (`image/jpeg`), lower-cased; anything else is not kept. */
export function mimeType(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const t = value.split(';')[0]!.trim().toLowerCase();
  return t.length <= 100 && /^[\w.+-]+\/[\w.+-]+$/.test(t) ? t : undefined;
}

/** A declared size in bytes when it is one. */
export function byteSize(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\d{1,15}$/.test(value.trim()) ? Number(value) : value;
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

const EXTENSIONS: Record<string, string> = {
  'image/jpeg': '.jpg',
  'image/png': '.png',
  'image/gif': '.gif',
  'image/webp': '.webp',
  'image/heic': '.heic',
  'application/pdf': '.pdf',
  'audio/ogg': '.ogg',
  'audio/mpeg': '.mp3',
  'audio/mp4': '.m4a',
  'audio/amr': '.amr',
  'audio/aac': '.aac',
  'video/mp4': '.mp4',
  'video/3gpp': '.3gp',
  'text/plain': '.txt',
  'text/vcard': '.vcf',
  'text/x-vcard': '.vcf',
  'application/x-tgsticker': '.tgs',
  'video/webm': '.webm',
};

/** A name for a file the provider sends without one (`image.jpg`, `media-2.pdf`): the kind and its type's extension. */
export const nameFor = (stem: string, type: string | undefined) => `${stem}${(type && EXTENSIONS[type]) ?? ''}`;

/** A file reference with only the fields that have a value. */
export function fileRef(name: string, source: InboundFileRef['source'], o: { declaredType?: string; size?: number; contentId?: string } = {}): InboundFileRef {
  return {
    name,
    ...(o.declaredType ? { declaredType: o.declaredType } : {}),
    ...(o.size !== undefined ? { size: o.size } : {}),
    ...(o.contentId ? { contentId: o.contentId } : {}),
    source,
  };
}
