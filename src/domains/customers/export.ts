import { randomBytes } from 'node:crypto';
import { signedTokens } from '../../lib/signed-tokens';
import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import type { CustomerJobRow, CustomerRow } from '../../db/types';
import { DomainError, notFound } from '../../lib/errors';
import { isUuid, newId } from '../../lib/ids';
import { iso, isoOrNull } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import type { JobRun } from '../../queue/jobs';
import type { AuditService } from '../audit/service';
import type { BlobStore } from '../files/types';
import type { Principal } from '../identity/principal';
import * as store from './export-store';
import type { RequestExportInput } from './export-schemas';
import { missingCustomer, presentCustomer } from './service';
import { getCustomer, handlesOf } from './store';

/*
 * Customer export (issue 38, access request): everything the workspace holds on one person, as one JSON document in
 * the file store, downloadable through a signed link until it expires. docs/decisions/customers-export.md has the
 * reasons; in short:
 *
 * - POST writes a customer_jobs row (kind 'export', who asked) and its audit entry in one transaction, then queues
 *   `customers.export` named by the row, so a repeat add is a no-op; the hourly sweep queues again what a lost
 *   enqueue left waiting. A run of an export that is no longer queued does nothing.
 * - The job reads the person in one read-only REPEATABLE READ transaction (one snapshot: the document is consistent
 *   however long it takes) in keyset pages of a bounded size, and streams the JSON text into the store as it is
 *   made, so neither the database nor the worker ever holds a whole person with thousands of tickets.
 * - The file is kept under the workspace's prefix (`t/<tenant>/<random>`, as attachments are) and held by
 *   customer_jobs.file_key: the files orphan sweep leaves an object a job row names. It is no attachment, so it
 *   does not count against FILES_WORKSPACE_QUOTA_BYTES (an access request is answered even when the workspace is
 *   full) and no ticket shows it.
 * - The link is a token signed with the file links' key (a purpose of its own in the MAC, so neither kind of link
 *   passes for the other) naming the workspace, the export and its expiry; it is checked against the row, so an
 *   export swept early or erased refuses every link issued for it. Issuing a link and every download are audited.
 */

/** Tickets per page, events per page (across a page's tickets), and rows per page of the other lists. */
const TICKETS_PAGE = 100;
const EVENTS_PAGE = 500;
const ROWS_PAGE = 500;
/** JSON text is handed to the store in pieces of about this size. */
const CHUNK_CHARS = 64 * 1024;
/** The largest export document: past it the export fails instead of filling the store. */
export const EXPORT_MAX_BYTES = 4 * 1024 * 1024 * 1024;
/** An export still queued this long after it was asked for is queued again by the sweep. */
export const STALE_EXPORT_MS = 15 * 60 * 1000;
/** Expired exports handled per statement, and statements per sweep run. */
const SWEEP_BATCH = 500;
const SWEEP_ROUNDS = 20;
/** The longest failure reason kept. */
const MAX_ERROR = 300;
/** Why an export fails when its customer is no longer there. */
const GONE = 'the customer no longer exists (deleted or merged away since the request)';
/** What the document says it is: a client reading it checks this first. */
export const EXPORT_FORMAT = 'helpdesk.customer_export.v1';

const J = JSON.stringify;
/** Unguessable and tenant-scoped, as an attachment's key: `t/<tenant>/<128 random bits in hex>`. */
const newStorageKey = (tenantId: string) => `t/${tenantId}/${randomBytes(16).toString('hex')}`;
const shortError = (err: unknown) => {
  const s = (err as Error)?.message ?? String(err);
  return s.length > MAX_ERROR ? `${s.slice(0, MAX_ERROR - 1)}…` : s;
};

/** The export as a client polls it; `downloadUrl` only while it can be downloaded. */
export const presentExport = (r: CustomerJobRow, downloadUrl: string | null) => ({
  id: r.id,
  customer_id: r.customer_id,
  kind: 'export' as const,
  state: r.state,
  created_at: iso(r.created_at),
  completed_at: isoOrNull(r.completed_at),
  expires_at: isoOrNull(r.expires_at),
  download_url: downloadUrl,
  error: r.error,
});

/** Whether the export's file may be downloaded now. */
const downloadable = (r: CustomerJobRow, now = Date.now()): r is CustomerJobRow & { file_key: string; expires_at: Date } =>
  r.state === 'done' && r.file_key !== null && r.expires_at !== null && r.expires_at.getTime() > now;

