import { createHash, randomBytes } from 'node:crypto';
import { signedTokens } from '../../lib/signed-tokens';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import type { AttachmentRow } from '../../db/types';
import { DomainError, notFound, refuse, validationFailed, type FieldError } from '../../lib/errors';
import { isUuid, newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { RedisClient } from '../../queue/connection';
import type { EventSink } from '../events/types';
import type { Principal } from '../identity/principal';
import { readFilePart } from './multipart';
import { sanitizeFileName } from './names';
import { OCTET_STREAM, sniffContentType } from './sniff';
import * as store from './store';
import type { AttachmentBinder, AttachmentSummary, AttachmentView, BlobEntry, BlobStore, InboundFile, Scanner, Uploader } from './types';

/** What a download asks of the Range header, once the file's size and ETag are known (src/domains/files/range.ts). */
export type RangeOf = (file: { size: number; etag: string }) => { start: number; end: number } | 'unsatisfiable' | undefined;

/**
 * Attachments (issue 34): agents' uploads, customers' files fetched at intake, downloads, and the sweeps. The
 * bytes go to the blob store as they arrive (never whole in memory, never in PostgreSQL); a row holds the
 * metadata. Every file's row is written `pending` before its first byte is read, and only then do bytes go to
 * the store, so an object always has a row to find it by, except when something failed between the two,
 * which the orphan sweep repairs.
 *
 * The order for one file: row `pending` → bytes written (hashed, cut at the limit) → type sniffed from the
 * first bytes → scanned when a scanner is set (streamed back from the store) → the quota decided under the
 * workspace's usage row lock → `stored` (or `infected`, or refused). A file is `stored` only once it is whole,
 * within the quota and (with scanning on) scanned clean.
 */

/** How long an object may exist without a row before the orphan sweep removes it (a write in progress has one). */
export const ORPHAN_AGE_MS = 60 * 60 * 1000;
/** Objects (and the rows of the same stretch of keys) the orphan sweep compares per run. */
const ORPHAN_BATCH = 1000;
/** Expired uploads removed per statement, and statements per sweep run. */
const EXPIRED_BATCH = 500;
const EXPIRED_ROUNDS = 20;
/** The longest reason kept for a failure (provider errors can be long). */
const MAX_REASON = 300;
/** How long an upload waits for the rest of its form (closing boundary, parts after the file) once the file is whole. */
const FORM_END_WAIT_MS = 10_000;
/** Under this share of the quota, the next refusal tells the event log again. */
const QUOTA_REARM = 0.9;

export const hashUploadToken = (token: string) => createHash('sha256').update(token).digest('hex');
const newUploadToken = () => `upl_${randomBytes(32).toString('base64url')}`;
/** Unguessable and tenant-scoped: `t/<tenant>/<128 random bits in hex>`. */
const newStorageKey = (tenantId: string) => `t/${tenantId}/${randomBytes(16).toString('hex')}`;
/** One word of a reason with what a URL may carry that is a credential taken out: its user and password, its query. */
function scrubWord(word: string): string {
  const scheme = word.indexOf('://');
  if (scheme < 0) return word;
  let rest = word.slice(scheme + 3);
  const slash = rest.indexOf('/');
  const at = rest.indexOf('@');
  if (at >= 0 && (slash < 0 || at < slash)) rest = rest.slice(at + 1);
  const query = rest.indexOf('?');
  if (query >= 0) rest = `${rest.slice(0, query)}?…`;
  // Telegram's file URLs hold the bot token: /file/bot<id>:<secret>/…
  const bot = rest.indexOf('/bot');
  if (bot >= 0) {
    const colon = rest.indexOf(':', bot);
    const next = rest.indexOf('/', bot + 1);
    if (colon > bot && (next < 0 || colon < next)) rest = `${rest.slice(0, bot)}/bot…${next < 0 ? '' : rest.slice(next)}`;
  }
  return word.slice(0, scheme + 3) + rest;
}

/**
 * A reason as stored and shown: short, and without what a provider's error may carry that is a credential (a
 * URL's user and password or query string, Telegram's bot token in its file URLs). One pass over the words.
 */
const shortReason = (raw: string) => {
  const s = raw.slice(0, 4 * MAX_REASON).split(' ').map(scrubWord).join(' ');
  return s.length > MAX_REASON ? `${s.slice(0, MAX_REASON - 1)}…` : s;
};

export const presentAttachment = (r: AttachmentRow): AttachmentView => ({
  id: r.id,
  name: r.name,
  content_type: r.content_type,
  size: Number(r.size),
  sha256: r.sha256,
  state: r.state,
  reason: r.reason,
  content_id: r.content_id,
  created_at: iso(r.created_at),
});

export const summaryOf = (r: AttachmentRow): AttachmentSummary => ({
  id: r.id,
  name: r.name,
  content_type: r.content_type,
  size: Number(r.size),
  sha256: r.sha256,
  state: r.state,
});

/** Why a file cannot be downloaded, by its state. */
function unavailable(r: AttachmentRow): DomainError {
  switch (r.state) {
    case 'infected':
      return refuse('attachment_unavailable', `This file is quarantined: the scanner found ${r.reason ?? 'a signature'}. It cannot be downloaded.`);
    case 'pending':
      return refuse('attachment_unavailable', 'This file is still being stored; try again shortly.');
    case 'skipped':
      return refuse('attachment_unavailable', `This file was not stored: ${r.reason ?? 'skipped'}.`);
    default:
      return refuse('attachment_unavailable', `This file could not be stored: ${r.reason ?? 'failed'}.`);
  }
}

export interface FileServiceDeps {
  db: Db;
  config: ConfigSection<'files'>;
  blobs: BlobStore;
  logger: Logger;
  /** Where `files.quota_reached` goes (the outbound event log). */
  events?: EventSink;
  /** The orphan sweep's cursor (where the last run stopped) is kept here; without it every run starts over. */
  redis?: RedisClient;
  redisPrefix?: string;
  /** Scanning of stored files (clamd); also settable later with `setScanner`. */
  scanner?: Scanner;
  /**
   * A ticket's read shows its files' states: when they change outside the ticket's own writes (a scan, a file
   * fetched at intake, the orphan sweep), its version (ETag, rendered timeline) moves on in the same transaction.
   */
  bumpTicketVersion?: (tx: Executor, tenantId: string, ticketId: string) => Promise<void>;
  /** The HMAC key of signed file links (Twilio fetches MMS media from them); without it no link is made. */
  linkKey?: Buffer;
}

export function createFileService(deps: FileServiceDeps) {
  const { db, config, blobs, logger } = deps;
  let scanner = deps.scanner;
  const quota = config.FILES_WORKSPACE_QUOTA_BYTES;

  const bump = async (tx: Executor, tenantId: string, ticketId: string | null) => {
    if (ticketId && deps.bumpTicketVersion) await deps.bumpTicketVersion(tx, tenantId, ticketId);
  };

  /** Removes a row that will never hold bytes, and whatever bytes reached the store (best effort: the orphan sweep backs it). */
  async function discard(row: AttachmentRow): Promise<void> {
    await store.deleteAttachment(db, row.tenant_id, row.id);
    await blobs.delete(row.storage_key).catch((err: unknown) => logger.warn({ err_code: 'blob_not_deleted', cause: (err as Error)?.message }, 'blob not deleted'));
  }

  const quotaRefusal = (used: number) =>
    refuse('files_quota_exceeded', `This workspace holds ${used} of its ${quota} bytes of files (FILES_WORKSPACE_QUOTA_BYTES); this file was not stored.`);

  /**
   * The workspace would pass its quota: `files.quota_reached` goes to the event log, once (until usage falls
   * back under 90 % of the quota), in the caller's transaction.
   */
  async function quotaReached(tx: Executor, tenantId: string, usage: { bytes: number; quota_reached_at: Date | null }, file: { name: string; size: number | null; source: string; ticketId?: string | null }) {
    if (usage.quota_reached_at) return;
    await store.setQuotaReached(tx, tenantId, new Date());
    await deps.events?.emit(tx, tenantId, [
      {
        type: 'files.quota_reached',
        ...(file.ticketId ? { ticketId: file.ticketId } : {}),
        data: { quota_bytes: quota, used_bytes: usage.bytes, refused: { name: file.name, size: file.size, source: file.source, ...(file.ticketId ? { ticket_id: file.ticketId } : {}) } },
      },
    ]);
  }

  /** Before any byte of an upload is read: a workspace already at its quota is refused at once. */
  async function refuseWhenFull(tenantId: string, file: { name: string; source: string }) {
    if (quota === 0) return;
    const u = await store.usage(db, tenantId);
    if (u.bytes < quota) return;
    await db.transaction().execute(async (tx) => quotaReached(tx, tenantId, await store.lockUsage(tx, tenantId), { ...file, size: null }));
    throw quotaRefusal(u.bytes);
  }

  /** The scanner's word on stored bytes: a signature, or nothing (clean, no scanner, or a scanner that could not answer). */
  async function scanStored(key: string): Promise<string | undefined> {
    if (!scanner) return undefined;
    const got = await blobs.get(key);
    if (!got) return undefined;
    try {
      const r = await scanner.scan(got.body);
      if ('signature' in r) return r.signature;
      if ('error' in r) logger.warn({ err_code: 'scan_failed', cause: r.error }, 'file not scanned; it stays stored');
      return undefined;
    } finally {
      got.body.destroy();
    }
  }

  /**
   * The last step of storing a file: the quota decided under the workspace's usage row lock, then the row
   * `stored` or `infected` with what was learnt of the bytes. Over the quota nothing changes but the event
   * (committed), and the caller refuses or skips the file.
   */
  async function settle(row: AttachmentRow, put: { size: number; sha256: string }, contentType: string, signature: string | undefined) {
    return db.transaction().execute(async (tx) => {
      if (quota > 0) {
        const usage = await store.lockUsage(tx, row.tenant_id);
        if (usage.bytes + put.size > quota) {
          await quotaReached(tx, row.tenant_id, usage, { name: row.name, size: put.size, source: row.source, ticketId: row.ticket_id });
          return { refused: usage.bytes, row: undefined };
        }
        if (usage.quota_reached_at && usage.bytes + put.size < quota * QUOTA_REARM) await store.setQuotaReached(tx, row.tenant_id, null);
      }
      const settled = await store.updateAttachment(tx, row.tenant_id, row.id, {
        state: signature ? 'infected' : 'stored',
        reason: signature ? shortReason(signature) : null,
        size: put.size,
        sha256: put.sha256,
        content_type: contentType,
        stored_at: new Date(),
      });
      if (!settled) throw new Error(`attachment ${row.id} vanished while it was stored`);
      await bump(tx, row.tenant_id, settled.ticket_id);
      return { refused: undefined, row: settled };
    });
  }

  /** A file's row moved to `skipped` or `failed` (its bytes gone), the ticket's version with it. */
  async function giveUp(row: AttachmentRow, state: 'skipped' | 'failed', reason: string): Promise<AttachmentRow> {
    await blobs.delete(row.storage_key).catch(() => {});
    return db.transaction().execute(async (tx) => {
      const r = await store.updateAttachment(tx, row.tenant_id, row.id, { state, reason: shortReason(reason), size: 0, sha256: null });
      await bump(tx, row.tenant_id, row.ticket_id);
      return r ?? row;
    });
  }

  /** Whether the upload is this uploader's: a member's by their user id, a visitor's by their visitor id. */
  const ownedBy = (r: AttachmentRow, u: Uploader) => ('visitorId' in u ? r.uploaded_by_visitor === u.visitorId : r.uploaded_by_visitor === null && r.uploaded_by === u.userId);

  /**
   * The uploads `tokens` name, each checked for this uploader (theirs, within its hour, stored, unused), in the
   * order named (a token named twice counts once); `422 upload_token_invalid` naming every position that is
   * not usable, and then nothing is chosen. `lock`: the rows are held until the caller's transaction ends.
   */
  async function chooseUploads(exec: Executor, caller: Uploader, tokens: string[], lock: boolean): Promise<AttachmentRow[]> {
    if (tokens.length === 0) return [];
    const hashes = [...new Set(tokens.map(hashUploadToken))];
    const rows = lock ? await store.lockUploads(exec, caller.tenantId, hashes) : await store.uploadsByTokenHash(exec, caller.tenantId, hashes);
    const byHash = new Map(rows.map((r) => [r.upload_token_hash, r]));
    const now = Date.now();
    const seen = new Set<string>();
    const chosen: AttachmentRow[] = [];
    const bad: FieldError[] = [];
    tokens.forEach((token, i) => {
      if (seen.has(token)) return;
      seen.add(token);
      const r = byHash.get(hashUploadToken(token));
      const why = !r
        ? 'unknown: not an upload of this workspace, or already used'
        : !ownedBy(r, caller)
          ? 'visitorId' in caller
            ? "not this visitor's upload"
            : "another user's upload"
          : r.expires_at === null || r.expires_at.getTime() <= now
            ? 'expired: an upload must be used within its hour'
            : r.state !== 'stored'
              ? `not stored (${r.state}${r.reason ? `: ${r.reason}` : ''})`
              : null;
      if (why) bad.push({ path: `body.attachments.${i}`, message: `${token.slice(0, 12)}…: ${why}` });
      else chosen.push(r!);
    });
    if (bad.length > 0) {
      const named = bad.map((b) => `attachments[${b.path.slice('body.attachments.'.length)}]`).join(', ');
      throw new DomainError('upload_token_invalid', `${named} ${bad.length === 1 ? 'is' : 'are'} not usable: ${bad.map((b) => b.message).join('; ')}. Nothing was written.`, { errors: bad });
    }
    return chosen;
  }

  const binder: AttachmentBinder = {
    followMerge: (tx, tenantId, from, moves) => store.followMerge(tx, tenantId, from.sourceTicketId, from.targetTicketId, moves),

    async bindUploads(tx, caller, tokens, to) {
      const chosen = await chooseUploads(tx, caller, tokens, true);
      if (chosen.length === 0) return [];
      const bound = new Map((await store.bindUploads(tx, caller.tenantId, chosen.map((r) => r.id), to)).map((r) => [r.id, r]));
      return chosen.map((r) => summaryOf(bound.get(r.id)!));
    },
  };

  /** A stored file this caller may read: its workspace's, on a ticket, or an unused upload of their own. */
  async function reachable(actor: Principal, id: string): Promise<AttachmentRow> {
    const row = await store.getAttachment(db, actor.tenantId, id);
    if (!row || (row.ticket_id === null && row.uploaded_by !== actor.userId)) throw notFound('attachment');
    return row;
  }

  /**
   * A file's bytes (a range of them), or a presigned URL of the S3 store, for a caller whose reach was checked.
   * Only a `stored` file is served; another state is `409 attachment_unavailable` saying why.
   */
  async function serve(r: AttachmentRow, rangeOf: RangeOf) {
    if (r.state !== 'stored') throw unavailable(r);
    const size = Number(r.size);
    const etag = `"${r.sha256 ?? r.id}"`;
    if (config.FILES_S3_PRESIGN_SECONDS > 0 && blobs.presign) {
      const url = await blobs.presign(r.storage_key, { expiresSeconds: config.FILES_S3_PRESIGN_SECONDS, fileName: r.name, contentType: r.content_type });
      return { redirect: url, file: r, etag } as const;
    }
    const range = rangeOf({ size, etag });
    if (range === 'unsatisfiable') {
      throw new DomainError('range_not_satisfiable', `The file has ${size} bytes; the range asked for lies outside it.`, { headers: { 'Content-Range': `bytes */${size}` } });
    }
    const got = await blobs.get(r.storage_key, range);
    if (!got) {
      logger.error({ err_code: 'attachment_bytes_missing', attachment_id: r.id }, 'a stored file has no bytes in the store');
      throw refuse('attachment_unavailable', 'This file\'s bytes are missing from the store; the orphan sweep will mark it failed.');
    }
    return { body: got.body, size, range, file: r, etag } as const;
  }

  /** Key order for the orphan sweep: which workspace a key belongs to (undefined: not a key this service made). */
  const tenantOfKey = (key: string) => {
    const parts = key.split('/');
    return parts.length === 3 && parts[0] === 't' && isUuid(parts[1]!) && parts[2]!.length > 0 ? parts[1]! : undefined;
  };
  const cursorKey = `${deps.redisPrefix ?? 'hd'}:files:orphan-cursor`;

  const links = deps.linkKey ? signedTokens(deps.linkKey, 'file-link') : undefined;

  return {
    ...binder,
    blobs,

    /**
     * A web chat message's uploads, checked where the message is posted (nothing locked, nothing written): the
     * rows its tokens name, in order, or `422 upload_token_invalid` naming each unusable position. The ingest
     * worker binds them by id later (`bindVisitorUploads`), so no token travels through the queue.
     */
    checkUploads: (caller: Uploader, tokens: string[]) => chooseUploads(db, caller, tokens, false),

    /**
     * The ingest worker's half (web chat files): uploads checked when the message was posted, bound to its event
     * in the worker's transaction, rows locked. Expiry is not judged again: the message was accepted within the
     * hour, and time it then spent in our queue (a 202, retries) must not refuse it. Any other change since (the
     * upload used by another message, removed) refuses the message with nothing written.
     */
    async bindVisitorUploads(tx: Executor, tenantId: string, visitorId: string, ids: string[], to: { ticketId: string; eventId: string }): Promise<AttachmentSummary[]> {
      if (ids.length === 0) return [];
      const rows = new Map((await store.lockAttachments(tx, tenantId, [...new Set(ids)])).map((r) => [r.id, r]));
      const lost = ids.filter((id) => {
        const r = rows.get(id);
        return !r || r.event_id !== null || r.upload_token_hash === null || r.uploaded_by_visitor !== visitorId || r.state !== 'stored';
      });
      if (lost.length > 0) {
        throw new DomainError('upload_token_invalid', `${lost.length} of this message's files ${lost.length === 1 ? 'is' : 'are'} no longer usable (used by another message meanwhile, or removed). Nothing was written.`);
      }
      const bound = new Map((await store.bindUploads(tx, tenantId, [...rows.keys()], { ...to, internal: false })).map((r) => [r.id, r]));
      return [...new Set(ids)].map((id) => summaryOf(bound.get(id)!));
    },

    /**
     * The stored files of a reply, as its sender reads them (streamed from the store when sent). Only `stored`
     * files go; a reply's files are bound stored, so another state means the file was lost since (orphan sweep).
     */
    async filesOfReply(tenantId: string, eventId: string) {
      const rows = await store.attachmentsOfEvents(db, tenantId, [eventId]);
      return rows.map((r) => ({
        id: r.id,
        name: r.name,
        contentType: r.content_type,
        size: Number(r.size),
        sha256: r.sha256,
        state: r.state,
        open: async (): Promise<Readable> => {
          const got = await blobs.get(r.storage_key);
          if (!got) throw new Error(`the bytes of ${r.name} are missing from the file store`);
          return got.body;
        },
      }));
    },

    /**
     * A signed, expiring link token naming one file of one workspace (GET /v1/files/{token}): base64url of
     * `{t: tenant, a: attachment, e: expiry (unix seconds)}`, a dot, and its HMAC-SHA256 under the link key.
     */
    signLink(tenantId: string, attachmentId: string, ttlSeconds: number): string {
      if (!links) throw new Error('no file link key configured');
      return links.sign({ t: tenantId, a: attachmentId, e: Math.floor(Date.now() / 1000) + ttlSeconds });
    },

    /**
     * GET /v1/files/{token}: the bytes a signed link names, with no other credential. An altered, expired or
     * unknown token, and a file no longer stored, are all the same 404 (a link says nothing of what it named).
     */
    async openLink(token: string) {
      const invalid = () => new DomainError('file_link_invalid', 'This file link is unknown, altered or expired.');
      const claims = links?.open(token);
      if (!claims || typeof claims.t !== 'string' || typeof claims.a !== 'string' || !isUuid(claims.t) || !isUuid(claims.a)) throw invalid();
      const row = await store.getAttachment(db, claims.t, claims.a);
      if (!row || row.state !== 'stored') throw invalid();
      const got = await blobs.get(row.storage_key);
      if (!got) throw invalid();
      return { body: got.body, size: got.size, file: row };
    },

    /** Scanning from now on (clamd), or none. */
    setScanner(s: Scanner | undefined) {
      scanner = s;
    },

    /**
     * POST /v1/uploads (a member) and POST /v1/web-chat/uploads (a visitor): the `file` part of a multipart form,
     * streamed into the store. Answers the upload token (shown here only; its hash is kept), the file as stored,
     * and when the token expires. Only `actor` may name the token.
     */
    async upload(actor: Uploader, input: { body: Readable; headers: import('node:http').IncomingHttpHeaders }) {
      const maxBytes = config.FILES_MAX_BYTES;
      await refuseWhenFull(actor.tenantId, { name: '(upload)', source: 'upload' });
      const part = await readFilePart(input, { field: 'file', maxFileBytes: maxBytes });
      const token = newUploadToken();
      const row = await store.insertAttachment(db, actor.tenantId, {
        id: newId(),
        name: sanitizeFileName(part.name),
        content_type: OCTET_STREAM,
        storage_key: newStorageKey(actor.tenantId),
        state: 'pending',
        source: 'upload',
        uploaded_by: 'userId' in actor ? actor.userId : null,
        uploaded_by_visitor: 'visitorId' in actor ? actor.visitorId : null,
        upload_token_hash: hashUploadToken(token),
        expires_at: new Date(Date.now() + config.FILES_UPLOAD_TTL_SECONDS * 1000),
      });
      const clientGone = () => (input.body as { complete?: boolean }).complete === false;
      let put: Awaited<ReturnType<BlobStore['put']>>;
      try {
        put = await blobs.put(row.storage_key, part.body, { maxBytes, contentType: OCTET_STREAM });
        if (!('tooLarge' in put)) {
          // The rest of the form (its closing boundary), so the connection is left clean for the next request.
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([part.finished, new Promise<void>((resolve) => (timer = setTimeout(resolve, FORM_END_WAIT_MS)))]).finally(() => clearTimeout(timer));
        }
      } catch (err) {
        part.abort();
        await discard(row);
        if (err instanceof DomainError) throw err;
        if (clientGone() || (err as Error)?.message?.includes('Unexpected end of form')) {
          throw validationFailed([{ path: 'body.file', message: 'the upload ended before the file was whole' }], 'The upload ended before the file was whole.');
        }
        throw err;
      }
      if ('tooLarge' in put) {
        part.abort();
        await discard(row);
        throw refuse('file_too_large', `The file is larger than ${put.limit} bytes (FILES_MAX_BYTES), the most one file may be; nothing was stored.`);
      }
      const contentType = await sniffContentType(put.head);
      const signature = await scanStored(row.storage_key);
      const settled = await settle(row, put, contentType, signature);
      if (settled.refused !== undefined) {
        await discard(row);
        throw quotaRefusal(settled.refused);
      }
      return { upload_token: token, attachment: presentAttachment(settled.row), expires_at: iso(row.expires_at!) };
    },

    /**
     * A customer's file, for the intake worker: the row is written `pending` on the message's event, then the
     * bytes are fetched (`file.open()`) and streamed into the store. Answers the file as it ended: `stored`,
     * `skipped` (larger than `maxBytes`, or the workspace at its quota; the reason says which), `failed` (the
     * fetch's or the store's error) or `infected`. Never throws for the file's own problems; a lost database does.
     */
    async storeInbound(tenantId: string, inbound: { ticketId: string; eventId: string; file: InboundFile }, opts: { maxBytes: number }): Promise<AttachmentView> {
      const { file } = inbound;
      const row = await db.transaction().execute(async (tx) => {
        const r = await store.insertAttachment(tx, tenantId, {
          id: newId(),
          ticket_id: inbound.ticketId,
          event_id: inbound.eventId,
          name: sanitizeFileName(file.name),
          content_type: OCTET_STREAM,
          content_id: file.contentId ? file.contentId.slice(0, 998) : null,
          storage_key: newStorageKey(tenantId),
          state: 'pending',
          source: 'inbound',
        });
        await bump(tx, tenantId, inbound.ticketId);
        return r;
      });
      let put: Awaited<ReturnType<BlobStore['put']>>;
      try {
        const body = await file.open();
        put = await blobs.put(row.storage_key, body, { maxBytes: opts.maxBytes, contentType: OCTET_STREAM });
      } catch (err) {
        return presentAttachment(await giveUp(row, 'failed', `could not be fetched or stored: ${(err as Error)?.message ?? String(err)}`));
      }
      if ('tooLarge' in put) return presentAttachment(await giveUp(row, 'skipped', `too large: the limit is ${put.limit} bytes`));
      try {
        const contentType = await sniffContentType(put.head);
        const signature = await scanStored(row.storage_key);
        const settled = await settle(row, put, contentType, signature);
        if (settled.refused !== undefined) return presentAttachment(await giveUp(row, 'skipped', `the workspace's storage quota of ${quota} bytes is reached`));
        return presentAttachment(settled.row);
      } catch (err) {
        if (err instanceof DomainError) throw err;
        logger.warn({ err_code: 'inbound_file_failed', cause: (err as Error)?.message }, 'inbound file not stored');
        return presentAttachment(await giveUp(row, 'failed', `could not be stored: ${(err as Error)?.message ?? String(err)}`));
      }
    },

    /** The files of some events (a timeline's, a message's), by event. */
    async forEvents(exec: Executor, tenantId: string, eventIds: string[]): Promise<Map<string, AttachmentView[]>> {
      const out = new Map<string, AttachmentView[]>();
      for (const r of await store.attachmentsOfEvents(exec, tenantId, [...new Set(eventIds)])) {
        const list = out.get(r.event_id!) ?? [];
        list.push(presentAttachment(r));
        out.set(r.event_id!, list);
      }
      return out;
    },

    /** GET /v1/attachments/{id}: the file's metadata, and where it is attached. */
    async get(actor: Principal, id: string) {
      const r = await reachable(actor, id);
      return { ...presentAttachment(r), ticket_id: r.ticket_id, event_id: r.event_id, internal: r.internal };
    },

    /**
     * GET /v1/attachments/{id}/content: the bytes (a range of them), or a presigned URL of the S3 store. Only a
     * `stored` file is served; another state is `409 attachment_unavailable` saying why.
     */
    async download(actor: Principal, id: string, rangeOf: RangeOf) {
      return serve(await reachable(actor, id), rangeOf);
    },

    serve,

    /** Maintenance: unused uploads past their hour, rows and bytes, across workspaces, a bounded amount per run. */
    async sweepUploads(): Promise<{ deleted: number }> {
      let deleted = 0;
      for (let round = 0; round < EXPIRED_ROUNDS; round++) {
        const gone = await store.crossTenantDeleteExpiredUploads(db, EXPIRED_BATCH);
        for (const g of gone) await blobs.delete(g.storage_key).catch(() => {});
        deleted += gone.length;
        if (gone.length < EXPIRED_BATCH) break;
      }
      if (deleted > 0) logger.info({ deleted }, 'expired uploads removed');
      return { deleted };
    },

    /**
     * Maintenance: objects with no row, and rows (stored, infected) with no object, over one stretch of keys per
     * run (ORPHAN_BATCH objects, in key order, from where the last run stopped; the run after the end starts
     * over). Objects no row holds that are older than an hour are deleted; rows whose bytes are gone are marked
     * `failed` with the reason. Set-based: one statement asks which listed keys have no row, one reads the rows
     * of the same stretch of keys (the store's listing and the (tenant, key) index are in the same order).
     */
    async sweepOrphans() {
      const started = new Date();
      const cursor = deps.redis ? ((await deps.redis.get(cursorKey).catch(() => null)) ?? '') : '';
      const listed: BlobEntry[] = [];
      for await (const e of blobs.entries('t/', cursor ? { startAfter: cursor } : {})) {
        listed.push(e);
        if (listed.length >= ORPHAN_BATCH) break;
      }
      const complete = listed.length < ORPHAN_BATCH;
      const ours = listed.flatMap((e) => {
        const tenant = tenantOfKey(e.key);
        return tenant ? [{ tenant_id: tenant, key: e.key }] : [];
      });
      const unheld = new Set(await store.crossTenantUnheldKeys(db, ours));
      const orphans = listed.filter((e) => unheld.has(e.key) || tenantOfKey(e.key) === undefined);
      const old = orphans.filter((e) => e.modifiedAt.getTime() < started.getTime() - ORPHAN_AGE_MS);
      for (const e of old) await blobs.delete(e.key).catch((err: unknown) => logger.warn({ err_code: 'blob_not_deleted', cause: (err as Error)?.message }, 'orphan object not deleted'));

      // The rows of the same stretch of keys: those with no object listed have lost their bytes. Rows stored in
      // the last minute are left out, so a file that was being written while the listing ran is not one of them.
      const point = (key: string) => {
        const tenant = tenantOfKey(key);
        return tenant ? { tenant_id: tenant, key } : null;
      };
      const last = listed.at(-1);
      const held = await store.crossTenantHeldBetween(db, {
        from: cursor ? point(cursor) : null,
        to: complete || !last ? null : point(last.key),
        storedBefore: new Date(started.getTime() - 60_000),
        limit: ORPHAN_BATCH * 2,
      });
      const present = new Set(listed.map((e) => e.key));
      const missing = held.filter((r) => !present.has(r.storage_key));
      const marked = missing.length === 0 ? [] : await store.crossTenantMarkMissing(db, missing, 'the stored bytes are missing from the file store (found by the orphan sweep)');
      if (marked.length > 0 && deps.bumpTicketVersion) {
        await db.transaction().execute(async (tx) => {
          for (const m of marked) await bump(tx, m.tenant_id, m.ticket_id);
        });
      }
      const tempRemoved = blobs.sweepTemp ? await blobs.sweepTemp(ORPHAN_AGE_MS) : 0;
      if (deps.redis) await deps.redis.set(cursorKey, complete ? '' : (last?.key ?? '')).catch(() => {});
      const result = {
        objects_checked: listed.length,
        orphan_objects: orphans.length,
        orphan_objects_deleted: old.length,
        rows_checked: held.length,
        rows_missing_bytes: marked.length,
        temp_files_removed: tempRemoved,
        wrapped: complete,
      };
      logger.info(result, 'files orphan sweep');
      return result;
    },
  };
}

export type FileService = ReturnType<typeof createFileService>;
