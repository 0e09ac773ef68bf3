/**
 * File names as a sender wrote them are hostile input (issue 34): a path (`../../etc/passwd`, `C:\x\y.exe`),
 * control characters (a newline splitting a header or a log line), bidi overrides that make `gpj.exe` read as
 * `exe.jpg`, a leading dot (a hidden file on disk when an agent saves it), names longer than any file system
 * takes. `sanitizeFileName` keeps what a person reads as the name and drops the rest, in one linear pass over
 * the code points (no regular expression runs over the caller's text).
 */

/** The most UTF-8 bytes a stored name may have (ext4, APFS and NTFS all stop at 255). */
export const MAX_NAME_BYTES = 255;
/** An extension longer than this is not kept whole when a name must be shortened (it is not much of an extension). */
const MAX_EXTENSION_BYTES = 32;
/** The name given to a file whose name is empty once cleaned. */
export const FALLBACK_NAME = 'file';

/** Bidirectional formatting that can reorder how a name reads: embeddings and overrides, isolates, marks. */
const BIDI = new Set([0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c]);
/** Characters Windows refuses in a name: an agent must be able to save the file under the name shown. */
const RESERVED = new Set(['<', '>', ':', '"', '|', '?', '*']);

const isControl = (cp: number) => cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
const utf8Bytes = (s: string) => Buffer.byteLength(s, 'utf8');

/** Drops code points from the end until the text fits `bytes` UTF-8 bytes (never splitting a surrogate pair). */
function fitBytes(text: string, bytes: number): string {
  const points = [...text];
  let size = utf8Bytes(text);
  while (points.length > 0 && size > bytes) size -= utf8Bytes(points.pop()!);
  return points.join('');
}

/**
 * A stored name from a sender's: the last path segment (after `/` or `\`), NFC-normalised, without control
 * characters or bidi formatting, Windows' reserved characters replaced by `_`, without leading dots and
 * surrounding spaces or trailing dots, at most 255 UTF-8 bytes with its extension kept. Never empty.
 */
export function sanitizeFileName(raw: string): string {
  let name = (typeof raw === 'string' ? raw : '').normalize('NFC');
  const cut = Math.max(name.lastIndexOf('/'), name.lastIndexOf('\\'));
  if (cut >= 0) name = name.slice(cut + 1);
  let out = '';
  for (const ch of name) {
    const cp = ch.codePointAt(0)!;
    // A lone surrogate (half of a pair) is no character at all, and no encoder takes it.
    if (isControl(cp) || BIDI.has(cp) || cp === 0xfeff || (cp >= 0xd800 && cp <= 0xdfff)) continue;
    out += RESERVED.has(ch) ? '_' : ch;
  }
  // Leading dots and spaces (hidden files, `..`), trailing dots and spaces (Windows drops them silently).
  let start = 0;
  while (start < out.length && (out[start] === '.' || out[start] === ' ')) start++;
  let end = out.length;
  while (end > start && (out[end - 1] === '.' || out[end - 1] === ' ')) end--;
  out = out.slice(start, end);
  if (out.length === 0) return FALLBACK_NAME;
  if (utf8Bytes(out) <= MAX_NAME_BYTES) return out;
  // Too long: shorten the stem and keep the extension, when there is a short one.
  const dot = out.lastIndexOf('.');
  const extension = dot > 0 ? out.slice(dot) : '';
  if (extension && utf8Bytes(extension) <= MAX_EXTENSION_BYTES) {
    const stem = fitBytes(out.slice(0, dot), MAX_NAME_BYTES - utf8Bytes(extension)).trimEnd();
    if (stem.length > 0) return stem + extension;
  }
  return fitBytes(out, MAX_NAME_BYTES).trimEnd() || FALLBACK_NAME;
}

/** RFC 8187 / 5987 value encoding: UTF-8, percent-encoded beyond the attr-chars. */
const encodeRfc8187 = (s: string) => encodeURIComponent(s).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * `Content-Disposition: attachment` for a stored name: `filename*` (RFC 6266, UTF-8) for every client that reads
 * it, and a plain ASCII `filename` beside it for the few that do not (non-ASCII, quotes and backslashes as `_`).
 */
export function attachmentDisposition(name: string): string {
  let ascii = '';
  for (const ch of name) {
    const cp = ch.codePointAt(0)!;
    ascii += cp >= 0x20 && cp < 0x7f && ch !== '"' && ch !== '\\' && ch !== '%' ? ch : '_';
  }
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeRfc8187(name)}`;
}
