import MailComposer from 'nodemailer/lib/mail-composer';
import type { Readable } from 'node:stream';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { MailboxRow } from '../../db/types';
import type { SendResult } from '../outbound/types';
import { quotaCheck } from './health';
import { ProviderError, type MailProvider, type MailProviderId, type ReplyTarget } from './providers';
import * as store from './store';
import type { StoredMailboxRef } from './store';
import type { MailboxTokens } from './tokens';

/**
 * Sending replies through the connected mailbox (issue 35, split out of the mailbox service), for the outbound
 * pipeline (src/domains/outbound), which asks `sender` who sends and `sendReply` to send. Each send records the
 * `daily_send_quota` check.
 */

/** The customer's message to answer in the mailbox, when the connected mailbox is the one that polled it. */
function replyTarget(m: MailboxRow, ref: StoredMailboxRef | null): ReplyTarget | undefined {
  if (!ref || typeof ref.message_id !== 'string' || ref.message_id === '') return undefined;
  // A reconnected mailbox of another account or provider does not hold the message: plain headers then.
  if (ref.provider !== m.provider || typeof ref.address !== 'string' || ref.address.toLowerCase() !== m.email_address.toLowerCase()) return undefined;
  return { messageId: ref.message_id, ...(typeof ref.thread_id === 'string' && ref.thread_id ? { threadId: ref.thread_id } : {}) };
}

export function createMailboxSending(deps: {
  db: Db;
  config: Pick<ConfigSection<'mailbox'>, 'MAILBOX_DAILY_SEND_LIMIT'>;
  providers: Record<MailProviderId, MailProvider>;
  tokens: MailboxTokens;
}) {
  const { db, config, providers, tokens } = deps;

  /**
   * One reply through the connected mailbox, with the thread's headers: our Message-ID (on the mailbox's
   * domain), In-Reply-To and References. Undefined when no mailbox can send (the pipeline then tries the next
   * sender). The daily quota blocks rather than sends.
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
      attachments?: { name: string; contentType: string; open(): Promise<Readable> }[];
    },
  ): Promise<SendResult | undefined> {
    const m = await store.getMailbox(db, tenantId);
    if (!m || !m.connected || !m.sendable) return undefined;
    const sent = await store.sentToday(db, tenantId);
    if (sent >= config.MAILBOX_DAILY_SEND_LIMIT) {
      await store.setCheck(db, tenantId, quotaCheck(sent, config.MAILBOX_DAILY_SEND_LIMIT));
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
      const result = await tokens.withToken(m, p, async (token) => {
        try {
          return await p.send(token, text, target);
        } catch (err) {
          // The customer's message or thread is gone from the mailbox since it was polled (deleted, moved):
          // the reply still goes out, threaded for the customer by its In-Reply-To and References.
          if (target && err instanceof ProviderError && err.status === 404) return p.send(token, text);
          throw err;
        }
      });
      await store.setCheck(db, tenantId, quotaCheck(sent + 1, config.MAILBOX_DAILY_SEND_LIMIT));
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

  return { sendReply, sender };
}
