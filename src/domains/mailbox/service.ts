import { createHash, randomBytes } from 'node:crypto';
import MailComposer from 'nodemailer/lib/mail-composer';
import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { MailboxCheck, MailboxRow } from '../../db/types';
import { DomainError, notFound, refuse } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { createSealer } from '../../lib/crypto';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import { emailAdapter } from '../channels/adapters/email';
import type { ChannelService } from '../channels/service';
import type { IngestItem, IngestWorker } from '../ingest/worker';
import type { InboundFileRef, InboundFileSource } from '../channels/adapters/types';
import type { InboundFiles } from '../inbound-files/service';
import type { MailboxOfFile, QueuedFileRef } from '../inbound-files/sources';
import { MAILBOX_ID_MAX } from '../../queue/jobs';
import type { SendResult } from '../outbound/types';
import { createMailProviders, MAIL_PROVIDERS, ProviderError, type FetchedMail, type MailAttachment, type MailProvider, type MailProviderId, type ReplyTarget, type TokenSet } from './providers';
import type { EventSink } from '../events/types';
import * as store from './store';
import type { StoredMailboxRef } from './store';

// An access token this close to expiry is refreshed before use rather than failing mid-call.
const REFRESH_MARGIN_MS = 60 * 1000;

const stateHash = (state: string) => createHash('sha256').update(state).digest();
const invalidState = () => refuse('oauth_state_invalid', 'The state is unknown, expired or already used; start the connection again.');

/** What a read shows with nothing connected: every field present, empty, zero or false. */
const DISCONNECTED = {
  connected: false,
  email_address: '',
  scopes: [] as string[],
  sendable: false,
  polling: false,
  inbound_cursor_set: false,
  connected_at: '',
  healthy_at: '',
  last_polled_at: '',
  sent_today: 0,
  checks: [] as MailboxCheck[],
};

export type MailboxStatus = typeof DISCONNECTED & { provider?: MailProviderId };

const CHECK_ORDER: MailboxCheck['check'][] = ['oauth_token', 'scopes', 'send_permission', 'inbound_polling', 'daily_send_quota'];

const present = (m: MailboxRow | undefined, sentToday = 0): MailboxStatus =>
  m
    ? {
        connected: m.connected,
        provider: m.provider as MailProviderId,
        email_address: m.email_address,
        scopes: m.scopes,
        sendable: m.connected && m.sendable,
        polling: m.polling,
        inbound_cursor_set: m.inbound_cursor !== null,
        connected_at: iso(m.connected_at),
        healthy_at: m.healthy_at ? iso(m.healthy_at) : '',
        last_polled_at: m.last_polled_at ? iso(m.last_polled_at) : '',
        sent_today: sentToday,
        checks: [...m.checks].sort((a, b) => CHECK_ORDER.indexOf(a.check) - CHECK_ORDER.indexOf(b.check)),
      }
    : { ...DISCONNECTED };

/**
 * The connected mailbox: OAuth with Google or Microsoft, tokens sealed at rest, and health checks that say
 * what works and what an admin should do about what does not. Reads come from stored state only; only a
 * refresh (the `mailbox.refresh` job, on demand or on schedule) asks the provider.
 */
const header = (mail: FetchedMail, name: string) => mail.headers[name.toLowerCase()];

/** The customer's message to answer in the mailbox, when the connected mailbox is the one that polled it. */
function replyTarget(m: MailboxRow, ref: store.StoredMailboxRef | null): ReplyTarget | undefined {
  if (!ref || typeof ref.message_id !== 'string' || ref.message_id === '') return undefined;
  // A reconnected mailbox of another account or provider does not hold the message: plain headers then.
  if (ref.provider !== m.provider || typeof ref.address !== 'string' || ref.address.toLowerCase() !== m.email_address.toLowerCase()) return undefined;
  return { messageId: ref.message_id, ...(typeof ref.thread_id === 'string' && ref.thread_id ? { threadId: ref.thread_id } : {}) };
}