export interface CustomerExportDeps {
  db: Db;
  blobs: BlobStore;
  audit: Pick<AuditService, 'record' | 'recordBySystem'>;
  queues: Pick<QueueHub, 'enqueue'>;
  logger: Logger;
  /** Signed links to the customer's files inside the document (GET /v1/files/{token}). */
  files: { signLink(tenantId: string, attachmentId: string, ttlSeconds: number): string };
  /** The file links' HMAC key; export links are signed with it under a purpose of their own. */
  linkKey: Buffer;
  config: Pick<ConfigSection<'tickets' | 'http'>, 'CUSTOMER_EXPORT_TTL_HOURS' | 'PUBLIC_BASE_URL'>;
}

/** What one document holds, counted as it is written (the job's result and the completion's audit entry). */
interface Counts {
  tickets: number;
  events: number;
  attachments: number;
  csat: number;
  intake: number;
  transcripts: number;
}

/** Keyset pages until a short one: `read(last row of the previous page)`. */
async function* pages<T>(read: (after: T | undefined) => Promise<T[]>, limit: number): AsyncGenerator<T[]> {
  let after: T | undefined;
  for (;;) {
    const rows = await read(after);
    if (rows.length > 0) yield rows;
    if (rows.length < limit) return;
    after = rows[rows.length - 1];
  }
}

/** A JSON array of every row of `pages`, each rendered to its JSON text. */
async function* jsonArray<T>(rows: AsyncIterable<T[]>, render: (row: T) => string): AsyncGenerator<string> {
  yield '[';
  let first = true;
  for await (const page of rows) {
    for (const row of page) {
      yield first ? render(row) : `,${render(row)}`;
      first = false;
    }
  }
  yield ']';
}

/** Text pieces joined into chunks of about CHUNK_CHARS: the store gets few writes, never the whole document. */
async function* chunked(pieces: AsyncIterable<string>): AsyncGenerator<Buffer> {
  let parts: string[] = [];
  let size = 0;
  for await (const p of pieces) {
    parts.push(p);
    size += p.length;
    if (size >= CHUNK_CHARS) {
      yield Buffer.from(parts.join(''), 'utf8');
      parts = [];
      size = 0;
    }
  }
  if (parts.length > 0) yield Buffer.from(parts.join(''), 'utf8');
}

