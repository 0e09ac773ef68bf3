/**
 * One `Range: bytes=…` request header (RFC 9110 §14) against a file of `size` bytes: the inclusive offsets to
 * send, `unsatisfiable` (416), or undefined for the whole file. Only a single range is served: a header asking
 * for several, or one that cannot be read, is ignored (the whole file, 200), as the RFC allows. An `If-Range`
 * that is not the file's ETag also asks for the whole file. Parsed by hand: digits only, at most 16 of them.
 */
export function parseRange(header: string | undefined, size: number, ifRange: string | undefined, etag: string): { start: number; end: number } | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined;
  if (ifRange !== undefined && ifRange.trim() !== etag) return undefined;
  const h = header.trim();
  if (h.slice(0, 6).toLowerCase() !== 'bytes=') return undefined;
  const spec = h.slice(6).trim();
  if (spec.includes(',')) return undefined;
  const dash = spec.indexOf('-');
  if (dash < 0) return undefined;
  const first = spec.slice(0, dash).trim();
  const last = spec.slice(dash + 1).trim();
  const digits = (s: string) => s.length > 0 && s.length <= 16 && [...s].every((c) => c >= '0' && c <= '9');
  if (first === '') {
    // The last N bytes.
    if (!digits(last)) return undefined;
    const n = Number(last);
    if (n === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  if (!digits(first) || (last !== '' && !digits(last))) return undefined;
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (last !== '' && Number(last) < start) return undefined;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}
