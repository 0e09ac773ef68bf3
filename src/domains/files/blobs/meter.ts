import { createHash } from 'node:crypto';
import { Transform } from 'node:stream';
import { SNIFF_BYTES } from '../sniff';

/** A write went past its `maxBytes`: the blob store stops there and answers `tooLarge`. */
export class TooLarge extends Error {
  constructor(readonly limit: number) {
    super(`larger than ${limit} bytes`);
    this.name = 'TooLarge';
  }
}

/**
 * What a blob store writes goes through this on its way: it counts and hashes (sha-256) every chunk as it
 * passes, keeps the first SNIFF_BYTES for the type sniffing, and fails with `TooLarge` at the first chunk that
 * would pass `maxBytes`, before that chunk is written. It holds nothing else: memory is one chunk and the head.
 */
export function meter(maxBytes: number) {
  const hash = createHash('sha256');
  const head: Buffer[] = [];
  let headBytes = 0;
  let size = 0;
  let over = false;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (size + chunk.length > maxBytes) {
        over = true;
        return callback(new TooLarge(maxBytes));
      }
      size += chunk.length;
      hash.update(chunk);
      if (headBytes < SNIFF_BYTES) {
        const part = chunk.subarray(0, SNIFF_BYTES - headBytes);
        // A copy: the chunk's memory may be a slice of a larger pooled buffer the source reuses.
        head.push(Buffer.from(part));
        headBytes += part.length;
      }
      callback(null, chunk);
    },
  });
  return {
    stream,
    /** Whether the stream was cut at its limit (whatever error a consumer then reports). */
    tooLarge: () => over,
    /** Once the stream has ended: the size, the hex sha-256 and the first bytes. */
    result: () => ({ size, sha256: hash.digest('hex'), head: Buffer.concat(head) }),
  };
}

/**
 * A blob key as this service makes them (`t/<tenant>/<hex>`): segments of letters, digits, `.`, `_` and `-`,
 * none empty or starting with a dot. Checked before a key becomes a path or a URL, so that no key can climb
 * out of its store.
 */
export function assertKey(key: string): void {
  const segments = key.split('/');
  const ok =
    key.length > 0 &&
    key.length <= 512 &&
    segments.every((s) => {
      if (s.length === 0 || s.startsWith('.')) return false;
      for (const c of s) if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c === '.' || c === '_' || c === '-')) return false;
      return true;
    });
  if (!ok) throw new Error(`blob store: refused key ${JSON.stringify(key.slice(0, 80))}`);
}

/** A listing prefix: empty, or key segments ending with `/`, or a key's beginning (the last segment partial). */
export function assertPrefix(prefix: string): void {
  if (prefix === '') return;
  assertKey(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix);
}
