import { fileTypeFromBuffer } from 'file-type';

/**
 * A file's content type comes from its bytes, never from what its sender declared (issue 34): a page of HTML
 * named `invoice.png` and sent as `image/png` is `text/html` here. Binary formats are recognised by `file-type`
 * (magic numbers: images, PDF, Office and other zip containers, audio, video, archives …), from the first bytes
 * the blob store hands back while it writes the file. `file-type` recognises no text format, so text is told
 * apart here: valid UTF-8 without control characters is `text/plain`, unless it is markup a browser would run
 * (HTML, SVG, XML), which gets its own type so that it is always served as a download. Anything else is
 * `application/octet-stream`.
 */

/** How many first bytes the type is decided from (file-type's own "reasonable detection size"). */
export const SNIFF_BYTES = 4100;

export const OCTET_STREAM = 'application/octet-stream';

/** Tags that open an HTML document, after leading white space (the WHATWG MIME sniffing standard's list). */
const HTML_OPENERS = ['<!doctype html', '<html', '<head', '<script', '<iframe', '<h1', '<div', '<font', '<table', '<a', '<style', '<title', '<b', '<body', '<br', '<p', '<!--'];
/** Tags that make a text active wherever they appear in its first bytes. */
const ACTIVE_ANYWHERE = ['<script', '<html', '<iframe', '<object', '<embed', '<body'];

/** Types a browser would render or run when opened in place: served only as application/octet-stream downloads. */
const ACTIVE_TYPES = new Set(['text/html', 'image/svg+xml', 'application/xhtml+xml', 'application/xml', 'text/xml', 'text/javascript', 'application/javascript', 'application/x-javascript', 'text/css']);

const isWhite = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f';

/** The text of `head` when it reads as text (UTF-8, no NUL or control characters but white space); else undefined. */
function asText(head: Buffer): string | undefined {
  let bytes = head;
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) bytes = bytes.subarray(3);
  let text: string;
  try {
    // `stream`: a multi-byte character cut at the end of the head is not an error.
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: true });
  } catch {
    return undefined;
  }
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d && c !== 0x0c && c !== 0x1b) || c === 0x7f) return undefined;
  }
  return text;
}

/** An opener matches when the character after it ends the tag name (space, `>` or `/`), or it is a comment. */
function opensWith(lower: string, tag: string): boolean {
  if (!lower.startsWith(tag)) return false;
  if (tag === '<!--') return true;
  const next = lower.charAt(tag.length);
  return next === '' || next === '>' || next === '/' || isWhite(next);
}

/** Markup a browser would run, from a text's first bytes. */
function markupType(text: string): string | undefined {
  const lower = text.toLowerCase();
  let i = 0;
  while (i < lower.length && isWhite(lower.charAt(i))) i++;
  const lead = lower.slice(i);
  if (lead.includes('<svg')) return 'image/svg+xml';
  if (HTML_OPENERS.some((tag) => opensWith(lead, tag)) || ACTIVE_ANYWHERE.some((tag) => lower.includes(tag))) return 'text/html';
  if (lead.startsWith('<?xml')) return 'application/xml';
  return undefined;
}

/** The content type of a file from its first bytes (at most SNIFF_BYTES of them are read). */
export async function sniffContentType(head: Buffer): Promise<string> {
  if (head.length === 0) return OCTET_STREAM;
  const sample = head.subarray(0, SNIFF_BYTES);
  const detected = await fileTypeFromBuffer(sample).catch(() => undefined);
  // file-type knows XML only as XML: whether it is SVG (or XHTML) is read below.
  if (detected && detected.mime !== 'application/xml') return detected.mime;
  const text = asText(sample);
  if (text === undefined && detected) return detected.mime;
  if (text === undefined) return OCTET_STREAM;
  return markupType(text) ?? 'text/plain';
}

/**
 * The type a download is sent with: the stored one, except that active types (HTML, SVG, XML, scripts, CSS)
 * go as application/octet-stream, so no browser renders them whatever else fails (the answer is also
 * `Content-Disposition: attachment`, `nosniff` and `Content-Security-Policy: sandbox`). Text is UTF-8.
 */
export function servedContentType(stored: string): string {
  if (ACTIVE_TYPES.has(stored)) return OCTET_STREAM;
  if (stored === 'text/plain') return 'text/plain; charset=utf-8';
  return stored;
}
