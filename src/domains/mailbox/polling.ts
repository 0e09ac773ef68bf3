import type { Logger } from 'pino';
import type { Db } from '../../db';
import type { MailboxRow } from '../../db/types';
import { MAILBOX_ID_MAX } from '../../queue/jobs';
import { emailAdapter } from '../channels/adapters/email';
import type { InboundFileRef, InboundFileSource } from '../channels/adapters/types';
import type { IngestItem, IngestWorker } from '../ingest/worker';
import type { InboundFiles } from '../inbound-files/service';
import type { QueuedFileRef } from '../inbound-files/sources';
import { checkOf } from './health';
import { ProviderError, type FetchedMail, type MailAttachment, type MailProvider, type MailProviderId } from './providers';
import * as store from './store';
import type { MailboxTokens } from './tokens';

/**
 * Polling the connected mailbox (issue 35, split out of the mailbox service): new inbox mail goes through the
 * email channel's ingest path exactly as a pushed email does (same adapter, same file caps), then the cursor
 * moves on. Each poll records its outcome as the `inbound_polling` check.
 */

const header = (mail: FetchedMail, name: string) => mail.headers[name.toLowerCase()];

/**
 * Where the worker fetches a polled file: the provider's ids and the mailbox it was polled from (never a token).
 * Ids too long for the job's schema are listed as skipped rather than queued: a job the schema refuses would
 * fail the message's intake.
 */
function fileSource(m: MailboxRow, mail: FetchedMail, a: MailAttachment): { source: InboundFileSource; skip?: string } {
  const address = m.email_address;
  const tooLong = [mail.providerId, a.attachmentId ?? ''].some((id) => id.length > MAILBOX_ID_MAX) || (a.partId ?? '').length > 64;
  // A skipped file is never opened, so its reference only has to pass the schema: ids are cut to fit.
  const clip = (id: string) => id.slice(0, MAILBOX_ID_MAX);
  const source: InboundFileSource =
    m.provider === 'microsoft'
      ? { kind: 'graph', address, messageId: clip(mail.providerId), attachmentId: clip(a.attachmentId ?? '') }
      : { kind: 'gmail', address, messageId: clip(mail.providerId), ...(a.attachmentId ? { attachmentId: clip(a.attachmentId) } : a.partId ? { partId: a.partId.slice(0, 64) } : {}) };
  const skip = a.skip ?? (tooLong ? 'the provider\'s id for this file is too long to be fetched' : undefined);
  return { source, ...(skip ? { skip } : {}) };
}

/** A fetched message in the email channel's inbound format, parsed by the same adapter as a push delivery. */
function toItem(tenantId: string, m: MailboxRow, mail: FetchedMail): IngestItem | undefined {
  const attachments = mail.attachments ?? [];
  const headers = ['Message-ID', 'In-Reply-To', 'References', 'To']
    .map((name) => ({ Name: name, Value: header(mail, name) }))
    .filter((h): h is { Name: string; Value: string } => typeof h.Value === 'string');
  const parsed = emailAdapter.parse({
    From: mail.from.address,
    FromName: mail.from.name ?? '',
    Subject: mail.subject,
    Date: header(mail, 'Date') ?? mail.receivedAt ?? '',
    MessageID: mail.providerId,
    TextBody: mail.text ?? '',
    HtmlBody: mail.html ?? '',
    Headers: headers,
    // The files as Postmark would describe them (no Content): the adapter names them in the body and normalises
    // name, type, size and Content-ID exactly as for a pushed email; where to fetch them is set just below.
    ...(attachments.length > 0
      ? { Attachments: attachments.map((a) => ({ Name: a.name, ContentType: a.contentType ?? '', ContentLength: a.size ?? null, ContentID: a.contentId ?? '' })) }
      : {}),
  });
  if (!parsed.ok || parsed.messages.length === 0) return undefined;
  const mailbox = { provider: m.provider, address: m.email_address, messageId: mail.providerId, ...(mail.threadId ? { threadId: mail.threadId } : {}) };
  const message = parsed.messages[0]!;
  const files = message.files?.map((f: InboundFileRef, i): QueuedFileRef => {
    const { source, skip } = fileSource(m, mail, attachments[i]!);
    return { ...f, source, ...(skip ? { skip: { reason: skip } } : {}) };
  });
  // The correlation id is the provider's message id: a poll repeated after a crash is the same delivery
  // (same answer, no duplicate counted); a push of the same mail to the ingest route is a duplicate.
  return { id: `poll:${mail.providerId}`, tenant_id: tenantId, channel: 'email', message: { ...message, mailbox, ...(files ? { files } : {}) } };
}

