import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import { commitWithoutFlush, type Db, type Executor } from '../../db';
import type { OutboundMessageRow, OutboundState, TicketRow } from '../../db/types';
import { notFound, refuse } from '../../lib/errors';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import type { ChannelService } from '../channels/service';
import type { Principal } from '../identity/principal';
import type { MailboxService } from '../mailbox/service';
import { DELIVERY_ACTOR, eventFor, type OutboundSink, type RecordedDelivery, type ReplyTemplate, type TicketCommands } from '../tickets/commands';
import { sendPostmark } from './senders/postmark';
import { sendTelegram, sendTelegramDocument } from './senders/telegram';
import { sendTwilio } from './senders/twilio';
import { sendWhatsapp, uploadWhatsappMedia, whatsappMediaType } from './senders/whatsapp';
import type { AttachmentSummary } from '../files/types';
import { assertSendable, MAX_CAPTION, readWhole, type EmailVia, type OutgoingFile } from './attachments';
import * as store from './store';
import type { OutgoingReply, SendResult } from './types';

/** The channels a reply is delivered on; every other ticket source (api, web, channels without a sender) keeps its reply. */
const SENDING = new Set(['email', 'sms', 'whatsapp', 'telegram', 'web_chat']);

/** The longest text each provider carries in one message (Twilio's Body, WhatsApp's text.body, Telegram's text). */
const MAX_TEXT: Record<string, number> = { sms: 1600, whatsapp: 4096, telegram: 4096 };

/** WhatsApp's customer service window: free-form replies only within 24 hours of the customer's last message. */
const WHATSAPP_WINDOW_MS = 24 * 3600 * 1000;

const CHANNEL_NAME: Record<string, string> = { email: 'email', sms: 'SMS', whatsapp: 'WhatsApp', telegram: 'Telegram', web_chat: 'web chat' };

/** How far along a delivery is; a status callback only ever moves it forward. */
const RANK: Record<OutboundState, number> = { queued: 0, sending: 0, blocked: 0, unknown: 0, failed: 0, sent: 1, delivered: 2, read: 3 };

/** A retry's wait: the base doubling per attempt, at most an hour, and never sooner than the provider asked. */
const backoffMs = (base: number, attempts: number, retryAfterMs?: number) => Math.min(3600_000, Math.max(base * 2 ** Math.max(0, attempts - 1), retryAfterMs ?? 0));

/** What the timeline shows of one delivery move. */
function deliveryMeta(row: Pick<OutboundMessageRow, 'event_id' | 'channel' | 'attempts'>, state: OutboundState | 'retrying', extra: Record<string, unknown> = {}) {
  return { reply_event_id: row.event_id, channel: row.channel, state, attempts: row.attempts, ...extra };
}

/**
 * The outbox's writing side, handed to the tickets domain: a reply on a channel ticket writes its pending send
 * in the reply's own transaction (a queue that is down loses nothing: the sweep re-queues it), and refuses
 * what the provider would refuse anyway, before anything is stored.
 */
