import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Readable } from 'node:stream';
import type { BlobEntry, BlobStore } from '../types';
import { attachmentDisposition } from '../names';
import { assertKey, assertPrefix, meter, TooLarge } from './meter';

export interface S3StoreOptions {
  bucket: string;
  region: string;
  /** Any S3-compatible endpoint (MinIO, Ceph, R2, s3rver …); AWS itself when absent. */
  endpoint?: string;
  /** Static credentials; the AWS default chain (environment, profile, instance role) when absent. */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** Path-style URLs (`endpoint/bucket/key`), which most S3-compatible servers need. */
  forcePathStyle?: boolean;
}

/** Parts of a multipart upload: S3's smallest; one part is uploaded at a time, so a write holds about two. */
const PART_BYTES = 5 * 1024 * 1024;

/**
 * The production blob store (issue 34): any S3-compatible store through `@aws-sdk/client-s3`. A write streams
 * through `@aws-sdk/lib-storage`'s multipart upload, one 5 MiB part in flight at a time (a small file is one
 * PutObject); a write past its limit fails its stream, which aborts the multipart upload, so no object is left.
 * Checksums are sent and checked only where S3 requires them (`WHEN_REQUIRED`): the SDK's default since 3.729
 * sends aws-chunked bodies with CRC trailers that several S3-compatible servers do not take, and we hash every
 * file ourselves (sha-256) as it passes.
 */
export function s3BlobStore(opts: S3StoreOptions): BlobStore & { readonly client: S3Client; readonly bucket: string } {
  const client = new S3Client({
    region: opts.region,
    ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
    ...(opts.credentials ? { credentials: opts.credentials } : {}),
    forcePathStyle: opts.forcePathStyle ?? false,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  const Bucket = opts.bucket;
  const missing = (err: unknown) => {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
  };

  async function* entries(prefix: string, o: { startAfter?: string } = {}): AsyncGenerator<BlobEntry> {
    assertPrefix(prefix);
    let token: string | undefined;
    do {
      const page = await client.send(
        new ListObjectsV2Command({
          Bucket,
          Prefix: prefix,
          MaxKeys: 1000,
          ...(token ? { ContinuationToken: token } : o.startAfter ? { StartAfter: o.startAfter } : {}),
        }),
      );
      for (const c of page.Contents ?? []) {
        if (c.Key !== undefined) yield { key: c.Key, size: c.Size ?? 0, modifiedAt: c.LastModified ?? new Date(0) };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  return {
    kind: 's3',
    client,
    bucket: Bucket,

    async put(key, body, o) {
      assertKey(key);
      const m = meter(o.maxBytes);
      // The source's failure is the upload's failure; the meter's (too large) stops reading the source.
      const onSourceError = (err: Error) => m.stream.destroy(err);
      body.once('error', onSourceError);
      body.pipe(m.stream);
      const upload = new Upload({
        client,
        params: { Bucket, Key: key, Body: m.stream, ContentType: o.contentType },
        partSize: PART_BYTES,
        queueSize: 1,
        leavePartsOnError: false,
      });
      try {
        await upload.done();
      } catch (err) {
        body.unpipe(m.stream);
        body.off('error', onSourceError);
        // Whatever reached the store is removed (a multipart upload is aborted by lib-storage itself).
        await client.send(new DeleteObjectCommand({ Bucket, Key: key })).catch(() => {});
        // The meter says whether the limit stopped it: lib-storage may report its abort's own failure instead.
        if (m.tooLarge() || err instanceof TooLarge) return { tooLarge: true, limit: o.maxBytes };
        throw err;
      }
      body.off('error', onSourceError);
      return m.result();
    },

    async get(key, range) {
      assertKey(key);
      try {
        const res = await client.send(new GetObjectCommand({ Bucket, Key: key, ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }));
        const whole = range && res.ContentRange ? Number(res.ContentRange.slice(res.ContentRange.lastIndexOf('/') + 1)) : res.ContentLength;
        return { body: res.Body as Readable, size: Number(whole ?? 0) };
      } catch (err) {
        if (missing(err)) return undefined;
        throw err;
      }
    },

    async delete(key) {
      assertKey(key);
      await client.send(new DeleteObjectCommand({ Bucket, Key: key }));
    },

    async *list(prefix, o) {
      for await (const e of entries(prefix, o)) yield e.key;
    },

    entries,

    async presign(key, o) {
      assertKey(key);
      const command = new GetObjectCommand({ Bucket, Key: key, ResponseContentDisposition: attachmentDisposition(o.fileName), ResponseContentType: o.contentType });
      return getSignedUrl(client, command, { expiresIn: o.expiresSeconds });
    },
  };
}
