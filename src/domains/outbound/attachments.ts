import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { refuse } from '../../lib/errors';
import type { AttachmentSummary } from '../files/types';

/**
 * Replies carry their attachments (issue 34, part 3): each channel's own limits, checked when the reply is
 * written (in its transaction, before anything is committed), and the streamed multipart bodies the Telegram and
 * WhatsApp uploads are. The figures are the providers' documented ones, in decimal megabytes where the provider
 * says "MB" (the stricter reading):
 *
 * - Postmark: "The maximum total message size, including attachments, is 10 MB", and a list of forbidden file
 *   extensions (postmarkapp.com/developer/user-guide/send-email-with-api/send-with-attachments; /support/article/
 *   1056-what-are-the-attachment-and-email-size-limits).
 * - A connected mailbox (Gmail, Microsoft Graph): 25 MiB per message, our own cap (Gmail's sending limit is 25 MB;
 *   Graph's sendMail takes up to the mailbox's limit, 25 MB by default for Exchange Online outbound messages
 *   after its own encoding, so the cap is on the raw file bytes).
 * - Twilio MMS: "up to 10 media files … total size of all attached media must be less than 5 MB"
 *   (twilio.com/docs/messaging/guides/accepted-mime-types).
 * - WhatsApp Cloud API (developers.facebook.com/docs/whatsapp/cloud-api/reference/media#supported-media-types):
 *   image image/jpeg, image/png up to 5 MB; document (text/plain, PDF, Word, Excel, PowerPoint) up to 100 MB.
 * - Telegram Bot API (core.telegram.org/bots/api#sending-files): "Post the file using multipart/form-data …
 *   50 MB max size for other files" through sendDocument; a caption is at most 1024 characters.
 */

export const MB = 1000 * 1000;
export const MAILBOX_MAX_BYTES = 25 * 1024 * 1024;
export const POSTMARK_MAX_BYTES = 10 * MB;
export const TWILIO_MAX_BYTES = 5 * MB;
export const TWILIO_MAX_MEDIA = 10;
export const WHATSAPP_IMAGE_MAX_BYTES = 5 * MB;
export const WHATSAPP_DOCUMENT_MAX_BYTES = 100 * MB;
export const TELEGRAM_MAX_BYTES = 50 * MB;
/** Telegram's and WhatsApp's caption limit: a longer reply text goes as its own message before the files. */
export const MAX_CAPTION = 1024;

/** Postmark refuses these extensions outright (its documented list). */
const POSTMARK_FORBIDDEN = new Set(
  'vbs exe bin bat chm com cpl crt hlp hta inf ins isp jse lnk mdb pcd pif reg scr sct shs vbe vba wsf wsh wsl msc msi msp mst'.split(' '),
);
export const WHATSAPP_IMAGE_TYPES = new Set(['image/jpeg', 'image/png']);
const WHATSAPP_DOCUMENT_TYPES = new Set([
  'text/plain',
  'application/pdf',
  'application/msword',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  'application/vnd.ms-excel',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  'application/vnd.ms-powerpoint',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation',
]);

/** How an email reply leaves: the connected mailbox, or Postmark. */
export type EmailVia = 'mailbox' | 'postmark';

type File = Pick<AttachmentSummary, 'name' | 'size' | 'content_type'>;

const notSendable = (detail: string, i: number) => refuse('attachment_not_sendable', detail, [{ path: `body.attachments.${i}`, message: detail }]);
const total = (files: File[]) => files.reduce((n, f) => n + f.size, 0);

/**
 * Refuses (422 attachment_not_sendable, naming the file and the limit) a reply whose files the channel cannot
 * carry. `publicBaseUrl`: Twilio fetches MMS media from a link to this service, so without it nothing is sendable.
 */