export function createOutboundSink(deps: {
  queues: QueueHub;
  logger: Logger;
  /** Twilio fetches MMS media from signed links to this service: without a public URL an SMS reply carries no file. */
  publicBaseUrl?: string | undefined;
  /** How an email reply of the workspace leaves now (the connected mailbox or Postmark): their size limits differ. */
  emailVia?: (tenantId: string) => Promise<EmailVia>;
}): OutboundSink {
  return {
    async record(tx: Executor, tenantId: string, t: TicketRow, replyEventId: string, reply: { body: string; template?: ReplyTemplate; attachments?: AttachmentSummary[] }): Promise<RecordedDelivery | undefined> {
      const channel = t.source;
      if (!SENDING.has(channel)) return undefined;
      if (reply.template && channel !== 'whatsapp') throw refuse('template_not_allowed', `A template reply is a WhatsApp feature; this ticket came in by ${channel}.`);
      const files = reply.attachments ?? [];
      if (files.length > 0 && reply.template) throw refuse('attachment_not_sendable', 'A WhatsApp template reply carries no attachments; send the files in a free-form reply.');
      if (files.length > 0) {
        assertSendable(channel, files, { publicBaseUrl: deps.publicBaseUrl, ...(channel === 'email' && deps.emailVia ? { emailVia: await deps.emailVia(tenantId) } : {}) });
      }
      const max = MAX_TEXT[channel];
      if (!reply.template && max !== undefined && reply.body.length > max) {
        throw refuse('reply_too_long', `A ${CHANNEL_NAME[channel]} message holds at most ${max} characters; this reply has ${reply.body.length}.`, [{ path: 'body.body', message: `at most ${max} characters on ${channel}` }]);
      }
      if (channel === 'whatsapp' && !reply.template) await assertWindowOpen(tx, tenantId, t.id);
      if (channel === 'web_chat') {
        // Nothing to send: the visitor's widget reads the reply (GET /v1/web-chat/messages) from the moment it commits.
        await store.insertOutbound(tx, tenantId, { event_id: replyEventId, ticket_id: t.id, channel, recipient: t.conversation_key, state: 'sent', sender: 'web_chat' });
        return { channel, state: 'sent', dispatch: false, detail: "Available to the visitor's chat widget.", meta: { reply_event_id: replyEventId, channel, state: 'sent', attempts: 0, sender: 'web_chat' } };
      }
      await store.insertOutbound(tx, tenantId, {
        event_id: replyEventId,
        ticket_id: t.id,
        channel,
        recipient: t.conversation_key,
        state: 'queued',
        ...(reply.template ? { template: { ...reply.template } } : {}),
      });
      return { channel, state: 'queued', dispatch: true, detail: `Queued for sending by ${CHANNEL_NAME[channel]}.`, meta: { reply_event_id: replyEventId, channel, state: 'queued', attempts: 0 } };
    },
    async dispatch(tenantId, replyEventId) {
      try {
        await deps.queues.enqueue('outbound.send', { tenant_id: tenantId, event_id: replyEventId });
      } catch (err) {
        deps.logger.warn({ tenant_id: tenantId, event_id: replyEventId, err: (err as Error).message }, 'reply send not queued; the outbound sweep will queue it');
      }
    },
  };
}

/** Past 24 hours after the customer's last message (by WhatsApp's own timestamp), only a template goes. */
async function assertWindowOpen(tx: Executor, tenantId: string, ticketId: string) {
  const last = await store.lastInbound(tx, tenantId, ticketId);
  const at = last ? (last.sent_at ? Date.parse(last.sent_at) : last.created_at.getTime()) : Number.NaN;
  const age = Date.now() - at;
  if (Number.isNaN(at) || age > WHATSAPP_WINDOW_MS) {
    const since = Number.isNaN(at) ? 'The customer has not written on WhatsApp on this ticket' : `The customer last wrote on WhatsApp ${Math.floor(age / 3600_000)} hours ago`;
    throw refuse('whatsapp_window_closed', `${since}; past 24 hours only an approved template may be sent (send template: {name, language}).`);
  }
}

type Claimed = OutboundMessageRow & { claimed_at: Date };

/**
 * The outbox's sending side: one job per attempt claims the reply's row (committed before any request leaves),
 * asks the channel's sender, and settles the row with what came of it, writing the delivery on the timeline.
 * Status callbacks move a sent reply on (delivered, read, failed); an agent can send a failed or unknown one again.
 */
