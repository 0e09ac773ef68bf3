/**
 * The blob stores behind attachments (issue 34), one suite run against both: the directory on disk (the
 * embedded default) and an S3-compatible server (s3rver, installed from npm and started by the test). Writes
 * stream (hashed as they go, cut at their limit without reading on), reads take a byte range, listings come in
 * key order from a cursor, deletes are idempotent, and nothing half-written is ever left behind.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, utimesSync, writeFileSync, mkdirSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { diskBlobStore, s3BlobStore } from '../src/domains/files/blobs';
import type { BlobStore } from '../src/domains/files/types';
import { startS3, type TestS3 } from './helpers/s3';

let s3: TestS3;
let diskDir: string;
const stores: Record<'disk' | 's3', BlobStore> = {} as never;

beforeAll(async () => {
  s3 = await startS3();
  diskDir = mkdtempSync(join(tmpdir(), 'hd-blobs-'));
  stores.disk = diskBlobStore(diskDir);
  stores.s3 = s3BlobStore({ bucket: s3.bucket, region: 'us-east-1', endpoint: s3.endpoint, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey }, forcePathStyle: true });
});
afterAll(async () => {
  await s3?.close();
  rmSync(diskDir, { recursive: true, force: true });
});

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const tenant = () => `0195${randomBytes(2).toString('hex')}-0000-7000-8000-${randomBytes(6).toString('hex')}`;
const key = (t: string) => `t/${t}/${randomBytes(16).toString('hex')}`;

async function readAll(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** A source of `total` bytes made as they are read, counting how many were pulled from it. */
function counted(total: number, chunk = 64 * 1024) {
  const state = { pulled: 0 };
  const stream = new Readable({
    read() {
      if (state.pulled >= total) return this.push(null);
      const n = Math.min(chunk, total - state.pulled);
      state.pulled += n;
      this.push(Buffer.alloc(n, 0x61));
    },
  });
  return { stream, state };
}

async function keys(store: BlobStore, prefix: string, startAfter?: string): Promise<string[]> {
  const out: string[] = [];
  for await (const k of store.list(prefix, startAfter ? { startAfter } : {})) out.push(k);
  return out;
}

describe.each(['disk', 's3'] as const)('%s blob store', (kind) => {
  const store = () => stores[kind];

  test('a write streams in, hashed as it goes; the read gives the same bytes, whole or a range', async () => {
    const bytes = randomBytes(300_000);
    const k = key(tenant());
    const put = await store().put(k, Readable.from([bytes.subarray(0, 100_000), bytes.subarray(100_000)]), { maxBytes: 1_000_000, contentType: 'application/pdf' });
    expect(put).toEqual({ size: bytes.length, sha256: sha(bytes), head: bytes.subarray(0, 4100) });

    const whole = await store().get(k);
    expect(whole!.size).toBe(bytes.length);
    expect(sha(await readAll(whole!.body))).toBe(sha(bytes));

    const part = await store().get(k, { start: 1000, end: 1999 });
    expect(part!.size).toBe(bytes.length);
    expect((await readAll(part!.body)).equals(bytes.subarray(1000, 2000))).toBe(true);
    const last = await store().get(k, { start: bytes.length - 1, end: bytes.length - 1 });
    expect((await readAll(last!.body)).equals(bytes.subarray(-1))).toBe(true);
  });

  test('an empty file is a file', async () => {
    const k = key(tenant());
    expect(await store().put(k, Readable.from([]), { maxBytes: 10, contentType: 'text/plain' })).toEqual({ size: 0, sha256: sha(Buffer.alloc(0)), head: Buffer.alloc(0) });
    const got = await store().get(k);
    expect(got!.size).toBe(0);
    expect((await readAll(got!.body)).length).toBe(0);
  });

  test('exactly the limit is stored; one byte more is refused with the limit and leaves nothing behind', async () => {
    const t = tenant();
    const ok = key(t);
    expect(await store().put(ok, Readable.from([Buffer.alloc(4096, 1)]), { maxBytes: 4096, contentType: 'application/octet-stream' })).toMatchObject({ size: 4096 });
    const over = key(t);
    expect(await store().put(over, Readable.from([Buffer.alloc(4096, 1), Buffer.alloc(1, 2)]), { maxBytes: 4096, contentType: 'application/octet-stream' })).toEqual({ tooLarge: true, limit: 4096 });
    expect(await store().get(over)).toBeUndefined();
    expect(await keys(store(), `t/${t}/`)).toEqual([ok]);
  });

  test('a stream far past the limit is cut there: the rest is never read, and memory does not hold the file', async () => {
    const limit = 8 * 1024 * 1024;
    const source = counted(512 * 1024 * 1024);
    global.gc?.();
    const before = process.memoryUsage().rss;
    const k = key(tenant());
    expect(await store().put(k, source.stream, { maxBytes: limit, contentType: 'application/octet-stream' })).toEqual({ tooLarge: true, limit });
    // Read up to the limit and the stream's own buffering beyond it (a few chunks), never the 512 MiB.
    expect(source.state.pulled).toBeLessThan(limit + 1024 * 1024);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
    expect(await store().get(k)).toBeUndefined();
  });

  test("a source that fails fails the write, and nothing is left", async () => {
    const k = key(tenant());
    let sent = 0;
    const broken = new Readable({
      read() {
        sent += 1;
        if (sent > 3) this.destroy(new Error('provider hung up'));
        else this.push(Buffer.alloc(1024, 7));
      },
    });
    await expect(store().put(k, broken, { maxBytes: 1_000_000, contentType: 'image/png' })).rejects.toThrow(/provider hung up/);
    expect(await store().get(k)).toBeUndefined();
  });

  test('listings come in key order, under a prefix, from a cursor; a delete is idempotent', async () => {
    const t = tenant();
    const written = [key(t), key(t), key(t), key(t)].sort();
    for (const k of written) await store().put(k, Readable.from([Buffer.from(k)]), { maxBytes: 1000, contentType: 'text/plain' });
    const other = key(tenant());
    await store().put(other, Readable.from([Buffer.from('x')]), { maxBytes: 10, contentType: 'text/plain' });

    expect(await keys(store(), `t/${t}/`)).toEqual(written);
    expect(await keys(store(), `t/${t}/`, written[1])).toEqual(written.slice(2));
    const all = await keys(store(), 't/');
    expect(all).toEqual([...all].sort());
    expect(all).toEqual(expect.arrayContaining([...written, other]));
    // A cursor in the middle of all workspaces' keys continues in order.
    expect(await keys(store(), 't/', written[3])).toEqual(all.filter((k) => k > written[3]!));
    const entries = [];
    for await (const e of store().entries(`t/${t}/`)) entries.push(e);
    expect(entries.map((e) => e.key)).toEqual(written);
    for (const e of entries) {
      expect(e.size).toBe(Buffer.byteLength(e.key));
      expect(Math.abs(e.modifiedAt.getTime() - Date.now())).toBeLessThan(10 * 60_000);
    }

    await store().delete(written[0]!);
    await store().delete(written[0]!);
    expect(await store().get(written[0]!)).toBeUndefined();
    expect(await keys(store(), `t/${t}/`)).toEqual(written.slice(1));
  });

  test('a missing object reads as undefined; keys that could climb out of the store are refused', async () => {
    expect(await store().get(key(tenant()))).toBeUndefined();
    for (const bad of ['../etc/passwd', 't/../../x', '/abs', 't//x', 't/.hidden', 't/a b']) {
      await expect(store().put(bad, Readable.from([Buffer.from('x')]), { maxBytes: 10, contentType: 'text/plain' })).rejects.toThrow(/refused key/);
      await expect(store().get(bad)).rejects.toThrow(/refused key/);
    }
  });
});

