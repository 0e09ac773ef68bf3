import type { ConfigSection } from '../../../config';
import type { BlobStore } from '../types';
import { diskBlobStore } from './disk';
import { s3BlobStore } from './s3';

/** The configured blob store: the S3-compatible bucket when FILES_S3_BUCKET is set, else the FILES_DIR directory. */
export function blobStoreFromConfig(config: ConfigSection<'files'>): BlobStore {
  if (config.FILES_S3_BUCKET) {
    return s3BlobStore({
      bucket: config.FILES_S3_BUCKET,
      region: config.FILES_S3_REGION,
      ...(config.FILES_S3_ENDPOINT ? { endpoint: config.FILES_S3_ENDPOINT } : {}),
      ...(config.FILES_S3_ACCESS_KEY_ID && config.FILES_S3_SECRET_ACCESS_KEY
        ? { credentials: { accessKeyId: config.FILES_S3_ACCESS_KEY_ID, secretAccessKey: config.FILES_S3_SECRET_ACCESS_KEY } }
        : {}),
      forcePathStyle: config.FILES_S3_FORCE_PATH_STYLE,
    });
  }
  return diskBlobStore(config.FILES_DIR);
}

export { diskBlobStore } from './disk';
export { s3BlobStore } from './s3';