export function createMailboxPolling(deps: {
  db: Db;
  logger: Logger;
  providers: Record<MailProviderId, MailProvider>;
  tokens: MailboxTokens;
  ingest: Pick<IngestWorker, 'processBatch'>;
  /** Inbound files (issue 34): caps a polled message's files as the ingest edge caps a pushed one's. */
  files?: Pick<InboundFiles, 'prepare'> | undefined;
}) {
  const { db, logger, providers, tokens, ingest } = deps;

  /**
   * The cap the ingest edge applies to a pushed message's files (FILES_MAX_PER_MESSAGE; a declared size over
   * FILES_MAX_BYTES skipped without a download), applied to polled ones: both then reach the same fetch job.
   */
  async function capFiles(tenantId: string, items: IngestItem[]): Promise<IngestItem[]> {
    const files = deps.files;
    if (!files || !items.some((i) => i.message.files?.length)) return items;
    const { messages } = await files.prepare(tenantId, items.map((i) => i.message));
    return items.map((item, n) => ({ ...item, message: messages[n]! }));
  }

  /** The `mailbox.poll` job: new inbox mail through the email ingest path, then the cursor moves on. */
  async function poll(tenantId: string) {
    const m = await store.getMailbox(db, tenantId);
    if (!m || !m.connected || !m.polling) return { fetched: 0 };
    const p = providers[m.provider as MailProviderId];
    try {
      const { scopes } = await tokens.accessToken(m, p);
      if (!p.canRead(scopes)) {
        await store.setCheck(db, tenantId, checkOf('inbound_polling', 'failing', 'The grant does not allow reading mail, so new mail cannot be polled.', 'Reconnect the mailbox and approve the read permission.'));
        return { fetched: 0 };
      }
      const page = await tokens.withToken(m, p, (token) => p.listSince(token, m.inbound_cursor));
      const own = m.email_address.toLowerCase();
      const items = await capFiles(tenantId, page.messages.filter((mail) => mail.from.address.toLowerCase() !== own).map((mail) => toItem(tenantId, m, mail)).filter((i): i is IngestItem => i !== undefined));
      const results = items.length > 0 ? await ingest.processBatch(items) : [];
      if (results.some((r) => !r.ok)) {
        // Refused (the email channel is disabled): the cursor stays, so nothing is skipped once it is enabled.
        await store.setCheck(db, tenantId, checkOf('inbound_polling', 'failing', `${results.filter((r) => !r.ok).length} polled message(s) could not be ingested: the email channel is not connected or is disabled.`, 'Enable the email channel (PUT /v1/channels/email); polling resumes where it stopped.'), { polled: true });
        return { fetched: page.messages.length, ingested: 0 };
      }
      await store.setCheck(
        db,
        tenantId,
        checkOf('inbound_polling', 'ok', `Last poll fetched ${page.messages.length} new message(s).`, 'None.'),
        { inbound_cursor: page.cursor, polled: true },
      );
      return { fetched: page.messages.length, ingested: items.length };
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      logger.warn({ tenant_id: tenantId, provider: p.id, kind: err.kind }, 'mailbox poll failed');
      const revoked = err.kind === 'revoked';
      await store.setCheck(
        db,
        tenantId,
        revoked
          ? checkOf('inbound_polling', 'failing', `The ${p.id} grant no longer works (${err.message}).`, 'Reconnect the mailbox.')
          : checkOf('inbound_polling', 'failing', `${err.message}.`, 'Nothing to change; the next poll retries.'),
        revoked ? { connected: false } : {},
      );
      return { fetched: 0 };
    }
  }

  return { poll };
}