export function createCustomerExportService(deps: CustomerExportDeps) {
  const { db, blobs, audit, queues, logger, files, config } = deps;
  const base = (config.PUBLIC_BASE_URL ?? '').replace(/\/$/, '');
  const links = signedTokens(deps.linkKey, 'customer-export');

  /**
   * A download token: base64url of `{t: tenant, x: export, e: expiry (unix seconds)}`, a dot, and its HMAC-SHA256
   * under the file links' key with the purpose `customer-export` (a file link's MAC covers `file-link`).
   */
  const signDownload = (tenantId: string, exportId: string, expiresAt: Date) => links.sign({ t: tenantId, x: exportId, e: Math.floor(expiresAt.getTime() / 1000) });

  /** The claims of a token this service signed that has not expired, or undefined (altered, foreign, expired, malformed). */
  function readToken(token: string): { t: string; x: string } | undefined {
    const claims = links.open(token);
    if (!claims || typeof claims.t !== 'string' || typeof claims.x !== 'string' || !isUuid(claims.t) || !isUuid(claims.x)) return undefined;
    return { t: claims.t, x: claims.x };
  }

  const downloadUrl = (r: CustomerJobRow & { expires_at: Date }) => `${base}/v1/customer-exports/${signDownload(r.tenant_id, r.id, r.expires_at)}`;

  /** The document, as JSON text in order, read from `tx` (one snapshot). */
  async function* document(tx: Executor, job: CustomerJobRow, customer: CustomerRow, expiresAt: Date, counts: Counts): AsyncGenerator<string> {
    const tenantId = job.tenant_id;
    const ttlSeconds = Math.max(1, Math.floor((expiresAt.getTime() - Date.now()) / 1000));
    const fileUrl = (id: string) => `${base}/v1/files/${files.signLink(tenantId, id, ttlSeconds)}`;
    yield `{"format":${J(EXPORT_FORMAT)},"export_id":${J(job.id)},"workspace_id":${J(tenantId)},"generated_at":${J(iso(new Date()))},"expires_at":${J(iso(expiresAt))}`;
    const handles = (await handlesOf(tx, tenantId, [customer.id])).get(customer.id)!;
    yield `,"customer":${J(presentCustomer(customer, handles))}`;
    yield `,"handles":${J(handles.map((h) => ({ kind: h.kind, handle: h.handle, unreachable_at: isoOrNull(h.unreachable_at) })))}`;

    // Tickets, each with its visible events in order and their files: a page of tickets, then the events of that
    // page in (ticket, time) order, merged as they come (both are ordered by the ticket's uuid).
    yield ',"tickets":[';
    let firstTicket = true;
    for await (const tickets of pages<store.TicketRow>((after) => store.ticketsPage(tx, tenantId, customer.id, after?.id ?? null, TICKETS_PAGE), TICKETS_PAGE)) {
      const events = visibleEvents(tx, tenantId, tickets.map((t) => t.id))[Symbol.asyncIterator]();
      let next = await events.next();
      for (const t of tickets) {
        const head = J({
          id: t.id,
          subject: t.subject,
          description: t.description,
          status: t.status,
          priority: t.priority,
          source: t.source,
          created_at: iso(t.created_at),
          updated_at: iso(t.updated_at),
          solved_at: isoOrNull(t.solved_at),
          merged_into_id: t.merged_into_id,
        });
        yield `${firstTicket ? '' : ','}${head.slice(0, -1)},"events":[`;
        firstTicket = false;
        counts.tickets += 1;
        let firstEvent = true;
        while (!next.done && next.value.event.ticket_id === t.id) {
          const { event: e, files: attached } = next.value;
          const view = {
            id: e.id,
            kind: e.kind,
            actor_type: e.actor_type,
            actor_name: e.actor_name,
            body: e.body,
            created_at: iso(e.created_at),
            redacted_at: isoOrNull(e.redacted_at),
            attachments: attached.map((f) => ({ id: f.id, name: f.name, content_type: f.content_type, size: Number(f.size), download_url: fileUrl(f.id) })),
          };
          yield firstEvent ? J(view) : `,${J(view)}`;
          firstEvent = false;
          counts.events += 1;
          counts.attachments += attached.length;
          next = await events.next();
        }
        yield ']}';
      }
      if (!next.done) throw new Error(`export ${job.id}: an event of ticket ${next.value.event.ticket_id} came out of the tickets' order`);
    }
    yield ']';

    yield ',"csat":';
    yield* jsonArray(
      pages<store.CsatRow>((after) => store.csatPage(tx, tenantId, customer.id, after ? { at_key: after.at_key, id: after.id } : null, ROWS_PAGE), ROWS_PAGE),
      (c) => {
        counts.csat += 1;
        return J({ id: c.id, ticket_id: c.ticket_id, score: c.score, comment: c.comment, created_at: iso(c.created_at) });
      },
    );

    yield ',"intake":';
    yield* jsonArray(
      pages<store.IntakeRow>((after) => store.intakePage(tx, tenantId, customer.id, after?.seq ?? null, ROWS_PAGE), ROWS_PAGE),
      (d) => {
        counts.intake += 1;
        return J({
          channel: d.channel,
          provider_message_id: d.provider_message_id,
          ticket_id: d.ticket_id,
          first_seen_at: iso(d.first_seen_at),
          last_seen_at: iso(d.last_seen_at),
          duplicate_count: d.duplicate_count,
        });
      },
    );

    // Helpdesk webhook transcripts name their requester as the provider does (an address, a phone number): the
    // customer's address and every handle, compared without case.
    const requesters = [...new Set([customer.email, ...handles.map((h) => h.handle)].filter((r) => r !== '').map((r) => r.toLowerCase()))];
    yield ',"transcripts":';
    yield* jsonArray(
      pages<store.TranscriptEventRow>((after) => store.transcriptEventsPage(tx, tenantId, requesters, after ? { transcript_id: after.transcript_id, seq: after.seq } : null, ROWS_PAGE), ROWS_PAGE),
      (e) => {
        counts.transcripts += 1;
        return J({
          id: e.id,
          transcript_id: e.transcript_id,
          external_ticket_id: e.external_ticket_id,
          provider_event_id: e.provider_event_id,
          type: e.type,
          occurred_at: isoOrNull(e.occurred_at),
          status: e.status,
          subject: e.subject,
          priority: e.priority,
          requester: e.requester,
          received_at: iso(e.received_at),
        });
      },
    );
    yield '}';
  }

  /** The visible events of some tickets with their files, in (ticket, time, sequence) order, a page at a time. */
  async function* visibleEvents(tx: Executor, tenantId: string, ticketIds: string[]): AsyncGenerator<{ event: store.EventRow; files: store.FileRow[] }> {
    let after: store.EventCursor | null = null;
    for (;;) {
      const rows = await store.visibleEventsPage(tx, tenantId, ticketIds, after, EVENTS_PAGE);
      const byEvent = new Map<string, store.FileRow[]>();
      for (const f of await store.visibleFilesOf(tx, tenantId, rows.map((r) => r.id))) {
        const list = byEvent.get(f.event_id) ?? [];
        list.push(f);
        byEvent.set(f.event_id, list);
      }
      for (const event of rows) yield { event, files: byEvent.get(event.id) ?? [] };
      if (rows.length < EVENTS_PAGE) return;
      const last = rows[rows.length - 1]!;
      after = { ticket_id: last.ticket_id, at_key: last.at_key, seq: last.seq };
    }
  }

  async function enqueue(tenantId: string, exportId: string) {
    await queues.enqueue('customers.export', { tenant_id: tenantId, export_id: exportId });
  }

  return {
    signDownload,

    /**
     * POST /v1/customers/{customer_id}/export: the job row and the request's audit entry (one transaction), then the
     * job queued. A queue that cannot be reached does not refuse the request: the row is written, and the sweep
     * queues it within the hour.
     */
    async request(actor: Principal, customerId: string, input: RequestExportInput) {
      const customer = await getCustomer(db, actor.tenantId, customerId);
      if (!customer) throw await missingCustomer(db, actor.tenantId, customerId);
      const id = newId();
      const row = await db.transaction().execute(async (tx) => {
        const r = await store.insertExport(tx, actor.tenantId, {
          id,
          customer_id: customerId,
          reason: input.reason ?? '',
          requested_by_user_id: actor.userId,
          requested_by_api_key_id: actor.apiKeyId,
        });
        await audit.record(tx, actor, 'customer.export_requested', { type: 'customer', id: customerId }, { export_id: id, ...(input.reason ? { reason: input.reason } : {}) });
        return r;
      });
      try {
        await enqueue(actor.tenantId, id);
      } catch (err) {
        logger.warn({ err_code: 'customer_export_not_queued', export_id: id, cause: (err as Error)?.message }, 'customer export not queued; the sweep will queue it');
      }
      return presentExport(row, null);
    },

    /**
     * GET /v1/customers/{customer_id}/exports/{export_id}: the job; once done and until it expires, with a fresh
     * signed link that expires with the export. Each link issued is audited.
     */
    async get(actor: Principal, customerId: string, exportId: string) {
      const row = await store.getExport(db, actor.tenantId, exportId);
      if (!row || row.customer_id !== customerId) throw notFound('export');
      if (!downloadable(row)) return presentExport(row, null);
      const url = downloadUrl(row);
      await audit.record(db, actor, 'customer.export_link_issued', { type: 'customer', id: customerId }, { export_id: row.id, expires_at: iso(row.expires_at) });
      return presentExport(row, url);
    },

    /**
     * GET /v1/customer-exports/{token}: the document a signed link names, with no other credential, audited. An
     * altered, expired or unknown token, an export no longer downloadable and a file gone from the store are all the
     * same 404 (a link says nothing of what it named).
     */
    async openDownload(token: string) {
      const invalid = () => new DomainError('file_link_invalid', 'This export link is unknown, altered or expired.');
      const claims = readToken(token);
      if (!claims) throw invalid();
      const row = await store.getExport(db, claims.t, claims.x);
      if (!row || !downloadable(row)) throw invalid();
      const got = await blobs.get(row.file_key);
      if (!got) {
        logger.error({ err_code: 'customer_export_missing', export_id: row.id }, 'a customer export has no bytes in the store');
        throw invalid();
      }
      try {
        await audit.recordBySystem(db, row.tenant_id, 'customer.export_downloaded', { type: 'customer', id: row.customer_id }, { export_id: row.id, bytes: got.size, via: 'signed_link' });
      } catch (err) {
        got.body.destroy();
        throw err;
      }
      return { body: got.body, size: got.size, name: `customer-export-${row.customer_id}.json` };
    },

    /**
     * The `customers.export` job: the document written to the store, then the row done with its file (only while
     * still queued: a run of a done or failed export does nothing, and of two runs at once the second to finish
     * deletes its copy). A customer gone since the request (deleted, merged away) fails the export for good; any
     * other error is retried, and recorded on the row at the last try.
     */
    async run(tenantId: string, exportId: string, run: JobRun) {
      const job = await store.getExport(db, tenantId, exportId);
      if (!job || job.state !== 'queued') return { skipped: job ? job.state : 'missing' };
      const key = newStorageKey(tenantId);
      const expiresAt = new Date(Date.now() + config.CUSTOMER_EXPORT_TTL_HOURS * 3600 * 1000);
      const counts: Counts = { tickets: 0, events: 0, attachments: 0, csat: 0, intake: 0, transcripts: 0 };
      try {
        const put = await db
          .transaction()
          .setIsolationLevel('repeatable read')
          .setAccessMode('read only')
          .execute(async (tx) => {
            const customer = await getCustomer(tx, tenantId, job.customer_id);
            if (!customer) return 'gone' as const;
            return blobs.put(key, Readable.from(chunked(document(tx, job, customer, expiresAt, counts))), { maxBytes: EXPORT_MAX_BYTES, contentType: 'application/json' });
          });
        if (put === 'gone' || 'tooLarge' in put) {
          const why = put === 'gone' ? GONE : `the export is larger than ${EXPORT_MAX_BYTES} bytes`;
          await blobs.delete(key).catch(() => {});
          await store.failExport(db, tenantId, exportId, why);
          return { state: 'failed', error: why };
        }
        // Published under the customer's row lock: an erasure that began after the request and committed meanwhile
        // fails the export (its document holds what was erased); one that commits later finds the file and drops it.
        const outcome = await db.transaction().execute(async (tx): Promise<'done' | 'skipped' | { failed: string }> => {
          const c = await store.lockCustomer(tx, tenantId, job.customer_id);
          const why = !c ? GONE : c.erased_at !== null && c.erased_at.getTime() >= job.created_at.getTime() ? 'the customer was erased while the export was written' : null;
          if (why !== null) return (await store.failExport(tx, tenantId, exportId, why)) ? { failed: why } : 'skipped';
          if (!(await store.finishExport(tx, tenantId, exportId, { file_key: key, file_bytes: put.size, expires_at: expiresAt }))) return 'skipped';
          await audit.recordBySystem(tx, tenantId, 'customer.export_completed', { type: 'customer', id: job.customer_id }, { export_id: exportId, bytes: put.size, ...counts });
          return 'done';
        });
        if (outcome !== 'done') {
          await blobs.delete(key).catch(() => {});
          return outcome === 'skipped' ? { skipped: 'finished by another run' } : { state: 'failed', error: outcome.failed };
        }
        return { state: 'done', bytes: put.size, ...counts };
      } catch (err) {
        await blobs.delete(key).catch(() => {});
        if (run.last) await store.failExport(db, tenantId, exportId, shortError(err)).catch(() => {});
        throw err;
      }
    },

    /**
     * The hourly `customers.exports_sweep`: expired exports' files deleted (the key cleared first, so a delete that
     * fails leaves an object the orphan sweep removes), and exports a lost enqueue left queued queued again (a job
     * still known to the queue by its id is not added twice).
     */
    async sweep(): Promise<{ expired: number; requeued: number }> {
      let expired = 0;
      for (let round = 0; round < SWEEP_ROUNDS; round++) {
        const gone = await store.crossTenantExpiredExports(db, SWEEP_BATCH);
        for (const g of gone) {
          await blobs.delete(g.file_key).catch((err: unknown) => logger.warn({ err_code: 'blob_not_deleted', export_id: g.id, cause: (err as Error)?.message }, 'expired export not deleted; the orphan sweep will'));
        }
        expired += gone.length;
        if (gone.length < SWEEP_BATCH) break;
      }
      const stale = await store.crossTenantStaleExports(db, new Date(Date.now() - STALE_EXPORT_MS), SWEEP_BATCH);
      for (const s of stale) await enqueue(s.tenant_id, s.id);
      if (expired > 0 || stale.length > 0) logger.info({ expired, requeued: stale.length }, 'customer exports swept');
      return { expired, requeued: stale.length };
    },
  };
}

export type CustomerExportService = ReturnType<typeof createCustomerExportService>;
