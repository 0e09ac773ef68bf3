import { NoAnswer, NotReached, type ProviderAnswer } from './http';

/**
 * What one send attempt came to, in the terms the outbox needs:
 * - `sent`: the provider took it (its id is what status callbacks name);
 * - `retry`: the provider cannot have it (no connection, a 5xx, a 429): try again after the backoff, or the
 *   provider's own Retry-After when it gave one;
 * - `failed`: the provider refused it for good (a 4xx) — its code and text say why;
 * - `unknown`: the request may have reached the provider and no answer came. Not retried blindly.
 */
export type SendResult =
  | { outcome: 'sent'; providerMessageId: string; segments?: number; messageId?: string; threadId?: string }
  | { outcome: 'retry'; reason: string; code?: string; retryAfterMs?: number }
  | { outcome: 'failed'; reason: string; code?: string; unreachable?: boolean }
  | { outcome: 'unknown'; reason: string }
  /** Not attempted: a limit of ours says wait (the mailbox's daily quota); an agent sends it again later. */
  | { outcome: 'blocked'; reason: string };

/** A reply as a sender needs it: the text, whom it goes to, and what it answers. */
export interface OutgoingReply {
  eventId: string;
  text: string;
  /** The handle the customer wrote from: email address, E.164 phone, WhatsApp id, Telegram chat id. */
  to: string;
  toName?: string;
  /** SMS: the number the customer wrote to (replies come from it). */
  from?: string;
  /** WhatsApp: the business number the customer wrote to. */
  phoneNumberId?: string;
  /** Telegram: the customer's message this answers (its message_id). */
  replyToMessageId?: number;
  /** WhatsApp: an approved template instead of free-form text. */
  template?: { name: string; language: string; components?: unknown[] };
  /** Email: the subject, this reply's Message-ID, and the thread's ids (oldest first). */
  email?: { subject: string; messageId: string; inReplyTo?: string; references: string[] };
  /** SMS/MMS: links Twilio fetches the reply's files from (signed, short-lived links to this service). */
  mediaUrls?: string[];
  /** Email through Postmark: the reply's files, base64 (Postmark's `Attachments`). */
  emailAttachments?: { Name: string; Content: string; ContentType: string }[];
  /** Where the provider posts status callbacks for this send (Twilio), when the deployment knows its own URL. */
  statusCallbackUrl?: string;
}

export interface SenderSettings {
  POSTMARK_API_URL: string;
  TWILIO_API_URL: string;
  WHATSAPP_API_URL: string;
  WHATSAPP_API_VERSION: string;
  TELEGRAM_API_URL: string;
  OUTBOUND_SEND_TIMEOUT_MS: number;
}

const clip = (s: string) => (s.length > 500 ? `${s.slice(0, 500)}…` : s);

/** What a provider's HTTP status means when its body says nothing more specific. */
export function byStatus(a: ProviderAnswer, reason: string, code: string | undefined, retryAfter: number | undefined): SendResult {
  if (a.status === 429 || a.status >= 500) return { outcome: 'retry', reason: clip(reason), ...(code ? { code } : {}), ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {}) };
  return { outcome: 'failed', reason: clip(reason), ...(code ? { code } : {}) };
}

/** The request's own failure (no answer at all) as a send result. */
export function transportFailure(err: unknown, provider: string): SendResult {
  if (err instanceof NotReached) return { outcome: 'retry', reason: `${provider} ${err.message}` };
  if (err instanceof NoAnswer) return { outcome: 'unknown', reason: `${provider}: ${err.message}; it may have sent the message` };
  throw err;
}

export { clip };
