import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';

/**
 * An S3-compatible server for the tests (issue 34): s3rver, from npm (a dev dependency, so `npm install` brings
 * it), started in this process on a free loopback port over a temporary directory, with the bucket made. It
 * takes the AWS SDK v3's multipart uploads, ranged reads, listings and presigned URLs; its credentials are
 * fixed (S3RVER / S3RVER).
 */
export interface TestS3 {
  endpoint: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The FILES_S3_* settings that point the service at it. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export async function startS3(bucket = 'helpdesk-files'): Promise<TestS3> {
  const directory = mkdtempSync(join(tmpdir(), 'hd-s3rver-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  const address = (await server.run()) as unknown as { port: number };
  const endpoint = `http://127.0.0.1:${address.port}`;
  return {
    endpoint,
    bucket,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    env: {
      FILES_S3_ENDPOINT: endpoint,
      FILES_S3_BUCKET: bucket,
      FILES_S3_REGION: 'us-east-1',
      FILES_S3_ACCESS_KEY_ID: 'S3RVER',
      FILES_S3_SECRET_ACCESS_KEY: 'S3RVER',
      FILES_S3_FORCE_PATH_STYLE: 'true',
    },
    async close() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