export function createOutboundService(deps: {
  db: Db;
  config: ConfigSection<'outbound' | 'http'>;
  queues: QueueHub;
  logger: Logger;
  channels: Pick<ChannelService, 'credentials'>;
  mailbox: Pick<MailboxService, 'sendReply' | 'sender'>;
  tickets: Pick<TicketCommands, 'recordEvents' | 'rememberMessageIds'>;
  sink: OutboundSink;
  /** A reply's stored files, and signed links to them (Twilio fetches MMS media from those). */
  files?: {
    filesOfReply(tenantId: string, eventId: string): Promise<(OutgoingFile & { state: string })[]>;
    signLink(tenantId: string, attachmentId: string, ttlSeconds: number): string;
  };
}) {
  const { db, config, queues, logger, channels, mailbox, tickets } = deps;

  /**
   * A reply sent in several provider messages (WhatsApp, Telegram: one message per file, the text as the first
   * file's caption when it fits): each part the provider acknowledged is recorded on the outbox row (committed)
   * before the next goes, and a later attempt skips the recorded ones, so no part reaches the customer twice.
   * The reply's provider message id is its first part's.
   */
  async function sendParts(tenantId: string, row: Claimed, parts: (() => Promise<SendResult>)[], leaving: () => void): Promise<SendResult> {
    const done = new Map((row.parts ?? []).map((p) => [p.index, p.provider_message_id]));
    for (let i = 0; i < parts.length; i++) {
      if (done.has(i)) continue;
      leaving();
      const r = await parts[i]!();
      if (r.outcome !== 'sent') {
        const sent = done.size;
        return sent > 0 && 'reason' in r ? { ...r, reason: `${r.reason} (part ${i + 1} of ${parts.length}; ${sent} already sent, not sent again)` } : r;
      }
      if (!(await store.recordPart(db, tenantId, row.event_id, row.claimed_at, { index: i, provider_message_id: r.providerMessageId }))) {
        return { outcome: 'unknown', reason: 'the claim on this reply was lost while its parts were being sent' };
      }
      done.set(i, r.providerMessageId);
    }
    return { outcome: 'sent', providerMessageId: done.get(0) ?? [...done.values()][0] ?? '' };
  }

  /** How long a signed link to a reply's file lives: long enough for Twilio to fetch it (and retry), no longer. */
  const LINK_TTL_SECONDS = 30 * 60;

  const deliveryEvent = (tx: Executor, tenantId: string, ticketId: string, detail: string, meta: Record<string, unknown>) =>
    tickets.recordEvents(tx, tenantId, [eventFor(DELIVERY_ACTOR, ticketId, 'delivery', detail, meta)]);

  const hookUrl = (channel: string, token: string | null) => (config.PUBLIC_BASE_URL && token ? `${config.PUBLIC_BASE_URL.replace(/\/$/, '')}/v1/hooks/${channel}/${token}` : undefined);

  const str = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);

  /** Asks the channel's sender; `leaving` is called just before a request may leave (past it, a crash is `unknown`). */
  async function attempt(tenantId: string, row: Claimed, leaving: () => void): Promise<SendResult & { sender?: string }> {
    const ctx = await store.replyContext(db, tenantId, row.event_id);
    if (!ctx) return { outcome: 'failed', reason: 'The reply no longer exists.' };
    const creds = await channels.credentials(tenantId, row.channel);
    const name = CHANNEL_NAME[row.channel] ?? row.channel;
    if (row.channel !== 'email' && (!creds || !creds.enabled)) return { outcome: 'failed', reason: `The ${name} channel is not connected or is disabled; connect it, then send the reply again.` };
    const values = creds?.values ?? {};
    const reply: OutgoingReply = { eventId: row.event_id, text: ctx.body, to: '' };
    const files = deps.files ? await deps.files.filesOfReply(tenantId, row.event_id) : [];
    const lost = files.find((f) => f.state !== 'stored');
    if (lost) return { outcome: 'failed', reason: `The attached file ${lost.name} is no longer stored (${lost.state}); send the reply again without it.` };
    const key = ctx.conversation_key ?? '';
    const sep = key.indexOf('|');

    switch (row.channel) {
      case 'email': {
        if (!ctx.email) return { outcome: 'failed', reason: 'The customer has no email address to reply to.' };
        const subject = ctx.lastInboundSubject ?? ctx.subject;
        const references = ctx.thread.slice(-20);
        // The connected mailbox first: the answer then sits in the team's own Sent folder and thread.
        const via = await mailbox.sender(tenantId);
        if (via) {
          leaving();
          const r = await mailbox.sendReply(tenantId, {
            eventId: row.event_id,
            to: ctx.email,
            toName: ctx.display_name,
            subject,
            text: ctx.body,
            inReplyTo: ctx.lastInboundMessageId,
            references,
            mailboxRef: ctx.lastInboundMailbox,
            ...(files.length > 0 ? { attachments: files } : {}),
          });
          if (r) return { ...r, sender: via };
        }
        const token = str(values.server_token);
        const from = str(values.from_address);
        if (!token || !from) return { outcome: 'failed', reason: 'No sender for email: connect a mailbox, or set server_token and from_address on the email channel, then send the reply again.' };
        const messageId = `${row.event_id}@${from.split('@')[1] ?? 'mail.invalid'}`;
        // Postmark takes files as base64 in its JSON: read whole, within its 10 MB limit (checked at write time).
        const emailAttachments = [];
        for (const f of files) emailAttachments.push({ Name: f.name, Content: (await readWhole(f)).toString('base64'), ContentType: f.contentType });
        leaving();
        const r = await sendPostmark(config, { server_token: token, from_address: from, ...(str(values.from_name) ? { from_name: str(values.from_name)! } : {}) }, {
          ...reply,
          to: ctx.email,
          toName: ctx.display_name,
          email: { subject: /^re:/i.test(subject) ? subject : `Re: ${subject}`, messageId, ...(ctx.lastInboundMessageId ? { inReplyTo: ctx.lastInboundMessageId } : {}), references },
          ...(emailAttachments.length > 0 ? { emailAttachments } : {}),
        });
        return { ...r, sender: 'postmark' };
      }
      case 'sms': {
        // The conversation is (customer's number | the number they wrote to): the answer comes from the latter.
        const to = sep > 0 ? key.slice(0, sep) : (await store.handleOf(db, tenantId, ctx.customer_id, 'phone'))?.handle;
        const sid = str(values.account_sid);
        const auth = str(values.auth_token);
        if (!to) return { outcome: 'failed', reason: 'The customer has no phone number to reply to.' };
        if (!sid || !auth || (!str(values.phone_number) && !str(values.messaging_service_sid) && sep <= 0)) {
          return { outcome: 'failed', reason: 'The SMS channel lacks account_sid, auth_token and a phone_number or messaging_service_sid; set them, then send the reply again.' };
        }
        let mediaUrls: string[] = [];
        if (files.length > 0) {
          if (!config.PUBLIC_BASE_URL || !deps.files) return { outcome: 'failed', reason: 'An SMS reply with attachments needs PUBLIC_BASE_URL: Twilio fetches each file from a signed link to this service. Set it, then send the reply again.' };
          const base = config.PUBLIC_BASE_URL.replace(/\/$/, '');
          mediaUrls = files.map((f) => `${base}/v1/files/${deps.files!.signLink(tenantId, f.id, LINK_TTL_SECONDS)}`);
        }
        leaving();
        const callback = hookUrl('sms', creds?.inboundToken ?? null);
        const r = await sendTwilio(
          config,
          { account_sid: sid, auth_token: auth, ...(str(values.phone_number) ? { phone_number: str(values.phone_number)! } : {}), ...(str(values.messaging_service_sid) ? { messaging_service_sid: str(values.messaging_service_sid)! } : {}) },
          { ...reply, to, ...(sep > 0 ? { from: key.slice(sep + 1) } : {}), ...(callback ? { statusCallbackUrl: callback } : {}), ...(mediaUrls.length > 0 ? { mediaUrls } : {}) },
        );
        return { ...r, sender: 'twilio' };
      }
      case 'whatsapp': {
        const apiKey = str(values.api_key);
        if (!apiKey) return { outcome: 'failed', reason: 'The WhatsApp channel lacks api_key (and phone_number_id); set them, then send the reply again.' };
        const number = sep > 0 ? key.slice(0, sep) : str(values.phone_number_id);
        const to = sep > 0 ? key.slice(sep + 1) : (await store.handleOf(db, tenantId, ctx.customer_id, 'whatsapp_id'))?.handle;
        if (!number || !to) return { outcome: 'failed', reason: 'The customer has no WhatsApp number to reply to.' };
        if (to.startsWith('group:')) return { outcome: 'failed', reason: 'Replies to WhatsApp groups are not supported; answer the customer one to one.' };
        const template = row.template as ReplyTemplate | null;
        if (files.length > 0 && !template) {
          // The text as the first file's caption when it fits, else its own message first; one message per file.
          const caption = ctx.body.length <= MAX_CAPTION ? ctx.body : undefined;
          const parts: (() => Promise<SendResult>)[] = caption === undefined ? [() => sendWhatsapp(config, { api_key: apiKey }, { ...reply, to, phoneNumberId: number })] : [];
          files.forEach((f, i) =>
            parts.push(async () => {
              const up = await uploadWhatsappMedia(config, { api_key: apiKey }, number, f);
              if (up.outcome !== 'sent') return up;
              const type = whatsappMediaType(f);
              return sendWhatsapp(config, { api_key: apiKey }, { ...reply, to, phoneNumberId: number, media: { type, id: up.providerMessageId, ...(i === 0 && caption ? { caption } : {}), filename: f.name } });
            }),
          );
          const r = await sendParts(tenantId, row, parts, leaving);
          return { ...r, sender: 'whatsapp' };
        }
        leaving();
        const r = await sendWhatsapp(config, { api_key: apiKey }, { ...reply, to, phoneNumberId: number, ...(template ? { template } : {}) });
        return { ...r, sender: 'whatsapp' };
      }
      case 'telegram': {
        const token = str(values.bot_token);
        if (!token) return { outcome: 'failed', reason: 'The Telegram channel lacks bot_token; set it, then send the reply again.' };
        if (!key) return { outcome: 'failed', reason: 'The ticket has no Telegram chat to reply to.' };
        // The customer's last message, `chat:message_id` as the adapter names it: the answer quotes it.
        const lastId = ctx.lastInbound?.provider_message_id ?? '';
        const messageId = Number(lastId.slice(lastId.lastIndexOf(':') + 1));
        const quote = Number.isSafeInteger(messageId) && messageId > 0 ? { replyToMessageId: messageId } : {};
        if (files.length > 0) {
          // One sendDocument per file, the first quoting the customer and captioned with the text when it fits
          // (1024 characters); a longer text goes first by sendMessage. Each acknowledged part is recorded.
          const caption = ctx.body.length <= MAX_CAPTION ? ctx.body : undefined;
          const parts: (() => Promise<SendResult>)[] = caption === undefined ? [() => sendTelegram(config, { bot_token: token }, { ...reply, to: key, ...quote })] : [];
          files.forEach((f, i) =>
            parts.push(() => sendTelegramDocument(config, { bot_token: token }, { to: key, file: f, ...(i === 0 && caption !== undefined ? { caption, ...quote } : {}) })),
          );
          const r = await sendParts(tenantId, row, parts, leaving);
          return { ...r, sender: 'telegram' };
        }
        leaving();
        const r = await sendTelegram(config, { bot_token: token }, { ...reply, to: key, ...quote });
        return { ...r, sender: 'telegram' };
      }
      default:
        return { outcome: 'failed', reason: `No sender exists for ${row.channel}.` };
    }
  }

  /** What the timeline says of a settled attempt. */
  function detailOf(r: SendResult & { sender?: string }, row: Claimed, nextInMs?: number): string {
    switch (r.outcome) {
      case 'sent':
        return `Sent by ${r.sender ?? row.channel}${r.segments && r.segments > 1 ? ` (${r.segments} SMS segments)` : ''}.`;
      case 'retry':
        return `Not sent yet: ${r.reason}. Attempt ${row.attempts} of ${config.OUTBOUND_ATTEMPTS}; retrying in ${Math.ceil((nextInMs ?? 0) / 1000)} s.`;
      case 'unknown':
        return `Unknown whether it was sent: ${r.reason}. Not retried automatically, so the customer cannot get it twice; check with the customer, or send it again (POST /v1/tickets/{ticket_id}/deliveries/{reply_event_id}/retry).`;
      default:
        return r.reason;
    }
  }

  /** Writes an attempt's outcome, if the claim is still current; returns the next attempt's delay when one is due. */
  async function settle(tenantId: string, row: Claimed, r: SendResult & { sender?: string }): Promise<number | undefined> {
    const retrying = r.outcome === 'retry' && row.attempts < config.OUTBOUND_ATTEMPTS;
    const nextInMs = retrying ? backoffMs(config.OUTBOUND_RETRY_BASE_MS, row.attempts, r.outcome === 'retry' ? r.retryAfterMs : undefined) : undefined;
    const state: OutboundState = r.outcome === 'sent' ? 'sent' : retrying ? 'queued' : r.outcome === 'retry' ? 'failed' : r.outcome;
    const detail = r.outcome === 'retry' && !retrying ? `Not sent: ${r.reason}. Gave up after ${row.attempts} attempts.` : detailOf(r, row, nextInMs);
    const code = 'code' in r && r.code ? r.code : null;
    return db.transaction().execute(async (tx) => {
      // Lost in a database crash, a settlement leaves the row `sending`, which the sweep declares `unknown`:
      // safe (never sent twice), so it need not wait for the disk like the claim before it must (issue 33 bench).
      await commitWithoutFlush(tx);
      const settled = await store.settleClaim(tx, tenantId, row.event_id, row.claimed_at, {
        state,
        ...(r.sender ? { sender: r.sender } : {}),
        ...(r.outcome === 'sent'
          ? { provider_message_id: r.providerMessageId, message_id: r.messageId ?? null, segments: r.segments ?? null, last_error: null, error_code: null, sent: true }
          : { last_error: detail, error_code: code }),
        next_attempt_at: nextInMs !== undefined ? new Date(Date.now() + nextInMs) : null,
      });
      if (!settled) return undefined;
      const extra = {
        ...(r.sender ? { sender: r.sender } : {}),
        ...(r.outcome === 'sent'
          ? { provider_message_id: r.providerMessageId, ...(r.segments ? { segments: r.segments } : {}), ...(r.messageId ? { message_id: r.messageId } : {}), ...(r.threadId ? { provider_thread_id: r.threadId } : {}) }
          : {}),
        ...(code ? { error_code: code } : {}),
      };
      await deliveryEvent(tx, tenantId, row.ticket_id, detail, deliveryMeta(row, retrying ? 'retrying' : state, extra));
      // The customer's answer to this email threads back into the ticket by its Message-ID.
      if (r.outcome === 'sent' && r.messageId) await tickets.rememberMessageIds(tx, tenantId, [{ message_id: r.messageId, ticket_id: row.ticket_id }]);
      if (r.outcome === 'failed' && r.unreachable) {
        const ctx = await store.replyContext(tx, tenantId, row.event_id);
        if (ctx) await store.markUnreachable(tx, tenantId, ctx.customer_id, row.channel === 'telegram' ? 'telegram_user' : row.channel, r.reason);
      }
      return nextInMs;
    });
  }

  /** The `outbound.send` job. */
  async function send(tenantId: string, eventId: string): Promise<{ state: string }> {
    const claimed = await store.claimOutbound(db, tenantId, eventId);
    if (!claimed) return { state: 'not_due' };
    const row = claimed as Claimed;
    let left = false;
    let result: SendResult & { sender?: string };
    try {
      result = await attempt(tenantId, row, () => (left = true));
    } catch (err) {
      // Our own failure (the database, a bug). Before any request left, the claim goes back and the job's retry
      // sends; after, whether the provider has it is unknown.
      if (!left) {
        await store.settleClaim(db, tenantId, eventId, row.claimed_at, { state: 'queued', attempts: row.attempts - 1 });
        throw err;
      }
      logger.error({ tenant_id: tenantId, event_id: eventId, err: (err as Error).message }, 'reply send failed after its request left');
      result = { outcome: 'unknown', reason: 'the worker failed while the provider was being asked' };
    }
    const nextInMs = await settle(tenantId, row, result);
    if (nextInMs !== undefined) {
      await queues
        .enqueue('outbound.send', { tenant_id: tenantId, event_id: eventId, attempt: row.attempts }, { delayMs: nextInMs })
        .catch((err: Error) => logger.warn({ tenant_id: tenantId, event_id: eventId, err: err.message }, 'retry not queued; the outbound sweep will queue it'));
    }
    return { state: result.outcome };
  }

  /** Status callbacks: each names a provider message id; a delivery only moves forward (or to failed from sent). */
  async function applyStatuses(tenantId: string, channel: string, updates: { providerMessageId: string; state: 'sent' | 'delivered' | 'read' | 'failed'; errorCode?: string; errorText?: string }[]): Promise<number> {
    if (updates.length === 0) return 0;
    return db.transaction().execute(async (tx) => {
      const rows = new Map((await store.lockByProviderIds(tx, tenantId, channel, [...new Set(updates.map((u) => u.providerMessageId))])).map((r) => [r.provider_message_id!, r]));
      let moved = 0;
      for (const u of updates) {
        const row = rows.get(u.providerMessageId);
        if (!row) continue;
        const forward = u.state === 'failed' ? row.state === 'sent' || row.state === 'delivered' : RANK[u.state] > RANK[row.state];
        if (!forward) continue;
        const reason = u.state === 'failed' ? `Not delivered: ${u.errorText ?? 'the provider reported a failure'}${u.errorCode ? ` (code ${u.errorCode})` : ''}.` : null;
        await store.moveState(tx, tenantId, row.event_id, { state: u.state, ...(reason ? { last_error: reason, error_code: u.errorCode ?? null } : {}) });
        await deliveryEvent(
          tx,
          tenantId,
          row.ticket_id,
          reason ?? (u.state === 'read' ? 'Read by the customer.' : u.state === 'delivered' ? 'Delivered to the customer.' : 'Sent.'),
          deliveryMeta(row, u.state, { provider_message_id: u.providerMessageId, ...(row.sender ? { sender: row.sender } : {}), ...(u.errorCode ? { error_code: u.errorCode } : {}) }),
        );
        rows.set(u.providerMessageId, { ...row, state: u.state });
        moved++;
      }
      return moved;
    });
  }

  const present = (r: OutboundMessageRow) => ({
    reply_event_id: r.event_id,
    ticket_id: r.ticket_id,
    channel: r.channel,
    state: r.state,
    sender: r.sender,
    provider_message_id: r.provider_message_id,
    attempts: r.attempts,
    segments: r.segments,
    parts: [...(r.parts ?? [])].sort((a, b) => a.index - b.index),
    error_code: r.error_code,
    last_error: r.last_error,
    sent_at: r.sent_at ? iso(r.sent_at) : null,
    delivered_at: r.delivered_at ? iso(r.delivered_at) : null,
    read_at: r.read_at ? iso(r.read_at) : null,
    next_attempt_at: r.next_attempt_at ? iso(r.next_attempt_at) : null,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  });

  return {
    send,
    applyStatuses,

    /** GET /v1/tickets/{ticket_id}/deliveries. */
    async list(actor: Principal, ticketId: string) {
      const rows = await store.ticketDeliveries(db, actor.tenantId, ticketId);
      return { deliveries: rows.map(present) };
    },

    /**
     * An agent sends a failed, blocked or unknown reply again: a new attempt, queued like the first. For an
     * unknown one the agent has judged the customer did not get it; the window rule applies again.
     */
    async retry(actor: Principal, ticketId: string, eventId: string) {
      const row = await db.transaction().execute(async (tx) => {
        const before = await store.getOutbound(tx, actor.tenantId, eventId);
        if (!before || before.ticket_id !== ticketId) throw notFound('delivery');
        if (before.channel === 'whatsapp' && !before.template) await assertWindowOpen(tx, actor.tenantId, ticketId);
        const row = await store.requeueOutbound(tx, actor.tenantId, eventId, ['failed', 'blocked', 'unknown']);
        if (!row) throw refuse('delivery_not_retryable', `This reply is ${before.state}; only a failed, blocked or unknown delivery can be sent again.`);
        await deliveryEvent(tx, actor.tenantId, ticketId, `Queued again for sending by ${CHANNEL_NAME[row.channel] ?? row.channel}, at an agent's request.`, deliveryMeta(row, 'queued', { retried_by: actor.userId }));
        return row;
      });
      await queues.enqueue('outbound.send', { tenant_id: actor.tenantId, event_id: eventId, attempt: row.attempts }).catch(() => undefined);
      return present(row);
    },

    /**
     * The scheduled sweep: a send whose job was lost (Redis down at commit) is queued late rather than never,
     * and a claim held past OUTBOUND_CLAIM_SECONDS (its worker died mid-send) becomes `unknown`.
     */
    async sweep() {
      const waiting = await store.crossTenantStaleOutbound(db, 60);
      for (const o of waiting) await queues.enqueue('outbound.send', { tenant_id: o.tenant_id, event_id: o.event_id, attempt: o.attempts });
      const abandoned = await store.crossTenantAbandonedClaims(db, config.OUTBOUND_CLAIM_SECONDS * 1000);
      for (const a of abandoned) {
        const row = await store.getOutbound(db, a.tenant_id, a.event_id);
        if (!row || row.state !== 'sending') continue;
        await settle(a.tenant_id, { ...row, claimed_at: a.claimed_at }, { outcome: 'unknown', reason: 'the worker sending it stopped before the provider answered' });
      }
      return { requeued: waiting.length, unknown: abandoned.length };
    },
  };
}

export type OutboundService = ReturnType<typeof createOutboundService>;
