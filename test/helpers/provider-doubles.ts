import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { createServer, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import busboy from 'busboy';

/**
 * One real HTTP server on 127.0.0.1 (ephemeral port) standing in for the four providers the service replies
 * through (issue 33): Postmark (email API), Twilio (Programmable Messaging), WhatsApp Cloud API (Meta Graph API)
 * and the Telegram Bot API. Each answers its documented send endpoint with the documented shapes, refuses
 * unknown credentials with its own 401 body, can be scripted to fail (`failNext`), and sends the provider-side
 * callbacks signed the way the provider signs them. Control happens through the returned object, never over HTTP.
 *
 * Written from (cited in issue 33's closing note):
 * - Twilio: "Messages resource" https://www.twilio.com/docs/messaging/api/message-resource (create, properties,
 *   status values, num_segments "0" for Messaging Service sends); "Outbound Message Status in Status Callbacks"
 *   https://www.twilio.com/docs/messaging/guides/outbound-message-status-in-status-callbacks (initial status
 *   `queued`, or `accepted` with a Messaging Service; callback parameters); "How long can a message be?"
 *   https://www.twilio.com/docs/glossary/what-sms-character-limit and "What is UCS-2 Character Encoding?"
 *   https://www.twilio.com/docs/glossary/what-is-ucs-2-character-encoding (160/153, 70/67, 1,600);
 *   "Secure webhooks" https://www.twilio.com/docs/usage/webhooks/webhooks-security (X-Twilio-Signature); error
 *   pages https://www.twilio.com/docs/api/errors/{20003,20429,20500,20503,21211,21602,21604,21617}.
 * - Postmark: "Sending email with API" https://postmarkapp.com/developer/user-guide/send-email-with-api; "API
 *   overview" https://postmarkapp.com/developer/api/overview (401, 422 + ErrorCode, 429, 500, 503); "Delivery
 *   webhook" https://postmarkapp.com/developer/webhooks/delivery-webhook; "Bounce webhook"
 *   https://postmarkapp.com/developer/webhooks/bounce-webhook; the official client's status mapping
 *   (ActiveCampaign/postmark.js, src/client/errors/ErrorHandler.ts).
 * - WhatsApp: Cloud API "Messages" reference https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages
 *   (send, response); "Error codes" https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes (190 →
 *   401, 131047 → 400, 130429 → 400, 131000 → 500, 2 → 503; read through copies of its table, see below);
 *   "Messages webhook reference", status https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status;
 *   Graph API webhooks "Validate payloads" https://developers.facebook.com/docs/graph-api/webhooks/getting-started (X-Hub-Signature-256).
 * - Telegram: Bot API https://core.telegram.org/bots/api (#making-requests, #sendmessage, #replyparameters,
 *   #responseparameters, #message); the Bot API server's source, tdlib/telegram-bot-api Query.cpp ("Too Many
 *   Requests: retry after N" + parameters.retry_after) and HttpConnection.cpp (it also sends a Retry-After header).
 *
 * Not confirmed from a provider document (kept plausible, flagged here): the bodies Postmark sends with 429/500/503
 * (this double answers `{ErrorCode: <status>, Message}`) and the exact wording of Postmark's 300/402 messages; the
 * `message` texts of Twilio 21602/21603/21617 (codes and titles are documented; 21604's and 21211's texts were seen
 * in captured responses); whether Twilio, Postmark or Meta send Retry-After (not documented: off by default, see
 * `retryAfterHeader`); Meta's error-code page itself (its table was read through partner copies — HTTP 400 for
 * 130429 and 131047, 401 for 190) and Graph's 100/GraphMethodException text for an unknown phone-number id;
 * Telegram's 5xx body; how Telegram counts the 4,096 characters (code points here); Postmark's 401 texts; the
 * `Details` SMTP lines of the Delivery/Bounce callbacks and the Telegram bot/chat names (placeholders). Only the
 * send endpoints and the inbound media downloads exist (anything else gets the provider's 404).
 *
 * Inbound media (issue 34), from the same references: Twilio "Media resource"
 * https://www.twilio.com/docs/messaging/api/media-resource (the MediaUrl is the Media resource's URI without
 * `.json`; with HTTP auth enforced it needs the account's basic auth, and it redirects to a short-lived CDN URL);
 * WhatsApp Cloud API "Media" https://developers.facebook.com/docs/whatsapp/cloud-api/reference/media (`GET
 * /{version}/{media-id}` → `{messaging_product, url, mime_type, sha256, file_size, id}`, then GET the url with the
 * same bearer token; the real url is on lookaside.fbsbx.com, here on the double's own origin); Telegram Bot API
 * #getfile and #file (`{file_id, file_unique_id, file_size, file_path}`, then `/file/bot<token>/<file_path>`).
 * Unconfirmed: the body of Twilio's CDN 404 (plain text here) and Meta's exact text for an unknown media id. The double does not track WhatsApp's 24 h window,
 * Telegram reply targets or Twilio smart encoding: script those with `failNext`.
 */

export type Provider = 'postmark' | 'twilio' | 'whatsapp' | 'telegram';

export type Failure =
  /** 429 with the provider's body (WhatsApp: HTTP 400 with code 130429, as Meta's table gives). `retryAfterHeader`
   *  forces the Retry-After header on or off; by default only Telegram sends it (its server does). */
  | { kind: 'rate_limited'; retryAfterSeconds: number; retryAfterHeader?: boolean }
  /** 500 (or `status`, e.g. 503) with the provider's body. */
  | { kind: 'server_error'; status?: number }
  /** Twilio 400/21211, Postmark 422/406, WhatsApp 400/131047, Telegram 403 "Forbidden: bot was blocked by the user". */
  | { kind: 'rejected' }
  /** Reads and records the whole request and processes it like a success (the provider has the message: its id is
   *  in `providerMessageId`), but never answers. */
  | { kind: 'hang' }
  /** Destroys the socket before reading the request. Recorded with `received: false`, `answeredStatus: null`, body {}. */
  | { kind: 'reset' };

export interface RecordedSend {
  provider: Provider;
  method: string;
  path: string;
  /** Request headers, names lower-cased. */
  headers: Record<string, string>;
  /** The JSON body, or the form fields (repeated fields as arrays); {} when unreadable or never read. */
  body: Record<string, unknown>;
  /** null while unanswered: hung, reset, or still in flight. */
  answeredStatus: number | null;
  /** false only for `reset` (the request was cut before it was read: the provider never got it). */
  received: boolean;
  /** On acceptance (also when hung): Postmark MessageID, Twilio sid, wamid, Telegram "<chat_id>:<message_id>", or a
   *  WhatsApp media id (uploads). */
  providerMessageId?: string;
  at: number;
  /** multipart/form-data requests (Telegram sendDocument, WhatsApp /media): the file parts, hashed. */
  files?: RecordedFile[];
  /** Twilio: each MediaUrl as the double fetched it (no credentials, as Twilio fetches media), before answering. */
  media?: FetchedMedia[];
}

export interface RecordedFile {
  field: string;
  filename: string;
  contentType: string;
  size: number;
  sha256: string;
}

export interface FetchedMedia {
  url: string;
  status: number;
  contentType: string | null;
  size: number;
  sha256: string;
}

/** A file the double serves: its bytes (or `size` generated bytes, streamed), and how its download misbehaves. */
export interface MediaSpec {
  bytes?: Buffer;
  /** Serves this many pseudo-random bytes, streamed in 64 KiB chunks, instead of `bytes`. */
  size?: number;
  mimeType?: string;
  /** `missing`: the download answers the provider's 404; `hang`: it sends the headers and a first chunk, then nothing. */
  fail?: 'missing' | 'hang';
}

export interface RecordedMedia {
  provider: Provider;
  path: string;
  headers: Record<string, string>;
  status: number | null;
  at: number;
}

export type TwilioCallbackStatus = 'queued' | 'sent' | 'delivered' | 'undelivered' | 'failed' | 'read';
export type WhatsappCallbackStatus = 'sent' | 'delivered' | 'read' | 'failed';

export interface ProviderDoubles {
  /** Base URLs (`${origin}/postmark` …); the service appends the documented paths. */
  urls: { postmark: string; twilio: string; whatsapp: string; telegram: string };
  addTwilioAccount(accountSid: string, authToken: string): void;
  addPostmarkServer(serverToken: string): void;
  addWhatsappNumber(phoneNumberId: string, bearerToken: string): void;
  addTelegramBot(botToken: string): void;
  /** Every send request that reached the double (failed, hung and reset ones too), in arrival order. */
  sends(provider?: Provider): RecordedSend[];
  /** The next `count` (default 1) sends to `provider` get `failure` instead of their normal answer; with `after`,
   *  that many sends are answered normally first (a reply sent in parts fails on a later part). */
  failNext(provider: Provider, failure: Failure, count?: number, after?: number): void;
  /** Forgets recorded sends and pending scripts; accounts and sent messages (for callbacks) stay. */
  reset(): void;
  close(): Promise<void>;
  // --- inbound media (issue 34): files a customer's message names, served the way each provider serves them ---
  /** Twilio media: an absolute `MediaUrl` under the Twilio base (`…/Accounts/{sid}/Messages/{MM}/Media/{ME}`), served
   *  with the account's basic auth; `redirect` answers 307 to a CDN path that needs no credentials, as Twilio does. */
  addTwilioMedia(accountSid: string, media: MediaSpec & { redirect?: boolean }): string;
  /** WhatsApp media: an id `GET /{version}/{media-id}` resolves (bearer token) to `{url, mime_type, sha256, file_size}`;
   *  the url serves the bytes to the same bearer token. */
  addWhatsappMedia(bearerToken: string, media: MediaSpec): string;
  /** Telegram file: a file_id `getFile` resolves to `{file_path}`, served at `/file/bot{token}/{file_path}`. */
  addTelegramFile(botToken: string, media: MediaSpec): string;
  /** Every media request (metadata and download) that reached the double, in arrival order. */
  mediaRequests(provider?: Provider): RecordedMedia[];
  /** POSTs Twilio's status callback to the StatusCallback URL the send named, signed with the account's token. */
  twilioStatus(messageSid: string, status: TwilioCallbackStatus, opts?: { errorCode?: string }): Promise<Response>;
  /** POSTs a Cloud API `statuses` webhook for a wamid, signed with X-Hub-Signature-256. */
  whatsappStatus(
    hookUrl: string,
    appSecret: string,
    wamid: string,
    status: WhatsappCallbackStatus,
    opts?: { recipient?: string; errors?: { code: number; title: string }[] },
  ): Promise<Response>;
  /** POSTs Postmark's Delivery or Bounce webhook for a sent MessageID; `basicAuth` is "user:password" (credentials in
   *  `hookUrl` itself are moved into the header, as Postmark does). */
  postmarkDelivery(hookUrl: string, messageId: string, kind: 'Delivery' | 'Bounce', opts?: { basicAuth?: string }): Promise<Response>;
}

// --- standalone signers and segment counting --------------------------------------------------------------

/** X-Twilio-Signature: base64(HMAC-SHA1(authToken, url + each param name and value, names sorted)). Repeated
 *  params contribute name+value once per value, values sorted (as twilio-node's validateRequest does). */
export function twilioSignature(authToken: string, url: string, params: Record<string, string | readonly string[]>): string {
  let data = url;
  for (const name of Object.keys(params).sort()) {
    const value = params[name]!;
    for (const v of typeof value === 'string' ? [value] : [...value].sort()) data += name + v;
  }
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

/** X-Hub-Signature-256 value: "sha256=" + hex HMAC-SHA256(appSecret, raw body bytes). */
export function metaSignature(appSecret: string, rawBody: string | Buffer): string {
  return `sha256=${createHmac('sha256', appSecret).update(rawBody).digest('hex')}`;
}

const GSM7 = new Set('@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà');
const GSM7_EXTENSION = new Set('\f^{}\\[~]|€');

/** Twilio's num_segments: GSM-7 (extension characters take two septets) 160 alone / 153 per part, otherwise UCS-2
 *  code units 70 / 67; an escape pair or a surrogate pair is never split across parts. */
export function smsSegments(body: string): number {
  const chars = [...body];
  const gsm = chars.every((c) => GSM7.has(c) || GSM7_EXTENSION.has(c));
  const units = chars.map((c) => (gsm ? (GSM7_EXTENSION.has(c) ? 2 : 1) : c.length));
  const [single, part] = gsm ? [160, 153] : [70, 67];
  if (units.reduce((a, b) => a + b, 0) <= single) return 1;
  let segments = 1;
  let used = 0;
  for (const u of units) {
    if (used + u > part) [segments, used] = [segments + 1, 0];
    used += u;
  }
  return segments;
}

// --- helpers ----------------------------------------------------------------------------------------------

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}
interface Outcome {
  reply: Reply;
  id?: string;
}

/** A multipart/form-data body: its fields and its files (hashed; Telegram sendDocument, WhatsApp /media). */
function parseMultipart(contentType: string, raw: Buffer): Promise<{ fields: Record<string, string>; files: RecordedFile[] }> {
  return new Promise((resolve, reject) => {
    const fields: Record<string, string> = {};
    const files: RecordedFile[] = [];
    let bb;
    try {
      bb = busboy({ headers: { 'content-type': contentType } });
    } catch (err) {
      return reject(err as Error);
    }
    bb.on('field', (name, value) => (fields[name] = value));
    bb.on('file', (field, stream, info) => {
      const hash = createHash('sha256');
      let size = 0;
      stream.on('data', (c: Buffer) => {
        size += c.length;
        hash.update(c);
      });
      stream.on('end', () => files.push({ field, filename: info.filename ?? '', contentType: info.mimeType, size, sha256: hash.digest('hex') }));
    });
    bb.on('close', () => resolve({ fields, files }));
    bb.on('error', reject);
    bb.end(raw);
  });
}

/** Twilio fetches each MediaUrl itself, with no credentials: the double does so before it answers, and hashes it. */
async function fetchMedia(url: string): Promise<FetchedMedia> {
  try {
    const res = await fetch(url);
    const bytes = Buffer.from(await res.arrayBuffer());
    return { url, status: res.status, contentType: res.headers.get('content-type'), size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
  } catch {
    return { url, status: 0, contentType: null, size: 0, sha256: '' };
  }
}
type Fields = Record<string, string | string[]>;

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : Array.isArray(v) && typeof v[0] === 'string' ? v[0] : undefined);
const rfc2822 = (d: Date) => d.toUTCString().replace(/GMT$/, '+0000');
const unixSeconds = () => Math.floor(Date.now() / 1000);
const fbtraceId = () => `A${randomBytes(16).toString('base64url').slice(0, 22)}`;

function formFields(text: string): Fields {
  const out: Fields = {};
  for (const [name, value] of new URLSearchParams(text)) {
    const prev = out[name];
    out[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return out;
}

/** undefined = unparseable JSON. Twilio reads only form bodies (a JSON body reads as no parameters at all). */
function parseBody(provider: Provider, contentType: string, raw: Buffer): Record<string, unknown> | undefined {
  const type = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  const text = raw.toString('utf8');
  if (type === 'application/x-www-form-urlencoded') return formFields(text);
  if (provider === 'twilio' || text.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function flatHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

function basicAuth(header: string | undefined): { user: string; pass: string } | undefined {
  const m = /^Basic\s+(\S+)$/i.exec(header ?? '');
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  return i < 0 ? undefined : { user: decoded.slice(0, i), pass: decoded.slice(i + 1) };
}

/** `size` deterministic pseudo-random bytes in 64 KiB chunks (a counter through SHA-256), never held whole. */
export function* generated(size: number, seed = 'media'): Generator<Buffer> {
  const block = createHash('sha256').update(seed).digest();
  const chunk = Buffer.alloc(64 * 1024);
  for (let i = 0; i < chunk.length; i += block.length) block.copy(chunk, i);
  for (let sent = 0, n = 0; sent < size; n++) {
    const len = Math.min(chunk.length, size - sent);
    const out = Buffer.from(chunk.subarray(0, len));
    if (len >= 4) out.writeUInt32BE(n, 0);
    sent += len;
    yield out;
  }
}

// --- per-provider error bodies ----------------------------------------------------------------------------

const twilioError = (status: number, code: number, message: string, headers?: Record<string, string>): Reply => ({
  status,
  body: { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status },
  headers,
});
const postmarkError = (status: number, code: number, message: string): Reply => ({ status, body: { ErrorCode: code, Message: message } });
const metaError = (status: number, code: number, message: string, type = 'OAuthException', details?: string, extra: Record<string, unknown> = {}): Reply => ({
  status,
  body: {
    error: { message, type, code, ...extra, ...(details === undefined ? {} : { error_data: { messaging_product: 'whatsapp', details } }), fbtrace_id: fbtraceId() },
  },
});
const telegramError = (status: number, description: string, parameters?: Record<string, unknown>): Reply => ({
  status,
  body: { ok: false, error_code: status, description, ...(parameters ? { parameters } : {}) },
});

function failureReply(provider: Provider, failure: Exclude<Failure, { kind: 'hang' } | { kind: 'reset' }>, body: Record<string, unknown>): Reply {
  if (failure.kind === 'rate_limited') {
    const n = failure.retryAfterSeconds;
    const reply: Reply =
      provider === 'postmark'
        ? postmarkError(429, 429, 'Rate limit exceeded. Please wait and try again.')
        : provider === 'twilio'
          ? twilioError(429, 20429, 'Too Many Requests')
          : provider === 'whatsapp'
            ? metaError(400, 130429, '(#130429) Rate limit hit', 'OAuthException', 'Cloud API message throughput has been reached.')
            : telegramError(429, `Too Many Requests: retry after ${n}`, { retry_after: n });
    if (failure.retryAfterHeader ?? provider === 'telegram') reply.headers = { ...reply.headers, 'Retry-After': String(n) };
    return reply;
  }
  if (failure.kind === 'server_error') {
    const status = failure.status ?? 500;
    const phrase = STATUS_CODES[status] ?? 'Internal Server Error';
    if (provider === 'postmark') return postmarkError(status, status, phrase);
    if (provider === 'twilio') return status === 503 ? twilioError(503, 20503, 'Service Unavailable') : twilioError(status, 20500, 'Internal Server Error');
    if (provider === 'whatsapp') {
      return status === 503
        ? metaError(503, 2, '(#2) Service temporarily unavailable')
        : metaError(status, 131000, '(#131000) Something went wrong', 'OAuthException', 'Message failed to send due to an unknown error.');
    }
    return telegramError(status, phrase);
  }
  if (provider === 'postmark') {
    const to = str(body.To) ?? '';
    return postmarkError(
      422,
      406,
      `You tried to send to recipient(s) that have been marked as inactive. Found inactive addresses: ${to}. Inactive recipients are ones that have generated a hard bounce, a spam complaint, or a manual suppression.`,
    );
  }
  if (provider === 'twilio') return twilioError(400, 21211, `The 'To' number ${str(body.To) ?? ''} is not a valid phone number.`);
  if (provider === 'whatsapp') {
    return metaError(400, 131047, '(#131047) Re-engagement message', 'OAuthException', 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.');
  }
  return telegramError(403, 'Forbidden: bot was blocked by the user');
}

// --- the double -------------------------------------------------------------------------------------------

interface TwilioMessage {
  accountSid: string;
  from: string;
  to: string;
  statusCallback?: string;
  messagingServiceSid?: string;
}
interface PostmarkMessage {
  serverId: number;
  from: string;
  to: string;
  tag: string;
  subject: string;
  stream: string;
  metadata: Record<string, unknown>;
}

const E164 = /^(?:whatsapp:)?\+[1-9]\d{1,14}$/;
const WABA_ID = '102290129340398';
const DISPLAY_PHONE_NUMBER = '15550783881';

export async function startProviderDoubles(): Promise<ProviderDoubles> {
  const twilioAccounts = new Map<string, string>();
  const postmarkServers = new Map<string, number>();
  const whatsappNumbers = new Map<string, string>();
  const telegramBots = new Set<string>();
  const log: RecordedSend[] = [];
  const scripts: Record<Provider, (Failure | undefined)[]> = { postmark: [], twilio: [], whatsapp: [], telegram: [] };
  const twilioMessages = new Map<string, TwilioMessage>();
  const postmarkMessages = new Map<string, PostmarkMessage>();
  const whatsappMessages = new Map<string, { phoneNumberId: string; waId: string }>();
  /** WhatsApp media uploaded through POST /{version}/{phone_number_id}/media, by media id. */
  const whatsappUploads = new Map<string, RecordedFile>();
  const telegramChats = new Map<string, number>();

  // --- inbound media ---
  interface Served {
    spec: MediaSpec;
    /** Who may download it: Twilio "sid:token" (basic), WhatsApp bearer token, Telegram bot token (in the path). */
    credential: string;
  }
  const mediaLog: RecordedMedia[] = [];
  const twilioMedia = new Map<string, Served>(); // path → media
  const cdn = new Map<string, Served>(); // Twilio CDN path → media (no credentials)
  const whatsappMedia = new Map<string, Served & { downloadKey: string }>(); // media id → media
  const whatsappDownloads = new Map<string, Served>(); // download key → media
  const telegramFiles = new Map<string, Served & { path: string }>(); // file_id → media
  const telegramPaths = new Map<string, Served>(); // "<token>/<file_path>" → media

  const mediaSize = (spec: MediaSpec) => spec.bytes?.length ?? spec.size ?? 0;
  const mediaSha256 = (spec: MediaSpec) => {
    const h = createHash('sha256');
    if (spec.bytes) h.update(spec.bytes);
    else for (const chunk of generated(spec.size ?? 0)) h.update(chunk);
    return h.digest('hex');
  };

  function serveBytes(res: ServerResponse, spec: MediaSpec, rec: RecordedMedia): void {
    if (spec.fail === 'missing') {
      rec.status = 404;
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('Not Found');
      return;
    }
    rec.status = 200;
    const size = mediaSize(spec);
    res.writeHead(200, { 'Content-Type': spec.mimeType ?? 'application/octet-stream', ...(spec.fail === 'hang' ? {} : { 'Content-Length': String(size) }) });
    if (spec.fail === 'hang') {
      res.write(Buffer.alloc(Math.min(1024, Math.max(1, size))));
      return; // never ends: the client's deadline must cut it
    }
    if (spec.bytes) return void res.end(spec.bytes);
    const chunks = generated(size);
    const pump = () => {
      for (;;) {
        const next = chunks.next();
        if (next.done) return void res.end();
        if (!res.write(next.value)) return void res.once('drain', pump);
      }
    };
    res.on('error', () => undefined);
    pump();
  }

  /** Serves a media request when the path is one; false when it is not (the send routes then answer). */
  function media(provider: Provider, sub: string, url: URL, headers: Record<string, string>, res: ServerResponse): boolean {
    const rec: RecordedMedia = { provider, path: url.pathname, headers, status: null, at: Date.now() };
    const json = (status: number, body: unknown, extra?: Record<string, string>) => {
      rec.status = status;
      send(res, { status, body, headers: extra });
    };
    if (provider === 'twilio') {
      const served = twilioMedia.get(sub);
      const fromCdn = cdn.get(sub);
      if (!served && !fromCdn && !/\/Media\//.test(sub)) return false;
      mediaLog.push(rec);
      if (fromCdn) return serveBytes(res, fromCdn.spec, rec), true;
      const auth = basicAuth(headers.authorization);
      if (!served) return json(404, twilioError(404, 20404, 'The requested resource was not found').body), true;
      if (!auth || `${auth.user}:${auth.pass}` !== served.credential) {
        return json(401, twilioError(401, 20003, 'Authenticate').body, { 'WWW-Authenticate': 'Basic realm="Twilio API"' }), true;
      }
      if ((served.spec as { redirect?: boolean }).redirect) {
        const cdnPath = `/cdn/${hex(16)}`;
        cdn.set(cdnPath, served);
        rec.status = 307;
        res.writeHead(307, { Location: `${origin}/twilio${cdnPath}`, 'Content-Length': '0' });
        res.end();
        return true;
      }
      serveBytes(res, served.spec, rec);
      return true;
    }
    if (provider === 'whatsapp') {
      const token = /^Bearer\s+(\S+)$/i.exec(headers.authorization ?? '')?.[1];
      const download = /^\/media-download\/([^/]+)$/.exec(sub);
      const meta = /^\/(v\d+\.\d+)\/([^/]+)$/.exec(sub);
      if (!download && !meta) return false;
      mediaLog.push(rec);
      const served = download ? whatsappDownloads.get(download[1]!) : whatsappMedia.get(decodeURIComponent(meta![2]!));
      if (!token || ![...whatsappNumbers.values(), ...[...whatsappMedia.values()].map((m) => m.credential)].includes(token)) {
        return json(401, metaError(401, 190, 'Invalid OAuth access token - Cannot parse access token').body), true;
      }
      if (!served || served.credential !== token) {
        const id = download ? download[1]! : decodeURIComponent(meta![2]!);
        return json(400, metaError(400, 100, `Unsupported get request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`, 'GraphMethodException', undefined, { error_subcode: 33 }).body), true;
      }
      if (download) return serveBytes(res, served.spec, rec), true;
      const id = decodeURIComponent(meta![2]!);
      const { downloadKey } = whatsappMedia.get(id)!;
      json(200, {
        messaging_product: 'whatsapp',
        url: `${origin}/whatsapp/media-download/${downloadKey}`,
        mime_type: served.spec.mimeType ?? 'application/octet-stream',
        sha256: mediaSha256(served.spec),
        file_size: mediaSize(served.spec),
        id,
      });
      return true;
    }
    if (provider === 'telegram') {
      const getFile = /^\/bot([^/]+)\/getfile$/i.exec(sub);
      const download = /^\/file\/bot([^/]+)\/(.+)$/.exec(sub);
      if (!getFile && !download) return false;
      mediaLog.push(rec);
      if (getFile) {
        const token = decodeURIComponent(getFile[1]!);
        if (!telegramBots.has(token)) return json(401, telegramError(401, 'Unauthorized').body), true;
        const fileId = url.searchParams.get('file_id') ?? '';
        const served = telegramFiles.get(fileId);
        if (!served || served.credential !== token) return json(400, telegramError(400, 'Bad Request: invalid file_id').body), true;
        json(200, { ok: true, result: { file_id: fileId, file_unique_id: hex(8), file_size: mediaSize(served.spec), file_path: served.path } });
        return true;
      }
      const served = telegramPaths.get(`${decodeURIComponent(download![1]!)}/${download![2]!}`);
      if (!served) return json(404, telegramError(404, 'Not Found').body), true;
      serveBytes(res, served.spec, rec);
      return true;
    }
    return false;
  }

  function postmarkSend(headers: Record<string, string>, body: Record<string, unknown> | undefined): Outcome {
    const token = headers['x-postmark-server-token'];
    if (!token) {
      return { reply: postmarkError(401, 10, 'No Account or Server API tokens were supplied in the HTTP headers. Please add a header for either X-Postmark-Server-Token or X-Postmark-Account-Token.') };
    }
    const serverId = postmarkServers.get(token);
    if (serverId === undefined) return { reply: postmarkError(401, 10, 'Request does not contain a valid Server token.') };
    if (!body) return { reply: postmarkError(422, 402, 'Received invalid JSON input.') };
    const from = str(body.From)?.trim() ?? '';
    const to = str(body.To)?.trim() ?? '';
    if (!from) return { reply: postmarkError(422, 300, "Invalid 'From' address: ''.") };
    if (!to) return { reply: postmarkError(422, 300, 'Zero recipients specified') };
    if (!str(body.TextBody) && !str(body.HtmlBody)) return { reply: postmarkError(422, 300, 'Provide either email TextBody or HtmlBody or both.') };
    if (body.Attachments !== undefined) {
      // Postmark's Attachments: [{Name, Content (base64), ContentType, ContentID?}]; at most 10 MB in all.
      const list = Array.isArray(body.Attachments) ? (body.Attachments as unknown[]) : [];
      let total = 0;
      for (const a of list) {
        if (!isObject(a) || !str(a.Name) || typeof a.Content !== 'string' || !str(a.ContentType) || !/^[A-Za-z0-9+/]*={0,2}$/.test(a.Content)) {
          return { reply: postmarkError(422, 300, 'Invalid attachment: provide Name, Content (base64) and ContentType.') };
        }
        total += Buffer.from(a.Content, 'base64').length;
      }
      if (total > 10 * 1000 * 1000) return { reply: postmarkError(422, 300, 'Message size exceeds the 10 MB limit.') };
    }
    const id = randomUUID();
    postmarkMessages.set(id, {
      serverId,
      from,
      to,
      tag: str(body.Tag) ?? '',
      subject: str(body.Subject) ?? '',
      stream: str(body.MessageStream) ?? 'outbound',
      metadata: isObject(body.Metadata) ? body.Metadata : {},
    });
    const submittedAt = new Date().toISOString().replace('Z', '0000Z');
    return { id, reply: { status: 200, body: { To: to, SubmittedAt: submittedAt, MessageID: id, ErrorCode: 0, Message: 'OK' } } };
  }

  function twilioSend(m: RegExpExecArray, headers: Record<string, string>, body: Record<string, unknown>): Outcome {
    const accountSid = decodeURIComponent(m[1]!);
    const auth = basicAuth(headers.authorization);
    if (!auth || auth.user !== accountSid || twilioAccounts.get(accountSid) !== auth.pass) {
      return { reply: twilioError(401, 20003, 'Authenticate', { 'WWW-Authenticate': 'Basic realm="Twilio API"' }) };
    }
    const to = str(body.To);
    const from = str(body.From);
    const service = str(body.MessagingServiceSid);
    const text = str(body.Body) ?? '';
    const media = body.MediaUrl === undefined ? [] : typeof body.MediaUrl === 'string' ? [body.MediaUrl] : (body.MediaUrl as string[]);
    if (!to) return { reply: twilioError(400, 21604, "A 'To' phone number is required.") };
    if (!E164.test(to)) return { reply: twilioError(400, 21211, `The 'To' number ${to} is not a valid phone number.`) };
    if (!from && !service) return { reply: twilioError(400, 21603, "A 'From' phone number is required.") };
    if (!text && media.length === 0) return { reply: twilioError(400, 21602, 'Message body is required.') };
    if ([...text].length > 1600) return { reply: twilioError(400, 21617, 'The concatenated message body exceeds the 1600 character limit.') };
    const sid = `${media.length > 0 ? 'MM' : 'SM'}${hex(16)}`;
    twilioMessages.set(sid, { accountSid, from: from ?? '', to, statusCallback: str(body.StatusCallback), messagingServiceSid: service });
    const now = rfc2822(new Date());
    const base = `/2010-04-01/Accounts/${accountSid}/Messages/${sid}`;
    // A Messaging Service has not picked a sender yet: num_segments starts at "0" and the status is "accepted".
    const resource = {
      account_sid: accountSid, api_version: '2010-04-01', body: text, date_created: now, date_sent: null, date_updated: now,
      direction: 'outbound-api', error_code: null, error_message: null, from: from ?? null, messaging_service_sid: service ?? null,
      num_media: String(media.length), num_segments: from ? String(smsSegments(text)) : '0', price: null, price_unit: 'USD', sid,
      status: from ? 'queued' : 'accepted', subresource_uris: { media: `${base}/Media.json` }, to, uri: `${base}.json`,
    };
    return { id: sid, reply: { status: 201, body: resource } };
  }

  function whatsappSend(m: RegExpExecArray, headers: Record<string, string>, body: Record<string, unknown> | undefined): Outcome {
    const phoneNumberId = decodeURIComponent(m[2]!);
    const token = /^Bearer\s+(\S+)$/i.exec(headers.authorization ?? '')?.[1];
    const owner = [...whatsappNumbers].find(([, t]) => t === token);
    if (!token || !owner) {
      const reply = metaError(401, 190, 'Invalid OAuth access token - Cannot parse access token');
      return { reply: { ...reply, headers: { 'WWW-Authenticate': 'OAuth "Facebook Platform" "invalid_token" "Invalid OAuth access token - Cannot parse access token"' } } };
    }
    if (whatsappNumbers.get(phoneNumberId) !== token) {
      const message = `Unsupported post request. Object with ID '${phoneNumberId}' does not exist, cannot be loaded due to missing permissions, or does not support this operation. Please read the Graph API documentation at https://developers.facebook.com/docs/graph-api`;
      return { reply: metaError(400, 100, message, 'GraphMethodException', undefined, { error_subcode: 33 }) };
    }
    const invalid = (message: string): Outcome => ({ reply: metaError(400, 100, message, 'OAuthException', message.replace(/^\(#100\) /, '')) });
    if (!body) return invalid('(#100) Invalid JSON payload.');
    if (body.messaging_product !== 'whatsapp') return invalid('(#100) The parameter messaging_product is required.');
    const to = str(body.to);
    if (!to) return invalid('(#100) The parameter to is required.');
    const type = str(body.type) ?? 'text';
    if (type === 'text') {
      const text = isObject(body.text) ? str(body.text.body) : undefined;
      if (!text) return invalid("(#100) The parameter text['body'] is required.");
      if ([...text].length > 4096) return invalid("(#100) Param text['body'] must be at most 4096 characters long.");
    } else if (type === 'template') {
      const t = isObject(body.template) ? body.template : {};
      if (!str(t.name)) return invalid("(#100) The parameter template['name'] is required.");
      if (!isObject(t.language) || !str(t.language.code)) return invalid("(#100) The parameter template['language'] is required.");
    } else if (!isObject(body[type])) return invalid(`(#100) The parameter ${type} is required.`);
    else if ((type === 'image' || type === 'document') && str((body[type] as Record<string, unknown>).id) && !whatsappUploads.has(str((body[type] as Record<string, unknown>).id)!)) {
      return invalid(`(#100) Param ${type}['id'] is not a valid media id.`);
    }
    const waId = to.replace(/\D/g, '');
    const wamid = `wamid.${Buffer.from(`\x1c\x18\x0b${waId}\x15\x02\x00\x11\x18\x12${hex(9).toUpperCase()}\x00`, 'latin1').toString('base64')}`;
    whatsappMessages.set(wamid, { phoneNumberId, waId });
    return { id: wamid, reply: { status: 200, body: { messaging_product: 'whatsapp', contacts: [{ input: to, wa_id: waId }], messages: [{ id: wamid }] } } };
  }

  function telegramSend(m: RegExpExecArray, body: Record<string, unknown> | undefined, files: RecordedFile[] = []): Outcome {
    const token = decodeURIComponent(m[1]!);
    if (!telegramBots.has(token)) return { reply: telegramError(401, 'Unauthorized') };
    if (!body) return { reply: telegramError(400, "Bad Request: can't parse JSON object") };
    const document = m[2]!.toLowerCase() === 'senddocument';
    if (document) {
      const file = files.find((f) => f.field === 'document');
      if (!file && !str(body.document)) return { reply: telegramError(400, 'Bad Request: there is no document in the request') };
      if (file && file.size > 50 * 1000 * 1000) return { reply: telegramError(413, 'Request Entity Too Large') };
      if ([...(str(body.caption) ?? '')].length > 1024) return { reply: telegramError(400, 'Bad Request: message caption is too long') };
    }
    const rawChat = body.chat_id;
    if (rawChat === undefined || rawChat === '') return { reply: telegramError(400, 'Bad Request: chat_id is empty') };
    const chatText = typeof rawChat === 'number' ? String(rawChat) : str(rawChat) ?? '';
    if (!/^-?\d+$/.test(chatText)) return { reply: telegramError(400, 'Bad Request: chat not found') };
    const text = str(body.text) ?? '';
    if (!document && text.trim() === '') return { reply: telegramError(400, 'Bad Request: message text is empty') };
    if ([...text].length > 4096) return { reply: telegramError(400, 'Bad Request: message is too long') };
    const chatId = Number(chatText);
    const messageId = (telegramChats.get(chatText) ?? 0) + 1;
    telegramChats.set(chatText, messageId);
    const botId = Number(token.split(':')[0]);
    const chat = chatId > 0 ? { id: chatId, first_name: 'Customer', type: 'private' } : { id: chatId, title: 'Support group', type: chatId < -1e12 ? 'supergroup' : 'group' };
    const file = files.find((f) => f.field === 'document');
    const content = document
      ? { document: { file_name: file?.filename, mime_type: file?.contentType, file_id: `BQACAgIAAxkBAAI${hex(12)}`, file_unique_id: hex(8), file_size: file?.size }, ...(str(body.caption) ? { caption: str(body.caption) } : {}) }
      : { text };
    const result = { message_id: messageId, from: { id: botId, is_bot: true, first_name: 'Helpdesk', username: 'helpdesk_double_bot' }, chat, date: unixSeconds(), ...content };
    return { id: `${chatText}:${messageId}`, reply: { status: 200, body: { ok: true, result } } };
  }

  /** WhatsApp media upload: POST /{version}/{phone_number_id}/media, multipart with messaging_product=whatsapp and `file`. */
  function whatsappUpload(m: RegExpExecArray, headers: Record<string, string>, body: Record<string, unknown> | undefined, files: RecordedFile[]): Outcome {
    const phoneNumberId = decodeURIComponent(m[2]!);
    const token = /^Bearer\s+(\S+)$/i.exec(headers.authorization ?? '')?.[1];
    if (!token || whatsappNumbers.get(phoneNumberId) !== token) return { reply: metaError(401, 190, 'Invalid OAuth access token - Cannot parse access token') };
    const file = files.find((f) => f.field === 'file');
    if (!body || body.messaging_product !== 'whatsapp') return { reply: metaError(400, 100, '(#100) The parameter messaging_product is required.') };
    if (!file) return { reply: metaError(400, 100, '(#100) The parameter file is required.') };
    const id = String(2_000_000_000_000_000n + BigInt(`0x${hex(6)}`));
    whatsappUploads.set(id, file);
    return { id, reply: { status: 200, body: { id } } };
  }

  const ROUTES: Record<Provider, { re: RegExp; handle: (m: RegExpExecArray, h: Record<string, string>, b: Record<string, unknown> | undefined, files: RecordedFile[]) => Outcome }> = {
    postmark: { re: /^\/email$/i, handle: (_m, h, b) => postmarkSend(h, b) },
    twilio: { re: /^\/2010-04-01\/Accounts\/([^/]+)\/Messages\.json$/, handle: (m, h, b) => twilioSend(m, h, b ?? {}) },
    whatsapp: { re: /^\/(v\d+\.\d+)\/([^/]+)\/(messages|media)$/, handle: (m, h, b, f) => (m[3] === 'media' ? whatsappUpload(m, h, b, f) : whatsappSend(m, h, b)) },
    telegram: { re: /^\/bot([^/]+)\/(sendmessage|senddocument)$/i, handle: (m, _h, b, f) => telegramSend(m, b, f) },
  };

  const notFound = (provider: Provider): Reply =>
    provider === 'postmark'
      ? postmarkError(404, 404, 'Not found.')
      : provider === 'twilio'
        ? twilioError(404, 20404, 'The requested resource was not found')
        : provider === 'whatsapp'
          ? metaError(400, 100, 'Unknown path components', 'OAuthException')
          : telegramError(404, 'Not Found');

  function send(res: ServerResponse, reply: Reply): void {
    const payload = JSON.stringify(reply.body);
    res.writeHead(reply.status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(payload), ...reply.headers });
    res.end(payload);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const method = (req.method ?? 'GET').toUpperCase();
    const top = /^\/(postmark|twilio|whatsapp|telegram)(\/.*)?$/.exec(url.pathname);
    if (!top) {
      await readBody(req);
      return send(res, { status: 404, body: { error: 'provider double: unknown path' } });
    }
    const provider = top[1] as Provider;
    if (method === 'GET' && media(provider, top[2] ?? '/', url, flatHeaders(req), res)) return;
    const route = ROUTES[provider];
    const m = route.re.exec(top[2] ?? '/');
    if (!m || method !== 'POST') {
      await readBody(req);
      return send(res, notFound(provider));
    }
    const failure = scripts[provider].shift();
    const rec: RecordedSend = { provider, method, path: url.pathname, headers: flatHeaders(req), body: {}, answeredStatus: null, received: true, at: Date.now() };
    log.push(rec);
    if (failure?.kind === 'reset') {
      rec.received = false;
      req.socket.destroy();
      return;
    }
    const raw = await readBody(req);
    let parsed: Record<string, unknown> | undefined;
    if (/^multipart\/form-data/i.test(rec.headers['content-type'] ?? '')) {
      const form = await parseMultipart(rec.headers['content-type']!, raw).catch(() => undefined);
      parsed = form?.fields;
      rec.files = form?.files ?? [];
    } else parsed = parseBody(provider, rec.headers['content-type'] ?? '', raw);
    rec.body = parsed ?? {};
    // Twilio fetches an MMS's media when it takes the message: the double proves each link works, before answering.
    if (provider === 'twilio' && rec.body.MediaUrl !== undefined) {
      const urls = typeof rec.body.MediaUrl === 'string' ? [rec.body.MediaUrl] : (rec.body.MediaUrl as string[]);
      rec.media = await Promise.all(urls.map(fetchMedia));
    }
    if (failure && failure.kind !== 'hang') {
      const reply = failureReply(provider, failure, rec.body);
      rec.answeredStatus = reply.status;
      return send(res, reply);
    }
    const outcome = route.handle(m, rec.headers, parsed, rec.files ?? []);
    if (outcome.id && outcome.reply.status < 300) rec.providerMessageId = outcome.id;
    if (failure?.kind === 'hang') return; // the provider has the message; the client never hears so
    rec.answeredStatus = outcome.reply.status;
    send(res, outcome.reply);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, { status: 500, body: { error: `provider double: ${err instanceof Error ? err.message : String(err)}` } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closed: Promise<void> | undefined;

  return {
    urls: { postmark: `${origin}/postmark`, twilio: `${origin}/twilio`, whatsapp: `${origin}/whatsapp`, telegram: `${origin}/telegram` },
    addTwilioAccount: (sid, token) => void twilioAccounts.set(sid, token),
    addPostmarkServer: (token) => void (postmarkServers.has(token) || postmarkServers.set(token, 23 + postmarkServers.size)),
    addWhatsappNumber: (id, token) => void whatsappNumbers.set(id, token),
    addTelegramBot: (token) => void telegramBots.add(token),
    addTwilioMedia(accountSid, spec) {
      const path = `/2010-04-01/Accounts/${accountSid}/Messages/MM${hex(16)}/Media/ME${hex(16)}`;
      twilioMedia.set(path, { spec, credential: `${accountSid}:${twilioAccounts.get(accountSid) ?? ''}` });
      return `${origin}/twilio${path}`;
    },
    addWhatsappMedia(token, spec) {
      const id = String(1_000_000_000_000_000n + BigInt(`0x${hex(6)}`));
      const downloadKey = hex(16);
      const served = { spec, credential: token };
      whatsappMedia.set(id, { ...served, downloadKey });
      whatsappDownloads.set(downloadKey, served);
      return id;
    },
    addTelegramFile(token, spec) {
      const fileId = `BQACAgIAAxkBAAI${randomBytes(24).toString('base64url')}`;
      const folder = spec.mimeType?.startsWith('image/') ? 'photos' : 'documents';
      const path = `${folder}/file_${telegramFiles.size + 1}${spec.mimeType === 'image/jpeg' ? '.jpg' : spec.mimeType === 'application/pdf' ? '.pdf' : ''}`;
      const served = { spec, credential: token };
      telegramFiles.set(fileId, { ...served, path });
      telegramPaths.set(`${token}/${path}`, served);
      return fileId;
    },
    mediaRequests: (provider) => mediaLog.filter((r) => provider === undefined || r.provider === provider).map((r) => ({ ...r, headers: { ...r.headers } })),
    sends: (provider) => log.filter((r) => provider === undefined || r.provider === provider).map((r) => ({ ...r, headers: { ...r.headers } })),
    failNext(provider, failure, count = 1, after = 0) {
      for (let i = 0; i < after; i++) scripts[provider].push(undefined);
      for (let i = 0; i < count; i++) scripts[provider].push(failure);
    },
    reset() {
      log.length = 0;
      mediaLog.length = 0;
      for (const p of Object.keys(scripts) as Provider[]) scripts[p].length = 0;
    },
    close() {
      closed ??= new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      });
      return closed;
    },

    async twilioStatus(messageSid, status, opts = {}) {
      const msg = twilioMessages.get(messageSid);
      if (!msg) throw new Error(`provider double: Twilio never created ${messageSid}`);
      if (!msg.statusCallback) throw new Error(`provider double: the send of ${messageSid} named no StatusCallback`);
      const params: Record<string, string> = {
        ApiVersion: '2010-04-01',
        AccountSid: msg.accountSid,
        From: msg.from,
        To: msg.to,
        MessageSid: messageSid,
        MessageStatus: status,
        SmsSid: messageSid,
        SmsStatus: status,
        ...(msg.messagingServiceSid ? { MessagingServiceSid: msg.messagingServiceSid } : {}),
        ...(opts.errorCode ? { ErrorCode: opts.errorCode } : {}),
      };
      const signature = twilioSignature(twilioAccounts.get(msg.accountSid) ?? '', msg.statusCallback, params);
      return fetch(msg.statusCallback, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8', 'X-Twilio-Signature': signature },
        body: new URLSearchParams(params).toString(),
      });
    },

    async whatsappStatus(hookUrl, appSecret, wamid, status, opts = {}) {
      const known = whatsappMessages.get(wamid);
      const recipient = opts.recipient ?? known?.waId;
      if (!recipient) throw new Error(`provider double: unknown wamid ${wamid} and no recipient given`);
      const phoneNumberId = known?.phoneNumberId ?? [...whatsappNumbers.keys()][0] ?? '106540352242922';
      const errors = opts.errors?.map((e) => ({ code: e.code, title: e.title, message: e.title }));
      const statusObject = { id: wamid, status, timestamp: String(unixSeconds()), recipient_id: recipient, ...(errors ? { errors } : {}) };
      const value = { messaging_product: 'whatsapp', metadata: { display_phone_number: DISPLAY_PHONE_NUMBER, phone_number_id: phoneNumberId }, statuses: [statusObject] };
      const entry = { id: WABA_ID, changes: [{ value, field: 'messages' }] };
      const raw = JSON.stringify({ object: 'whatsapp_business_account', entry: [entry] });
      return fetch(hookUrl, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Hub-Signature-256': metaSignature(appSecret, raw) }, body: raw });
    },

    async postmarkDelivery(hookUrl, messageId, kind, opts = {}) {
      const msg = postmarkMessages.get(messageId);
      if (!msg) throw new Error(`provider double: Postmark never accepted MessageID ${messageId}`);
      const url = new URL(hookUrl);
      let credentials = opts.basicAuth;
      if (url.username || url.password) {
        credentials ??= `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
        url.username = '';
        url.password = '';
      }
      const recipient = /<([^<>]+)>/.exec(msg.to.split(',')[0] ?? '')?.[1] ?? (msg.to.split(',')[0] ?? '').trim();
      const at = new Date().toISOString().replace('Z', '0000Z');
      const common = { ServerID: msg.serverId, MessageStream: msg.stream, MessageID: messageId, Tag: msg.tag, Metadata: msg.metadata };
      const payload =
        kind === 'Delivery'
          ? { RecordType: 'Delivery', ...common, Recipient: recipient, DeliveredAt: at, Details: 'smtp;250 2.0.0 OK' }
          : {
              RecordType: 'Bounce', ID: randomBytes(6).readUIntBE(0, 6), Type: 'HardBounce', TypeCode: 1, Name: 'Hard bounce', ...common,
              Description: 'The server was unable to deliver your message (ex: unknown user, mailbox not found).',
              Details: 'smtp;550 5.1.1 The email account that you tried to reach does not exist.',
              Email: recipient, From: msg.from, BouncedAt: at, DumpAvailable: false, Inactive: true, CanActivate: true, Subject: msg.subject,
            };
      const headers: Record<string, string> = { 'Content-Type': 'application/json' };
      if (credentials !== undefined) headers.Authorization = `Basic ${Buffer.from(credentials, 'utf8').toString('base64')}`;
      return fetch(url, { method: 'POST', headers, body: JSON.stringify(payload) });
    },
  };
}
