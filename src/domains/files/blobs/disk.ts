import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BlobEntry, BlobStore } from '../types';
import { assertKey, assertPrefix, meter, TooLarge } from './meter';

/**
 * The embedded blob store (issue 34): a directory on local disk (`FILES_DIR`), so `npm run up` needs nothing new.
 * A key is a path under the directory. A write goes to `tmp/<random>.part` first (flushed to disk when it
 * closes) and is renamed into place only when whole and within its limit, so a reader never sees half a file
 * and a crash leaves only a temporary file (removed by the orphan sweep after an hour). The API and the
 * workers must see the same directory (one host, or a shared volume); across hosts use the S3 store.
 */
export function diskBlobStore(dir: string): BlobStore & { readonly root: string } {
  const root = resolve(dir);
  const tmp = join(root, 'tmp');
  const pathOf = (key: string) => {
    assertKey(key);
    return join(root, ...key.split('/'));
  };
  const absent = (err: unknown) => (err as { code?: string })?.code === 'ENOENT' || (err as { code?: string })?.code === 'ENOTDIR';

  /** The entries under `path` (whose key is `dirKey`) in key order, after `after`, under `prefix`. */
  async function* walk(path: string, dirKey: string, prefix: string, after: string): AsyncGenerator<BlobEntry> {
    let found;
    try {
      found = await readdir(path, { withFileTypes: true });
    } catch (err) {
      if (absent(err)) return;
      throw err;
    }
    // Byte order, as S3 lists: every key this service writes has segments of one length per level, so a
    // depth-first walk in this order is the keys' order.
    found.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const d of found) {
      const key = dirKey ? `${dirKey}/${d.name}` : d.name;
      if (d.isDirectory()) {
        const below = `${key}/`;
        // Off the prefix's way, or every key below sorts before the cursor: not read.
        if (!below.startsWith(prefix) && !prefix.startsWith(below)) continue;
        if (after > below && !after.startsWith(below)) continue;
        yield* walk(join(path, d.name), key, prefix, after);
      } else if (d.isFile() && key.startsWith(prefix) && key > after) {
        const s = await stat(join(path, d.name)).catch(() => undefined);
        if (s) yield { key, size: s.size, modifiedAt: s.mtime };
      }
    }
  }

  async function* entries(prefix: string, opts: { startAfter?: string } = {}): AsyncGenerator<BlobEntry> {
    assertPrefix(prefix);
    // Temporary files are not objects.
    if (prefix === '' || prefix === 'tmp' || prefix.startsWith('tmp/')) {
      for await (const e of walk(root, '', prefix, opts.startAfter ?? '')) if (!e.key.startsWith('tmp/')) yield e;
      return;
    }
    yield* walk(root, '', prefix, opts.startAfter ?? '');
  }

  return {
    kind: 'disk',
    root,

    async put(key, body, opts) {
      const target = pathOf(key);
      await mkdir(tmp, { recursive: true });
      const part = join(tmp, `${randomBytes(12).toString('hex')}.part`);
      const m = meter(opts.maxBytes);
      try {
        // `flush`: the bytes are on disk before the file closes, so a row that says `stored` survives a crash.
        await pipeline(body, m.stream, createWriteStream(part, { flags: 'wx', flush: true }));
      } catch (err) {
        await rm(part, { force: true });
        if (err instanceof TooLarge) return { tooLarge: true, limit: err.limit };
        throw err;
      }
      await mkdir(dirname(target), { recursive: true });
      await rename(part, target);
      return m.result();
    },

    async get(key, range) {
      const path = pathOf(key);
      let size: number;
      try {
        const s = await stat(path);
        if (!s.isFile()) return undefined;
        size = s.size;
      } catch (err) {
        if (absent(err)) return undefined;
        throw err;
      }
      const body: Readable = createReadStream(path, range ? { start: range.start, end: range.end } : {});
      return { body, size };
    },

    async delete(key) {
      await rm(pathOf(key), { force: true });
    },

    async *list(prefix, opts) {
      for await (const e of entries(prefix, opts)) yield e.key;
    },

    entries,

    async sweepTemp(olderThanMs) {
      let names: string[];
      try {
        names = await readdir(tmp);
      } catch (err) {
        if (absent(err)) return 0;
        throw err;
      }
      let removed = 0;
      const before = Date.now() - olderThanMs;
      for (const name of names) {
        const s = await stat(join(tmp, name)).catch(() => undefined);
        if (s && s.mtimeMs < before) {
          await rm(join(tmp, name), { force: true });
          removed += 1;
        }
      }
      return removed;
    },
  };
}
