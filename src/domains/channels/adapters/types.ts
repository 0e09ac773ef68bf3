/**
 * A channel adapter turns a provider's own payload into inbound messages. It is pure (no I/O), so the HTTP
 * tier runs it before anything is enqueued or written: a payload it cannot read is refused at the edge.
 */
/**
 * How the worker gets a file's bytes (issue 34): a Postmark attachment by its position in the payload's
 * `Attachments` (the base64 stays in the request, see the ingest edge), a Twilio `MediaUrl{N}` (fetched with the
 * account's credentials, only from Twilio's hosts), a WhatsApp media id (resolved through the Graph media
 * endpoint), a Telegram file id (`getFile`). Adapters only say where a file is; they never fetch it.
 */
export type InboundFileSource =
  | { kind: 'postmark'; index: number }
  | { kind: 'twilio'; url: string }
  | { kind: 'whatsapp'; mediaId: string }
  | { kind: 'telegram'; fileId: string }
  /**
   * Mail polled from the connected mailbox (never an adapter's: the mailbox service lists these). `address` is the
   * mailbox the message was polled from, so a mailbox since reconnected to another account is never asked.
   * Gmail: `attachmentId` (messages.attachments.get), or `partId` for a small part whose data came inline.
   */
  | { kind: 'gmail'; address: string; messageId: string; attachmentId?: string; partId?: string }
  /** Graph: a fileAttachment, read from `…/attachments/{id}/$value`. */
  | { kind: 'graph'; address: string; messageId: string; attachmentId: string };

/** A file a customer's message carries, as the provider declared it (the stored type is sniffed from the bytes). */
export interface InboundFileRef {
  name: string;
  declaredType?: string;
  /** Bytes, when the provider says (Postmark ContentLength, Telegram file_size). */
  size?: number;
  /** Email inline parts: the Content-ID the HTML body's cid: links name. */
  contentId?: string;
  source: InboundFileSource;
}

export interface InboundMessage {
  /** The provider's id for this message: the dedupe key of the ingest ledger (per workspace and channel). */
  providerMessageId: string;
  /** Who sent it, in the channel's handle kind (email address, E.164 phone, chat user id, visitor id). */
  sender: { handle: string; name?: string; email?: string };
  /**
   * Chat channels: the conversation a reply belongs to (e.g. WhatsApp phone_number_id + from, Telegram
   * chat id, SMS From + To). Messages with the same key thread into the sender's open ticket.
   */
  conversationKey?: string;
  /** Email only: the RFC Message-ID of this message, and the ids it replies to (In-Reply-To, References). */
  messageIdHeader?: string;
  /** The Message-ID as the sender wrote it, when its case differs (quoted verbatim in our replies). */
  messageIdAsWritten?: string;
  inReplyTo?: string[];
  /** Email plus-address hash (support+<hash>@…): a ticket reference kept when clients drop headers. */
  mailboxHash?: string;
  subject?: string;
  body: string;
  sentAt?: string;
  /**
   * Email polled from the connected mailbox only (never read from a caller's payload): where the message sits
   * in that mailbox, so a reply can be filed in the customer's conversation there.
   */
  mailbox?: { provider: string; address: string; messageId: string; threadId?: string };
  /**
   * The files the message carries, every one of them, in the provider's order (issue 34). The body keeps a short
   * marker (`[2 attachments: a.pdf, b.png]`, `[image] caption`) so text readers still see something came; the
   * edge caps how many are fetched (FILES_MAX_PER_MESSAGE) and reports the rest as skipped.
   */
  files?: InboundFileRef[];
  /** Set by the ingest edge, never an adapter: files past the ones listed (FILES_MAX_PER_MESSAGE + 100), counted. */
  filesOmitted?: number;
  /**
   * Web chat sessions only (never an adapter): the attachment ids of the visitor's own uploads, checked when the
   * message was posted, which the ingest worker binds to the message's event in its transaction. The uploader is
   * the sender's handle (the visitor id from the token), which payload intake can never claim (`wv_` is refused).
   */
  uploads?: string[];
}

export type ParseResult = { ok: true; messages: InboundMessage[] } | { ok: false; reason: string };

export interface ChannelAdapter {
  /** Parses the verbatim provider payload. Zero messages (e.g. delivery receipts only) is a valid result. */
  parse(payload: unknown): ParseResult;
}
