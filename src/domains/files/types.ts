import type { Readable } from 'node:stream';

/**
 * Attachments (issue 34): the contract between the files domain and its users (intake, replies, downloads,
 * scanning). Bytes live in a blob store (local disk by default, any S3-compatible store in production), never
 * in PostgreSQL; `attachments` rows hold the metadata.
 */

/** Where an attachment stands. Only `stored` (and scanned clean, when scanning is on) files are downloadable. */
export type AttachmentState = 'pending' | 'stored' | 'skipped' | 'failed' | 'infected';

/** An attachment as the timeline and GET /v1/attachments/{id} show it. */
export interface AttachmentView {
  id: string;
  name: string;
  content_type: string;
  size: number;
  sha256: string | null;
  state: AttachmentState;
  /** Why a file is skipped (too large, with the limit), failed (the fetch's error) or infected (the signature). */
  reason: string | null;
  /** Email inline images: the part's Content-ID, so the HTML body's cid: links can be resolved. */
  content_id: string | null;
  created_at: string;
}

/** What a blob store does: write a stream under a key (bounded), read it back (optionally a byte range), delete. */
export interface BlobStore {
  readonly kind: 'disk' | 's3';
  /**
   * Streams `body` to `key`, hashing as it goes, and stops at `maxBytes` (the partial object is removed and
   * `tooLarge` is returned): nothing is buffered whole in memory. `head` is the first bytes, for sniffing.
   */
  put(key: string, body: Readable, opts: { maxBytes: number; contentType: string }): Promise<{ size: number; sha256: string; head: Buffer } | { tooLarge: true; limit: number }>;
  /** The bytes (or `range`, inclusive offsets as HTTP states them) and the object's whole size; undefined when absent. */
  get(key: string, range?: { start: number; end: number }): Promise<{ body: Readable; size: number } | undefined>;
  delete(key: string): Promise<void>;
  /** Every key under a prefix, in key order (after `startAfter` when given), for the orphan sweep. */
  list(prefix: string, opts?: { startAfter?: string }): AsyncIterable<string>;
  /** The same, with each object's size and last modification (the orphan sweep leaves objects younger than an hour). */
  entries(prefix: string, opts?: { startAfter?: string }): AsyncIterable<BlobEntry>;
  /** Disk only: removes temporary files a crashed write left, older than `olderThanMs`; answers how many. */
  sweepTemp?(olderThanMs: number): Promise<number>;
  /** S3 only: a short-lived URL the client may fetch the bytes from directly. */
  presign?(key: string, opts: { expiresSeconds: number; fileName: string; contentType: string }): Promise<string>;
}

/** One object of a blob store's listing. */
export interface BlobEntry {
  key: string;
  size: number;
  modifiedAt: Date;
}

/** A file arriving with a customer's message, fetched by the worker at intake time. */
export interface InboundFile {
  /** As the provider named it (sanitised before storing). */
  name: string;
  /** As the provider declared it; the stored type is sniffed from the bytes. */
  declaredType?: string;
  contentId?: string;
  /** Opens the bytes: a base64 part decoded, or a provider download with the connection's credentials. */
  open(): Promise<Readable>;
}

/** A scanner of file bytes (clamd), when one is configured. */
export interface Scanner {
  /** `infected` names the signature; `error` when the scanner could not answer (the file then stays `stored`). */
  scan(body: Readable): Promise<{ clean: true } | { clean: false; signature: string } | { error: string }>;
}

/** A file as the timeline lists it on its event (`attachments: [...]`). */
export type AttachmentSummary = Pick<AttachmentView, 'id' | 'name' | 'content_type' | 'size' | 'sha256' | 'state'>;

/**
 * Who uploads a file and alone may use its token: a member of the workspace (POST /v1/uploads), or a web chat
 * visitor (POST /v1/web-chat/uploads), whose id is the service's `wv_…` string from their visitor token.
 */
export type Uploader = { tenantId: string; userId: string } | { tenantId: string; visitorId: string };

/**
 * What the tickets domain is handed to attach an agent's uploads to a reply or note (issue 34), inside that
 * write's transaction: the caller's uploads named by their tokens are bound to the event about to be written
 * (and its ticket), or the write is refused (`422 upload_token_invalid`, naming each token that is unknown,
 * another user's or workspace's, expired, already used or not stored) with nothing bound.
 */
export interface AttachmentBinder {
  bindUploads(
    tx: import('../../db').Executor,
    caller: Uploader,
    tokens: string[],
    to: { ticketId: string; eventId: string; internal: boolean },
  ): Promise<AttachmentSummary[]>;
  /** A merge's copied events take the source events' files (`moves`: source event id → its copy's id). */
  followMerge(tx: import('../../db').Executor, tenantId: string, from: { sourceTicketId: string; targetTicketId: string }, moves: { from: string; to: string }[]): Promise<number>;
}