describe('s3 only', () => {
  test('a presigned URL serves the bytes with the download disposition and type, ranges included', async () => {
    const store = stores.s3;
    const bytes = Buffer.from('%PDF-1.7 invoice 10482');
    const k = key(tenant());
    await store.put(k, Readable.from([bytes]), { maxBytes: 1000, contentType: 'application/pdf' });
    const url = await store.presign!(k, { expiresSeconds: 60, fileName: 'Rechnung März.pdf', contentType: 'application/pdf' });
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="Rechnung M_rz.pdf"; filename*=UTF-8''Rechnung%20M%C3%A4rz.pdf`);
    expect(res.headers.get('content-type')).toBe('application/pdf');
    const part = await fetch(url, { headers: { Range: 'bytes=0-3' } });
    expect(part.status).toBe(206);
    expect(await part.text()).toBe('%PDF');
  });

  test('a multipart write (several 5 MiB parts) round-trips', async () => {
    const bytes = randomBytes(11 * 1024 * 1024 + 17);
    const k = key(tenant());
    const chunks = [];
    for (let i = 0; i < bytes.length; i += 256 * 1024) chunks.push(bytes.subarray(i, i + 256 * 1024));
    expect(await stores.s3.put(k, Readable.from(chunks), { maxBytes: 20 * 1024 * 1024, contentType: 'video/mp4' })).toMatchObject({ size: bytes.length, sha256: sha(bytes) });
    const got = await stores.s3.get(k, { start: 6 * 1024 * 1024, end: 6 * 1024 * 1024 + 99 });
    expect((await readAll(got!.body)).equals(bytes.subarray(6 * 1024 * 1024, 6 * 1024 * 1024 + 100))).toBe(true);
  });
});

describe('disk only', () => {
  test('a write lands whole or not at all: it goes to tmp/ first; leftovers of a crash are swept after an hour', async () => {
    const store = stores.disk;
    const tmp = join(diskDir, 'tmp');
    mkdirSync(tmp, { recursive: true });
    const stale = join(tmp, 'crashed.part');
    const fresh = join(tmp, 'writing.part');
    writeFileSync(stale, 'half a file');
    writeFileSync(fresh, 'being written');
    const hourAgo = (Date.now() - 2 * 3600_000) / 1000;
    utimesSync(stale, hourAgo, hourAgo);
    expect(await store.sweepTemp!(3600_000)).toBe(1);
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
    // Temporary files are never listed as objects.
    for await (const k of store.list('')) expect(k.startsWith('tmp/')).toBe(false);
  });
});
