import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { dependencyUnavailable } from '../../lib/errors';
import { spooledMember } from '../../lib/spooled-json';
import type { JobData } from '../../queue/jobs';
import type { QueueHub } from '../../queue/hub';
import type { InboundMessage } from '../channels/adapters/types';
import type { ChannelService } from '../channels/service';
import type { BlobStore, InboundFile } from '../files/types';
import { FetchFailed, stringStream } from './download';
import { openSource, type MailboxTokens, type QueuedFileRef, type SourceConfig } from './sources';
import type { FetchTurns } from './fair-queue';
import * as store from './store';

/**
 * Every file a customer's message carries, fetched at intake time by a worker (issue 34), in four steps:
 *
 * 1. The adapter (pure) lists the files (`InboundMessage.files`), each with how to get it.
 * 2. The ingest edge (`prepare`) caps them at FILES_MAX_PER_MESSAGE (the rest are kept as `skip`, so they are
 *    listed as skipped, never dropped) and stages Postmark's base64 parts as blobs of text under `staged/`: the
 *    job carries the keys, never the bytes, and nothing is decoded on the API's event loop.
 * 3. The ingest worker writes the ticket and event as always, then queues one `files.fetch` job per message
 *    with files (job id per event): a provider's download never holds intake's group commit.
 * 4. `fetch` stores each file through the files domain (`storeInbound`: a row pending → stored, skipped too
 *    large, or failed with the reason): one message's files in order, messages side by side, at most
 *    FILES_FETCH_CONCURRENCY downloads per process and FILES_FETCH_TIMEOUT_MS per file. A file's own failure
 *    never fails the job or the ticket.
 */

/** What the files domain does with one inbound file (its `storeInbound`). Never throws for the file's own problems. */
export interface InboundFileStore {
  storeInbound(tenantId: string, to: { ticketId: string; eventId: string; file: InboundFile }, opts: { maxBytes: number }): Promise<unknown>;
  /** A file listed but not fetched (beyond FILES_MAX_PER_MESSAGE, declared too large): its row, `skipped` with the reason. */
  recordSkipped(tenantId: string, to: { ticketId: string; eventId: string; name: string; declaredType?: string; size?: number; contentId?: string; reason: string }): Promise<unknown>;
}

export type FetchJob = JobData<'files.fetch'>;

/** Files listed as skipped past FILES_MAX_PER_MESSAGE; past that only their number is kept (in the event's meta). */
export const MAX_SKIPPED_LISTED = 100;
/** Where the edge stages Postmark parts (base64 text) until the fetch job has stored them. */
export const STAGED_PREFIX = 'staged/';
/** A staged part nobody fetched (a refused or duplicate delivery, a job lost) is removed after this. */
const STAGED_MAX_AGE_MS = 24 * 3600 * 1000;

/** The files domain's own words for a file over the limit (its `storeInbound` says the same when the bytes run over). */
export const tooLargeReason = (limit: number) => `too large: the limit is ${limit} bytes`;

/**
 * Whether a base64 text surely decodes to more than `max` bytes, judged from its length alone (no pass over
 * 30 MB of text on the API's event loop): line breaks count as data here, so only a part more than 5 % over is
 * refused before staging; one nearer the limit is staged, and the worker's cut at `max + 1` decides exactly.
 */
const surelyOverLength = (chars: number, max: number) => Math.floor((chars * 3) / 4) > max * 1.05 + 16;
const surelyOver = (b64: string, max: number) => surelyOverLength(b64.length, max);

/** A foreign key violation: the ticket or event the files were for is gone (deleted since), nothing to attach to. */
const parentGone = (err: unknown) => (err as { code?: unknown })?.code === '23503';