export function createMailboxService(deps: {
  db: Db;
  config: ConfigSection<'mailbox' | 'secrets' | 'http'>;
  queues: QueueHub;
  logger: Logger;
  channels: ChannelService;
  ingest: Pick<IngestWorker, 'processBatch'>;
  /** Where mailbox.health_changed goes (issue 19). */
  events?: EventSink;
  /** Inbound files (issue 34): caps a polled message's files as the ingest edge caps a pushed one's. */
  files?: Pick<InboundFiles, 'prepare'>;
}) {
  const { db, config, queues, logger, channels, ingest } = deps;
  const providers = createMailProviders(config);
  const sealer = createSealer(config.ENCRYPTION_KEYS);
  // The associated data binds a sealed token to its workspace and field: copied elsewhere, it will not open.
  const ctx = (tenantId: string, field: 'access' | 'refresh') => `mailbox:${tenantId}:${field}`;

  const providerFor = (id: string): MailProvider => {
    if (!MAIL_PROVIDERS.includes(id as MailProviderId)) throw notFound('mail provider');
    const p = providers[id as MailProviderId];
    if (!p.configured) {
      throw refuse('mail_provider_not_configured', `This deployment has no ${id} OAuth client configured; an operator must set its client id and secret.`);
    }
    return p;
  };
  const redirectUri = (id: string) => config.OAUTH_REDIRECT_URL ?? `${config.PUBLIC_BASE_URL ?? `http://localhost:${config.PORT}`}/oauth/${id}/callback`;

  const providerFailed = (err: ProviderError) =>
    err.kind === 'unavailable'
      ? new DomainError('mail_provider_unavailable', `${err.message}; the state is still valid, retry the same completion shortly.`, { retryAfterSeconds: 30 })
      : refuse('oauth_code_invalid', `${err.message}; the code may be expired or already used — start the connection again.`);

  const at = () => new Date().toISOString();
  const checkOf = (c: MailboxCheck['check'], status: MailboxCheck['status'], detail: string, remediation: string): MailboxCheck => ({ check: c, status, detail, remediation, last_checked_at: at() });

  function quotaCheck(sent: number): MailboxCheck {
    const limit = config.MAILBOX_DAILY_SEND_LIMIT;
    if (sent >= limit) return checkOf('daily_send_quota', 'failing', `${sent} of ${limit} replies sent today (UTC): the daily quota is used up, further replies wait.`, 'Wait for midnight UTC, or raise MAILBOX_DAILY_SEND_LIMIT if the provider allows more.');
    if (sent >= limit * 0.8) return checkOf('daily_send_quota', 'warning', `${sent} of ${limit} replies sent today (UTC).`, 'Expect sends to stop at the quota; raise MAILBOX_DAILY_SEND_LIMIT if the provider allows more.');
    return checkOf('daily_send_quota', 'ok', `${sent} of ${limit} replies sent today (UTC).`, 'None.');
  }

  function checksFor(p: MailProvider, scopes: string[], outcome: { ok: true } | { ok: false; err: ProviderError }, polling: boolean, kept: { polling?: MailboxCheck; sent: number }): MailboxCheck[] {
    // One check, one time: every row it writes carries the same moment.
    const when = at();
    const stamped = (c: MailboxCheck): MailboxCheck => ({ ...c, last_checked_at: when });
    if (!outcome.ok) {
      const revoked = outcome.err.kind === 'revoked';
      const token = revoked
        ? checkOf('oauth_token', 'failing', `The ${p.id} grant no longer works (${outcome.err.message}).`, 'Reconnect the mailbox: start the OAuth connection again and approve every requested permission.')
        : checkOf('oauth_token', 'failing', `${outcome.err.message}.`, `Nothing to change on our side; the next refresh retries. If it persists, check ${p.id}'s service status.`);
      const unknown = (c: MailboxCheck['check']) => checkOf(c, 'unknown', 'Not checked: the provider could not be asked.', 'Resolve the OAuth token check first.');
      return [token, unknown('scopes'), unknown('send_permission'), unknown('inbound_polling'), unknown('daily_send_quota')].map(stamped);
    }
    const read = p.canRead(scopes);
    const send = p.canSend(scopes);
    const missing = [...(read ? [] : ['read mail']), ...(send ? [] : ['send mail'])];
    return [
      checkOf('oauth_token', 'ok', `The ${p.id} grant works.`, 'None.'),
      missing.length === 0
        ? checkOf('scopes', 'ok', `Granted: ${scopes.join(' ')}.`, 'None.')
        : checkOf('scopes', 'warning', `The grant lacks permission to ${missing.join(' and ')}.`, 'Reconnect the mailbox and approve every requested permission.'),
      send
        ? checkOf('send_permission', 'ok', 'Replies can be sent through this mailbox.', 'None.')
        : checkOf('send_permission', 'failing', 'The grant does not allow sending mail.', 'Reconnect the mailbox and approve the send permission.'),
      !polling
        ? checkOf('inbound_polling', 'warning', 'Polling is off: new mail arrives only if the provider pushes it to the ingest route.', 'Turn polling on, or forward mail to the email ingest route.')
        : !read
          ? checkOf('inbound_polling', 'failing', 'The grant does not allow reading mail, so new mail cannot be polled.', 'Reconnect the mailbox and approve the read permission.')
          : (kept.polling ?? checkOf('inbound_polling', 'unknown', 'Polling has not run yet.', 'None; the first poll records its result here.')),
      quotaCheck(kept.sent),
    ].map((c) => (c === kept.polling ? c : stamped(c)));
  }

  /**
   * A working access token, refreshed (and stored) when close to expiry or when `force`d — a refresh is
   * also how we learn which scopes the grant holds now.
   */
  async function accessToken(m: MailboxRow, p: MailProvider, force = false): Promise<{ token: string; scopes: string[]; fresh: boolean }> {
    if (!force && m.access_expires_at.getTime() - Date.now() > REFRESH_MARGIN_MS) {
      return { token: sealer.open(m.access_token_sealed, ctx(m.tenant_id, 'access')), scopes: m.scopes, fresh: false };
    }
    if (!m.refresh_token_sealed) throw new ProviderError('revoked', `the ${p.id} access token expired and no refresh token was granted`);
    const fresh = await p.refresh(sealer.open(m.refresh_token_sealed, ctx(m.tenant_id, 'refresh')));
    const scopes = fresh.scopes.length > 0 ? fresh.scopes : m.scopes;
    await store.updateTokens(db, m.tenant_id, {
      access_token_sealed: sealer.seal(fresh.accessToken, ctx(m.tenant_id, 'access')),
      ...(fresh.refreshToken ? { refresh_token_sealed: sealer.seal(fresh.refreshToken, ctx(m.tenant_id, 'refresh')) } : {}),
      access_expires_at: fresh.expiresAt,
      scopes,
    });
    return { token: fresh.accessToken, scopes, fresh: true };
  }

  /**
   * Runs a provider call with the access token; a 401 on a token we thought valid (revoked early, clock
   * skew) is answered by one refresh and one retry. A second 401 means the grant itself no longer works.
   */
  async function withToken<T>(m: MailboxRow, p: MailProvider, fn: (token: string, scopes: string[]) => Promise<T>, force = false): Promise<T> {
    const first = await accessToken(m, p, force);
    try {
      return await fn(first.token, first.scopes);
    } catch (err) {
      if (!(err instanceof ProviderError) || err.kind !== 'unauthorized') throw err;
      if (first.fresh || !m.refresh_token_sealed) throw new ProviderError('revoked', err.message);
      const again = await accessToken(m, p, true);
      try {
        return await fn(again.token, again.scopes);
      } catch (retryErr) {
        if (retryErr instanceof ProviderError && retryErr.kind === 'unauthorized') throw new ProviderError('revoked', retryErr.message);
        throw retryErr;
      }
    }
  }

  /** What a mailbox's health is: connected, able to send, and each check's status. */
  const healthOf = (m: Pick<MailboxRow, 'connected' | 'sendable' | 'checks'>) =>
    JSON.stringify([m.connected, m.sendable, [...m.checks].map((c) => `${c.check}:${c.status}`).sort()]);

  /**
   * Stores a check's result, and when the mailbox's health changed, `mailbox.health_changed` with the
   * status as GET /v1/channels/email/mailbox shows it, in the same transaction (the row is locked, so two
   * racing checks announce one change once).
   */
  async function recordChecks(tenantId: string, r: Parameters<typeof store.recordChecks>[2]) {
    await db.transaction().execute(async (tx) => {
      const before = await store.lockMailbox(tx, tenantId);
      await store.recordChecks(tx, tenantId, r);
      if (!deps.events || !before || healthOf(before) === healthOf({ ...r, checks: r.checks })) return;
      const after = await store.getMailbox(tx, tenantId);
      await deps.events.emit(tx, tenantId, [{ type: 'mailbox.health_changed', data: { ...present(after, await store.sentToday(tx, tenantId)) } }]);
    });
  }

  /**
   * Asks the provider what the grant allows now and stores the answer as checks. Never throws for the
   * provider. `fresh` skips the token refresh when the tokens were just issued (OAuth completion).
   */
  async function check(tenantId: string, fresh = false, requestedAt?: Date): Promise<{ checked: boolean }> {
    const m = await store.getMailbox(db, tenantId);
    if (!m) return { checked: false };
    // A check that finished after this one was asked for already answered it: sweeps on several worker
    // processes, or an admin's refresh, racing with a refresh that just completed, do not ask the provider twice.
    if (requestedAt && m.last_checked_at && m.last_checked_at.getTime() >= requestedAt.getTime()) return { checked: false };
    const p = providers[m.provider as MailProviderId];
    try {
      // A refresh is forced: the token response is where the provider says which scopes it grants now.
      const { address, scopes } = await withToken(m, p, async (token, scopes) => ({ address: await p.emailAddress(token), scopes }), !fresh && Boolean(m.refresh_token_sealed));
      const checks = checksFor(p, scopes, { ok: true }, m.polling, { polling: m.checks.find((c) => c.check === 'inbound_polling'), sent: await store.sentToday(db, tenantId) });
      await recordChecks(tenantId, {
        connected: true,
        sendable: p.canSend(scopes),
        checks,
        healthy: checks.every((c) => c.status === 'ok' || c.status === 'unknown'),
        email_address: address,
      });
      return { checked: true };
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      logger.warn({ tenant_id: tenantId, provider: p.id, kind: err.kind }, 'mailbox check failed');
      const revoked = err.kind === 'revoked';
      await recordChecks(tenantId, {
        connected: !revoked && m.connected,
        sendable: !revoked && m.sendable,
        checks: checksFor(p, m.scopes, { ok: false, err }, m.polling, { sent: 0 }),
        healthy: false,
      });
      return { checked: true };
    }
  }

  const read = async (tenantId: string) => {
    const m = await store.getMailbox(db, tenantId);
    return present(m, m ? await store.sentToday(db, tenantId) : 0);
  };

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

  /**
   * A valid access token for the worker fetching a polled message's files (inbound files' `MailboxTokens`): the
   * connected mailbox's, refreshed (and stored) as polling refreshes it, only when it is still the mailbox the
   * message was polled from. The job never carries it. Errors say why in words that hold no token.
   */
  async function tokenForFiles(tenantId: string, from: MailboxOfFile, opts: { force: boolean }): Promise<string> {
    const m = await store.getMailbox(db, tenantId);
    if (!m) throw new Error('no mailbox is connected any more');
    if (m.provider !== from.provider || m.email_address.toLowerCase() !== from.address.toLowerCase()) {
      throw new Error('the mailbox the message was polled from is no longer the connected one');
    }
    if (!m.connected) throw new Error('the mailbox is disconnected (its grant no longer works); reconnect it');
    try {
      return (await accessToken(m, providers[m.provider as MailProviderId], opts.force)).token;
    } catch (err) {
      if (err instanceof ProviderError) throw new Error(err.message);
      throw err;
    }
  }

  /** The `mailbox.poll` job: new inbox mail through the email ingest path, then the cursor moves on. */
  async function poll(tenantId: string) {
    const m = await store.getMailbox(db, tenantId);
    if (!m || !m.connected || !m.polling) return { fetched: 0 };
    const p = providers[m.provider as MailProviderId];
    try {
      const { scopes } = await accessToken(m, p);
      if (!p.canRead(scopes)) {
        await store.setCheck(db, tenantId, checkOf('inbound_polling', 'failing', 'The grant does not allow reading mail, so new mail cannot be polled.', 'Reconnect the mailbox and approve the read permission.'));
        return { fetched: 0 };
      }
      const page = await withToken(m, p, (token) => p.listSince(token, m.inbound_cursor));
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

  /**
   * One reply through the connected mailbox, for the outbound pipeline (src/domains/outbound), with the
   * thread's headers: our Message-ID (on the mailbox's domain), In-Reply-To and References. Undefined when no
   * mailbox can send (the pipeline then tries the next sender). The daily quota blocks rather than sends.
   */
  async function sendReply(
    tenantId: string,
    r: {
      eventId: string;
      to: string;
      toName: string;
      subject: string;
      text: string;
      inReplyTo: string | null;
      references: string[];
      mailboxRef: StoredMailboxRef | null;
      /** The reply's files (issue 34): MIME parts, each streamed from the file store into the composed message. */
      attachments?: { name: string; contentType: string; open(): Promise<import('node:stream').Readable> }[];
    },
  ): Promise<SendResult | undefined> {
    const m = await store.getMailbox(db, tenantId);
    if (!m || !m.connected || !m.sendable) return undefined;
    const sent = await store.sentToday(db, tenantId);
    if (sent >= config.MAILBOX_DAILY_SEND_LIMIT) {
      await store.setCheck(db, tenantId, quotaCheck(sent));
      return { outcome: 'blocked', reason: `Not sent: the daily send quota (${config.MAILBOX_DAILY_SEND_LIMIT}) is used up; send the reply again after midnight UTC.` };
    }
    const p = providers[m.provider as MailProviderId];
    const domain = m.email_address.split('@')[1] ?? 'mail.invalid';
    const messageId = `${r.eventId}@${domain}`;
    // The customer's own subject (the ticket's may have been renamed): Gmail threads a reply only when the
    // subjects match, and every mail client shows the answer under the customer's words.
    const subject = /^re:/i.test(r.subject) ? r.subject : `Re: ${r.subject}`;
    const target = replyTarget(m, r.mailboxRef);
    const raw = await new MailComposer({
      from: m.email_address,
      to: { name: r.toName, address: r.to },
      subject,
      text: r.text,
      messageId: `<${messageId}>`,
      ...(r.inReplyTo ? { inReplyTo: `<${r.inReplyTo}>` } : {}),
      ...(r.references.length > 0 ? { references: r.references.map((id) => `<${id}>`) } : {}),
      // Each file's bytes are read from the store as the message is composed (base64 parts); the mailbox APIs take
      // the whole message, so it is held once, within the 25 MiB cap checked when the reply was written.
      ...(r.attachments?.length ? { attachments: await Promise.all(r.attachments.map(async (a) => ({ filename: a.name, contentType: a.contentType, content: await a.open() }))) } : {}),
    })
      .compile()
      .build();
    try {
      const text = raw.toString('utf8');
      const result = await withToken(m, p, async (token) => {
        try {
          return await p.send(token, text, target);
        } catch (err) {
          // The customer's message or thread is gone from the mailbox since it was polled (deleted, moved):
          // the reply still goes out, threaded for the customer by its In-Reply-To and References.
          if (target && err instanceof ProviderError && err.status === 404) return p.send(token, text);
          throw err;
        }
      });
      await store.setCheck(db, tenantId, quotaCheck(sent + 1));
      return { outcome: 'sent', providerMessageId: result.providerId ?? messageId, messageId, ...(result.threadId ? { threadId: result.threadId } : {}) };
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      if (err.kind === 'unavailable') return err.maybeSent ? { outcome: 'unknown', reason: `${err.message}; it may have sent the reply` } : { outcome: 'retry', reason: err.message };
      return { outcome: 'failed', reason: `Not sent: ${err.message}${err.kind === 'revoked' ? '; reconnect the mailbox, then send the reply again' : ''}.` };
    }
  }

  /** Which mailbox provider sends for the workspace now, if any (the outbox records it as the sender). */
  async function sender(tenantId: string): Promise<MailProviderId | undefined> {
    const m = await store.getMailbox(db, tenantId);
    return m && m.connected && m.sendable ? (m.provider as MailProviderId) : undefined;
  }

  return {
    async start(actor: Principal, providerId: string) {
      const p = providerFor(providerId);
      const state = randomBytes(32).toString('base64url');
      const expiresAt = new Date(Date.now() + config.OAUTH_STATE_TTL_SECONDS * 1000);
      await db.transaction().execute((tx) => store.insertState(tx, actor.tenantId, { hash: stateHash(state), userId: actor.userId, provider: p.id, expiresAt }));
      return { authorize_url: p.authorizeUrl(state, redirectUri(p.id)), state, expires_at: iso(expiresAt) };
    },

    async complete(actor: Principal, providerId: string, input: { code: string; state: string }) {
      const p = providerFor(providerId);
      const hash = stateHash(input.state);
      // The state row stays locked while the code is exchanged and is consumed only with the mailbox it
      // yields, in one transaction: a concurrent completion of the same state waits and then finds it used,
      // and a provider that is down leaves the state usable for a retry within its lifetime (OAUTH_STATE_TTL_SECONDS). A state of
      // another workspace is refused and left as it was.
      await db.transaction().execute(async (tx) => {
        const row = await store.crossTenantLockOAuthState(tx, hash);
        if (!row || row.used_at !== null || row.expires_at.getTime() <= Date.now() || row.provider !== p.id) throw invalidState();
        if (row.tenant_id !== actor.tenantId) {
          throw refuse('oauth_state_mismatch', 'This state was minted for another workspace; complete the connection from the workspace that started it.');
        }
        let tokens: TokenSet;
        let address: string;
        try {
          tokens = await p.exchangeCode(input.code, redirectUri(p.id));
          address = await p.emailAddress(tokens.accessToken);
        } catch (err) {
          if (err instanceof ProviderError) throw providerFailed(err);
          throw err;
        }
        await store.consumeState(tx, actor.tenantId, hash);
        await store.upsertMailbox(tx, actor.tenantId, {
          provider: p.id,
          email_address: address,
          scopes: tokens.scopes,
          access_token_sealed: sealer.seal(tokens.accessToken, ctx(actor.tenantId, 'access')),
          refresh_token_sealed: tokens.refreshToken ? sealer.seal(tokens.refreshToken, ctx(actor.tenantId, 'refresh')) : null,
          access_expires_at: tokens.expiresAt,
        });
      });
      // Polled mail enters through the email channel's ingest path, so the channel must be connected.
      await channels.ensure(actor.tenantId, 'email');
      await check(actor.tenantId, true);
      return read(actor.tenantId);
    },

    status: (actor: Principal) => read(actor.tenantId),

    /** Runs the check on the worker and waits for it; on a slow provider the stored status is returned. */
    async refresh(actor: Principal) {
      if (await store.getMailbox(db, actor.tenantId)) {
        await queues.enqueueAndAwait('mailbox.refresh', { tenant_id: actor.tenantId }, { waitMs: config.JOB_WAIT_MS });
      }
      return read(actor.tenantId);
    },

    poll,
    sendReply,
    sender,
    tokenForFiles,

    /** The `mailbox.refresh` job. */
    check,

    /** The scheduled sweep: one refresh per mailbox due, deduplicated by job id so none is queued twice. */
    async sweep() {
      await store.crossTenantPruneOAuthStates(db, new Date(Date.now() - 24 * 3600 * 1000));
      // Each job carries when the sweep saw the mailbox due: a check that finished after that already answered
      // it. The job's own creation time would not do: a check finishing between this read and the enqueue
      // (its job gone, so the job id no longer dedupes) made the provider be asked twice.
      const due = await store.crossTenantDueForRefresh(db, config.MAILBOX_REFRESH_SECONDS);
      for (const d of due) await queues.enqueue('mailbox.refresh', { tenant_id: d.tenant_id, due_as_of: d.as_of.toISOString() });
      const polls = await store.crossTenantDueForPoll(db, config.MAILBOX_POLL_SECONDS);
      for (const tenantId of polls) await queues.enqueue('mailbox.poll', { tenant_id: tenantId });
      return { refreshes: due.length, polls: polls.length };
    },
  };
}

export type MailboxService = ReturnType<typeof createMailboxService>;