export function assertSendable(channel: string, files: File[], opts: { emailVia?: EmailVia; publicBaseUrl?: string | undefined }): void {
  if (files.length === 0) return;
  switch (channel) {
    case 'email': {
      const via = opts.emailVia ?? 'postmark';
      const max = via === 'mailbox' ? MAILBOX_MAX_BYTES : POSTMARK_MAX_BYTES;
      const who = via === 'mailbox' ? 'through the connected mailbox' : 'through Postmark';
      if (via === 'postmark') {
        files.forEach((f, i) => {
          const ext = f.name.includes('.') ? f.name.slice(f.name.lastIndexOf('.') + 1).toLowerCase() : '';
          if (POSTMARK_FORBIDDEN.has(ext)) throw notSendable(`${f.name} cannot go by email through Postmark: it refuses .${ext} files.`, i);
        });
      }
      if (total(files) > max) {
        throw notSendable(`${files.map((f) => `${f.name} (${f.size} bytes)`).join(', ')} cannot go by email ${who}: a message carries at most ${max} bytes of attachments, these are ${total(files)}.`, files.length - 1);
      }
      return;
    }
    case 'sms': {
      if (!opts.publicBaseUrl) throw notSendable(`${files[0]!.name} cannot go by SMS/MMS: Twilio fetches media from a link to this service, and PUBLIC_BASE_URL is not set.`, 0);
      if (files.length > TWILIO_MAX_MEDIA) throw notSendable(`${files[TWILIO_MAX_MEDIA]!.name} cannot go by MMS: a message carries at most ${TWILIO_MAX_MEDIA} media files.`, TWILIO_MAX_MEDIA);
      if (total(files) > TWILIO_MAX_BYTES) {
        throw notSendable(`${files.map((f) => `${f.name} (${f.size} bytes)`).join(', ')} cannot go by MMS: Twilio takes at most ${TWILIO_MAX_BYTES} bytes of media per message, these are ${total(files)}.`, files.length - 1);
      }
      return;
    }
    case 'whatsapp':
      files.forEach((f, i) => {
        if (WHATSAPP_IMAGE_TYPES.has(f.content_type)) {
          if (f.size > WHATSAPP_IMAGE_MAX_BYTES) throw notSendable(`${f.name} (${f.size} bytes) cannot go by WhatsApp: an image (${f.content_type}) is at most ${WHATSAPP_IMAGE_MAX_BYTES} bytes.`, i);
        } else if (!WHATSAPP_DOCUMENT_TYPES.has(f.content_type)) {
          throw notSendable(`${f.name} (${f.content_type}) cannot go by WhatsApp: it takes JPEG and PNG images and text, PDF and Office documents.`, i);
        } else if (f.size > WHATSAPP_DOCUMENT_MAX_BYTES) {
          throw notSendable(`${f.name} (${f.size} bytes) cannot go by WhatsApp: a document is at most ${WHATSAPP_DOCUMENT_MAX_BYTES} bytes.`, i);
        }
      });
      return;
    case 'telegram':
      files.forEach((f, i) => {
        if (f.size > TELEGRAM_MAX_BYTES) throw notSendable(`${f.name} (${f.size} bytes) cannot go by Telegram: a bot uploads files of at most ${TELEGRAM_MAX_BYTES} bytes.`, i);
      });
      return;
    default:
      return;
  }
}

/** A stored file as a sender reads it: streamed from the blob store when it is sent. */
export interface OutgoingFile {
  id: string;
  name: string;
  contentType: string;
  size: number;
  sha256: string | null;
  open(): Promise<Readable>;
}

/** A streamed body of known length (multipart uploads: the file is read from the store while the request goes). */
export interface StreamedBody {
  contentType: string;
  length: number;
  open(): Readable;
}

const quoted = (s: string) => s.replace(/[\r\n]/g, ' ').replace(/["\\]/g, '_');

/**
 * multipart/form-data with text fields and one file, streamed: its length is known from the file's stored size,
 * so it goes with a Content-Length and nothing is held whole in memory.
 */
export function multipartBody(fields: Record<string, string>, file: { field: string; file: OutgoingFile }): StreamedBody {
  const boundary = `----helpdesk${randomBytes(12).toString('hex')}`;
  const head = Object.entries(fields)
    .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${quoted(k)}"\r\n\r\n${v}\r\n`)
    .join('');
  const fileHead = `--${boundary}\r\nContent-Disposition: form-data; name="${quoted(file.field)}"; filename="${quoted(file.file.name)}"\r\nContent-Type: ${file.file.contentType}\r\n\r\n`;
  const tail = `\r\n--${boundary}--\r\n`;
  const pre = Buffer.from(head + fileHead, 'utf8');
  const post = Buffer.from(tail, 'utf8');
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    length: pre.length + file.file.size + post.length,
    open: () =>
      Readable.from(
        (async function* () {
          yield pre;
          const body = await file.file.open();
          for await (const chunk of body) yield chunk as Buffer;
          yield post;
        })(),
        { objectMode: false },
      ),
  };
}

/** A whole file, read into memory: only for Postmark's JSON (base64), which is bounded by its 10 MB limit. */
export async function readWhole(file: OutgoingFile): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of await file.open()) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