/** Counts callers in and out: at most `limit` at once, the rest wait in arrival order. */
export function semaphore(limit: number) {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async function run<T>(fn: () => Promise<T>): Promise<T> {
    if (active >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    active += 1;
    try {
      return await fn();
    } finally {
      active -= 1;
      waiting.shift()?.();
    }
  };
}

export function createInboundFiles(deps: {
  db: Db;
  config: ConfigSection<'inboundFiles' | 'outbound' | 'files'> & SourceConfig;
  blobs: BlobStore;
  queues: Pick<QueueHub, 'enqueue'>;
  channels: Pick<ChannelService, 'credentials'>;
  files: () => InboundFileStore;
  /** The connected mailbox's access token, for the files of polled mail (issue 34); the job never carries it. */
  mailboxTokens?: MailboxTokens;
  logger: Logger;
  /** Fair turns across workspaces on the files queue (fair-queue.ts); without it, one FIFO. */
  turns?: FetchTurns;
}) {
  const { db, config, blobs, queues, logger } = deps;
  const downloads = semaphore(config.FILES_FETCH_CONCURRENCY);

  const discard = async (keys: string[]) => {
    for (const key of keys) await blobs.delete(key).catch((err: Error) => logger.warn({ err: err.message }, 'a staged attachment could not be removed (the sweep will)'));
  };

  /**
   * The edge's part (API process): caps the files of each message and stages Postmark's base64 parts. Answers
   * the messages as the job carries them and the staged keys (which `discard` removes when the delivery is
   * refused or a duplicate). Writing a part is a stream of its text to the store: no decoding here.
   */
  async function prepare(tenantId: string, messages: InboundMessage[], payload?: unknown): Promise<{ messages: InboundMessage[]; staged: string[][] }> {
    const staged: string[][] = messages.map(() => []);
    if (!messages.some((m) => m.files && m.files.length > 0)) return { messages, staged };
    const attachments = (payload as { Attachments?: unknown } | undefined)?.Attachments;
    const limit = config.FILES_MAX_PER_MESSAGE;
    const out: InboundMessage[] = [];
    try {
      for (const [i, m] of messages.entries()) {
        const files = m.files ?? [];
        if (files.length === 0) {
          out.push(m);
          continue;
        }
        const queued: QueuedFileRef[] = [];
        for (const [n, ref] of files.slice(0, limit + MAX_SKIPPED_LISTED).entries()) {
          if (n >= limit) {
            queued.push({ ...ref, skip: { reason: `the message carries ${files.length} files; at most ${limit} are kept per message (FILES_MAX_PER_MESSAGE)`, limit } });
            continue;
          }
          // Listed by the mailbox service as not fetchable (a Graph item or reference attachment): its reason stays.
          if ((ref as QueuedFileRef).skip) {
            queued.push(ref);
            continue;
          }
          if (ref.size !== undefined && ref.size > config.FILES_MAX_BYTES) {
            queued.push({ ...ref, skip: { reason: tooLargeReason(config.FILES_MAX_BYTES), limit: config.FILES_MAX_BYTES } });
            continue;
          }
          if (ref.source.kind !== 'postmark') {
            queued.push(ref);
            continue;
          }
          const entry = Array.isArray(attachments) ? (attachments[ref.source.index] as { Content?: unknown } | undefined) : undefined;
          // A large email's part was written to the staging area as the body arrived (`spool`): taken on as it is.
          const spooled = spooledMember(entry, 'Content');
          if (spooled && spooled.length > 0) {
            if (surelyOverLength(spooled.length, config.FILES_MAX_BYTES)) {
              queued.push({ ...ref, skip: { reason: tooLargeReason(config.FILES_MAX_BYTES), limit: config.FILES_MAX_BYTES } });
              continue;
            }
            spooled.adopted = true;
            staged[i]!.push(spooled.key);
            queued.push({ ...ref, staged: spooled.key });
            continue;
          }
          const content = typeof entry?.Content === 'string' ? entry.Content : '';
          if (content === '') {
            queued.push(ref); // fetched as "arrived without content": listed, and failed saying so
            continue;
          }
          if (surelyOver(content, config.FILES_MAX_BYTES)) {
            queued.push({ ...ref, skip: { reason: tooLargeReason(config.FILES_MAX_BYTES), limit: config.FILES_MAX_BYTES } });
            continue;
          }
          const key = `${STAGED_PREFIX}${tenantId}/${randomBytes(16).toString('hex')}`;
          // The file store failing here is the provider's cue to retry (503): nothing was queued.
          const put = await blobs.put(key, stringStream(content), { maxBytes: content.length, contentType: 'text/plain' }).catch((err: Error) => {
            logger.warn({ err: err.message }, 'inbound files: a Postmark part could not be staged');
            throw dependencyUnavailable('The file store');
          });
          if ('tooLarge' in put) throw dependencyUnavailable('The file store');
          staged[i]!.push(key);
          queued.push({ ...ref, staged: key });
        }
        const omitted = files.length - queued.length;
        out.push({ ...m, files: queued, ...(omitted > 0 ? { filesOmitted: omitted } : {}) });
      }
    } catch (err) {
      await discard(staged.flat());
      throw err;
    }
    return { messages: out, staged };
  }

  /**
   * The staging area for large email bodies read as they arrive (the router's `spooledJson`): each part's base64
   * text is written under `staged/` as it comes, and `prepare` takes it on from there. A key the request did not
   * adopt is removed after the answer; one left by a crash goes with the staged sweep.
   */
  const spool = {
    maxBytes: config.INGEST_EMAIL_MAX_BYTES,
    async store(text: Readable, maxChars: number): Promise<string> {
      const key = `${STAGED_PREFIX}spool/${randomBytes(16).toString('hex')}`;
      const put = await blobs.put(key, text, { maxBytes: maxChars, contentType: 'text/plain' }).catch((err: Error) => {
        text.destroy();
        logger.warn({ err: err.message }, 'inbound files: a part of a large email could not be staged');
        throw dependencyUnavailable('The file store');
      });
      if ('tooLarge' in put) throw dependencyUnavailable('The file store');
      return key;
    },
    remove: (key: string) => blobs.delete(key),
  };

  /**
   * The ingest worker's part, after its commit: one fetch job per message with files (a rerun's is the same job).
   * Added side by side: the group commit waits for one Redis round trip, not one per message.
   */
  async function queueFetch(jobs: FetchJob[]): Promise<void> {
    // Each job takes its workspace's next turn (fair-queue.ts): a flood's backlog does not hold other workspaces' files.
    await Promise.all(jobs.map(async (job) => queues.enqueue('files.fetch', job, deps.turns ? { priority: await deps.turns.take(job.tenant_id) } : {})));
  }

  /**
   * The files.fetch job. Each file is stored through the files domain; its failure is its row's. One message's
   * files are fetched one after another, in the message's order (jobs run side by side, FILES_FETCH_CONCURRENCY
   * per process): its rows are then created in that order, which is the order the event lists them in, and a
   * job run again (a worker died mid-fetch, or an ingest rerun queued it after the first run was removed) knows
   * exactly what is done: the first k files, k being the rows the event already has. Rows a dead worker left
   * `pending` are the sweep's.
   */
  async function fetch(job: FetchJob): Promise<{ fetched: number; already: number }> {
    const { tenant_id: tenantId, ticket_id: ticketId, event_id: eventId } = job;
    const refs = job.files as QueuedFileRef[];
    const already = Math.min(refs.length, await store.countInboundRows(db, tenantId, eventId));
    for (const ref of refs.slice(0, already)) if (ref.staged) await discard([ref.staged]);
    const creds = await deps.channels.credentials(tenantId, job.channel).catch((err: Error) => {
      logger.warn({ err: err.message, channel: job.channel }, 'inbound files: the connection\'s credentials could not be read');
      return undefined;
    });
    const files = deps.files();
    let fetched = 0;
    for (const ref of refs.slice(already)) {
      try {
        if (ref.skip) {
          await files.recordSkipped(tenantId, {
            ticketId,
            eventId,
            name: ref.name,
            ...(ref.declaredType ? { declaredType: ref.declaredType } : {}),
            ...(ref.size !== undefined ? { size: ref.size } : {}),
            ...(ref.contentId ? { contentId: ref.contentId } : {}),
            reason: ref.skip.reason,
          });
        } else {
          const file: InboundFile = {
            name: ref.name,
            ...(ref.declaredType ? { declaredType: ref.declaredType } : {}),
            ...(ref.contentId ? { contentId: ref.contentId } : {}),
            open: () => {
              // Polled mail is fetched with the mailbox's token, not the channel's credentials (Postmark's are staged).
              const needsCreds = ref.source.kind !== 'postmark' && ref.source.kind !== 'gmail' && ref.source.kind !== 'graph';
              if (!creds && needsCreds) return Promise.reject(new FetchFailed(`the ${job.channel} channel is not connected; its credentials are gone`));
              const tokens = deps.mailboxTokens;
              return openSource(ref, {
                config,
                credentials: creds?.values ?? {},
                blobs,
                maxBytes: config.FILES_MAX_BYTES,
                ...(tokens ? { mailboxToken: (mailbox, opts) => tokens(tenantId, mailbox, opts) } : {}),
              });
            },
          };
          await downloads(() => files.storeInbound(tenantId, { ticketId, eventId, file }, { maxBytes: config.FILES_MAX_BYTES }));
        }
        fetched += 1;
      } catch (err) {
        if (!parentGone(err)) throw err;
        // The ticket (or its event) was deleted meanwhile: its files have nowhere to go.
        logger.info({ ticket_id: ticketId, event_id: eventId }, 'inbound files: the ticket is gone; its files are not fetched');
        await discard(refs.flatMap((r) => (r.staged ? [r.staged] : [])));
        return { fetched, already };
      } finally {
        if (ref.staged) await discard([ref.staged]);
      }
    }
    return { fetched, already };
  }

  /**
   * The sweep: rows a worker left `pending` (it died mid-fetch) are failed with the reason once no fetch can
   * still be running (twice FILES_FETCH_TIMEOUT_MS, plus time for a scan); staged parts older than a day
   * (their delivery was refused, a duplicate, or its job lost) are removed.
   */
  async function sweep(now = Date.now()): Promise<{ failed: number; staged_removed: number }> {
    const cutoff = new Date(now - 2 * config.FILES_FETCH_TIMEOUT_MS - 10 * 60 * 1000);
    const failed = await store.crossTenantFailStalePending(db, cutoff, 'the fetch was interrupted (the worker stopped) and the provider\'s link is not tried again; ask the customer to send the file again', 500);
    let removed = 0;
    for await (const e of blobs.entries(STAGED_PREFIX)) {
      if (now - e.modifiedAt.getTime() < STAGED_MAX_AGE_MS) continue;
      await blobs.delete(e.key).catch(() => undefined);
      removed += 1;
    }
    return { failed, staged_removed: removed };
  }

  return { prepare, discard, spool, queueFetch, fetch, sweep };
}

export type InboundFiles = ReturnType<typeof createInboundFiles>;
