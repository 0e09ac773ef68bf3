import { scanJson } from '../lib/json-limits';

/**
 * The body parser's side of the JSON limits (src/lib/json-limits.ts): a pre-scan of the raw bytes in the
 * parser's `verify` hook, and the mark that lets the router skip the walk for a clean body.
 */

/** Requests whose JSON body the pre-scan found clean: the router skips the walk for them. */
const scannedClean = new WeakSet<object>();
export const bodyScannedClean = (req: object) => scannedClean.has(req);

/**
 * The body parser's `verify` hook: refuses a too-deep body before it is parsed, and marks a clean one.
 * Bodies in a charset other than UTF-8 are decoded and re-encoded as UTF-8 for the scan when the platform
 * can decode them; otherwise they are not marked and the walk after parsing still refuses them.
 */
export function scanJsonBody(req: object, _res: unknown, buf: Buffer, encoding: string | null): void {
  let bytes: Uint8Array = buf;
  const charset = (encoding ?? 'utf-8').toLowerCase();
  if (charset !== 'utf-8' && charset !== 'utf8') {
    try {
      bytes = Buffer.from(new TextDecoder(charset).decode(buf), 'utf8');
    } catch {
      return;
    }
  }
  const found = scanJson(bytes);
  if (found === 'too_deep' || found === 'too_many') throw Object.assign(new Error('JSON over a structural limit'), { type: TOO_COMPLEX, reason: found });
  if (found === 'clean') scannedClean.add(req);
}

/** The body parser error type `scanJsonBody` raises (with `reason`), answered by jsonTooComplex(reason). */
export const TOO_COMPLEX = 'entity.too.complex';

