import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real HTTP server on 127.0.0.1 (ephemeral port) standing in for Google (OAuth 2.0 + Gmail API) and
 * Microsoft (identity platform v2.0 + Graph), so tests exercise the real HTTP clients end to end. It answers
 * the documented endpoints with the documented shapes, including the awkward parts a client must cope with:
 *
 * - Gmail history.list omits `history` entirely when nothing changed; messages the user sends through
 *   messages.send land in the mailbox with labelIds ["SENT"] and show up in history as messageAdded.
 * - Graph returns `body` as HTML unless the request carries `Prefer: outlook.body-content-type="text"`, and
 *   `internetMessageHeaders` only when `$select` names it; `$select` restricts the properties to id plus those
 *   named (unknown names → 400). nextLink/deltaLink are absolute URLs on the double, to be followed verbatim.
 * - Graph's JSON sendMail accepts only X- headers in internetMessageHeaders (In-Reply-To there → 400).
 * - Gmail messages.send joins an existing thread only as its reference documents ("Adding drafts and messages
 *   to threads"): the request names the `threadId`, the message's In-Reply-To/References name a message of
 *   that thread, and its Subject matches the thread's (Re:/Fwd: prefixes aside). Anything less starts a new
 *   thread in the sender's mailbox, which is what `sent()[i].threadId` shows. An unknown threadId → 404.
 * - Graph message: reply (POST /me/messages/{id}/reply, JSON or base64 MIME as text/plain) answers 202 and
 *   files the reply in the original message's conversation; an unknown id → 404 ErrorItemNotFound.
 * - Attachments (issue 34). Gmail `format=full` lists each part with a filename with `body: {attachmentId, size}`
 *   (or, for a part delivered with `gmailInlineData`, `body: {size, data}` inline), and users.messages.attachments.get
 *   answers the MessagePartBody `{size, data}` with base64url data. Graph's message has `hasAttachments` (false when
 *   every attachment is inline, as Graph documents), GET /me/messages/{id}/attachments lists them with their
 *   `@odata.type` (fileAttachment, itemAttachment, referenceAttachment) and honours $select (contentBytes only
 *   when not selected away), and …/attachments/{id}/$value answers a fileAttachment's raw bytes. A bad token is
 *   401, an unknown message or attachment 404; `failAttachments` makes the byte endpoints answer a status.
 *
 * Control happens through the returned object's methods, never over HTTP.
 */

export type MailProvider = 'google' | 'microsoft';

export interface IssueCodeOptions {
  email: string;
  /** Granted scopes; the token response reports them space-separated (unless setScopes was called later). */
  scopes: string[] | string;
  /** The refresh token the exchange returns; random when omitted. */
  refreshToken?: string;
  /** When given, the exchange must present this redirect_uri (else redirect_uri_mismatch / invalid_grant). */
  redirectUri?: string;
  /** Display name (Graph /me displayName); derived from the address when omitted. */
  name?: string;
}

export interface DeliverOptions {
  from: string;
  fromName?: string;
  subject: string;
  text: string;
  /** With or without angle brackets; stored as <…>. */
  messageId: string;
  inReplyTo?: string;
  /** Space-separated string or list; each id with or without angle brackets. */
  references?: string | string[];
  /** Makes the message multipart/alternative (text/plain + text/html). */
  html?: string;
  date?: Date;
  /** Files the message carries, in order (issue 34). */
  attachments?: DeliverAttachment[];
}

export interface DeliverAttachment {
  name: string;
  /** Graph only: an attached Outlook item or a cloud link, which have no bytes of their own (default `file`). */
  kind?: 'file' | 'item' | 'reference';
  contentType?: string;
  content?: Buffer;
  /** Inline (Content-Disposition: inline; Graph isInline) with this Content-ID, without angle brackets. */
  contentId?: string;
  /** Gmail: the part's data comes inline in `format=full` (as Gmail does for small parts) instead of an attachmentId. */
  gmailInlineData?: boolean;
}

export interface SentMessage {
  /** The RFC 822 text exactly as the client sent it (decoded from base64/base64url). */
  raw: string;
  /** Top-level headers, names lower-cased, RFC 2047 encoded-words decoded, repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** The decoded first text/plain part ('' when there is none). */
  text: string;
  /** Gmail: the thread the sent message was filed in (a new one unless it met the threading rules). */
  threadId?: string;
  /** Graph: the conversation the sent message was filed in (the original's when sent through reply). */
  conversationId?: string;
  /** Graph: the id of the message answered through POST /me/messages/{id}/reply; absent for sendMail. */
  repliedTo?: string;
}

export interface ProviderRequest {
  provider: MailProvider;
  method: string;
  /** The URL path without the query string, e.g. "/google/token". */
  path: string;
}

export interface MailProviderDoubleEnv {
  GOOGLE_CLIENT_ID: string;
  GOOGLE_CLIENT_SECRET: string;
  GOOGLE_AUTH_URL: string;
  GOOGLE_TOKEN_URL: string;
  GOOGLE_GMAIL_API_URL: string;
  MICROSOFT_CLIENT_ID: string;
  MICROSOFT_CLIENT_SECRET: string;
  MICROSOFT_AUTH_URL: string;
  MICROSOFT_TOKEN_URL: string;
  MICROSOFT_GRAPH_API_URL: string;
}

export interface MailProviderDoubleOptions {
  /** Make Gmail/Graph answer 403 when the access token lacks the endpoint's scope (off by default). */
  enforceScopes?: boolean;
}

export interface MailProviderDouble {
  /** http://127.0.0.1:<port> */
  baseUrl: string;
  env: MailProviderDoubleEnv;
  /** A single-use authorization code (valid 10 minutes) for the token endpoint. */
  issueCode(provider: MailProvider, opts: IssueCodeOptions): string;
  /** Refresh tokens → invalid_grant, access tokens → 401, unredeemed codes → invalid_grant. */
  revoke(provider: MailProvider, email: string): void;
  /** While down, every endpoint of the provider answers 503. */
  setDown(provider: MailProvider, down: boolean): void;
  /** The scopes the next code exchange or refresh for this account reports. */
  setScopes(provider: MailProvider, email: string, scopes: string[] | string): void;
  /** Current access tokens (of one account, or all) answer 401 until the client refreshes. */
  expireAccessTokens(provider: MailProvider, email?: string): void;
  /** A new inbound message; returns the provider's message id (Gmail id / Graph id). */
  deliver(provider: MailProvider, email: string, msg: DeliverOptions): string;
  /** What the account sent (Gmail messages.send / Graph sendMail and message reply), oldest first. */
  sent(provider: MailProvider, email: string): SentMessage[];
  /** The Gmail threadId / Graph conversationId of a message in the account's mailbox (by provider id). */
  threadOf(provider: MailProvider, email: string, providerMessageId: string): string | undefined;
  /** Deletes a message from the mailbox for good (as a user emptying the trash would); Gmail drops an emptied thread. */
  remove(provider: MailProvider, email: string, providerMessageId: string): void;
  /** Gmail: startHistoryId before now → 404. Graph: existing delta/skip tokens → 410 syncStateNotFound. */
  forgetHistory(provider: MailProvider, email: string): void;
  /** Every request that reached a /google or /microsoft path, in order (a live array; splice(0) to clear). */
  requests: ProviderRequest[];
  /** While set, Gmail attachments.get and Graph $value answer this status (null: serve the bytes). */
  failAttachments(provider: MailProvider, status: number | null): void;
  close(): Promise<void>;
}

const CLIENTS = {
  google: { id: 'double-google-client-id.apps.googleusercontent.com', secret: 'double-google-client-secret' },
  microsoft: { id: '6f1c2d3e-0000-4000-8000-00000000d0b1', secret: 'double~microsoft~client~secret' },
} as const;

const ACCESS_TOKEN_TTL_S = 3600;
const CODE_TTL_MS = 10 * 60_000;
const MAX_BODY_BYTES = 36 * 1024 * 1024;
const GRAPH_DEFAULT_PAGE = 10;

// ---------------------------------------------------------------------------------------------------------
// MIME helpers

interface Header {
  name: string;
  value: string;
}

interface MimePart {
  headers: Header[];
  mimeType: string;
  body: Buffer;
  parts: MimePart[];
  /** Gmail: the id attachments.get serves this part's body under (parts with a filename). */
  attachmentId?: string;
}

const rand = (bytes: number) => randomBytes(bytes).toString('base64url');
const hex = (bytes: number) => randomBytes(bytes).toString('hex');

function splitMessage(raw: string): { head: string; body: string } {
  const lead = /^\r?\n/.exec(raw);
  if (lead) return { head: '', body: raw.slice(lead[0].length) };
  const m = /\r?\n\r?\n/.exec(raw);
  if (!m) return { head: raw, body: '' };
  return { head: raw.slice(0, m.index), body: raw.slice(m.index + m[0].length) };
}

function parseHeaderBlock(head: string): Header[] {
  const out: Header[] = [];
  for (const line of head.split(/\r?\n/)) {
    const last = out[out.length - 1];
    if (/^[ \t]/.test(line)) {
      if (last) last.value = `${last.value} ${line.trim()}`.trim();
      continue;
    }
    const i = line.indexOf(':');
    if (i <= 0) continue;
    out.push({ name: line.slice(0, i).trim(), value: line.slice(i + 1).trim() });
  }
  return out;
}

const headerValue = (headers: Header[], name: string) => headers.find((h) => h.name.toLowerCase() === name.toLowerCase())?.value;

function headerParam(value: string, name: string): string | undefined {
  const m = new RegExp(`(?:^|;)\\s*${name}\\s*=\\s*(?:"([^"]*)"|([^;\\s]*))`, 'i').exec(value);
  return m ? (m[1] ?? m[2]) : undefined;
}

function decodeQuotedPrintable(s: string): Buffer {
  const chunks: Buffer[] = [];
  for (const token of s.replace(/=\r?\n/g, '').split(/(=[0-9A-Fa-f]{2})/)) {
    if (/^=[0-9A-Fa-f]{2}$/.test(token)) chunks.push(Buffer.from([parseInt(token.slice(1), 16)]));
    else if (token) chunks.push(Buffer.from(token, 'utf8'));
  }
  return Buffer.concat(chunks);
}

function decodeCharset(bytes: Buffer, charset: string | undefined): string {
  try {
    return new TextDecoder((charset ?? 'utf-8').split('*')[0]).decode(bytes);
  } catch {
    return bytes.toString('utf8');
  }
}

const ENCODED_WORD = /=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=/g;

function decodeEncodedWords(value: string): string {
  return value
    .replace(/(=\?[^?\s]+\?[BbQq]\?[^?\s]*\?=)\s+(?==\?[^?\s]+\?[BbQq]\?[^?\s]*\?=)/g, '$1')
    .replace(ENCODED_WORD, (_all, charset: string, enc: string, text: string) => {
      const bytes = enc.toUpperCase() === 'B' ? Buffer.from(text, 'base64') : decodeQuotedPrintable(text.replace(/_/g, ' '));
      return decodeCharset(bytes, charset);
    });
}

function splitMultipart(body: string, boundary: string): string[] {
  const parts: string[] = [];
  let current: string[] | undefined;
  for (const line of body.split(/\r?\n/)) {
    const trimmed = line.trimEnd();
    if (trimmed === `--${boundary}--`) {
      if (current) parts.push(current.join('\r\n'));
      current = undefined;
      return parts;
    }
    if (trimmed === `--${boundary}`) {
      if (current) parts.push(current.join('\r\n'));
      current = [];
      continue;
    }
    current?.push(line);
  }
  if (current) parts.push(current.join('\r\n'));
  return parts;
}

function parseMime(raw: string, depth = 0): MimePart {
  const { head, body } = splitMessage(raw);
  const headers = parseHeaderBlock(head);
  const contentType = headerValue(headers, 'content-type') ?? 'text/plain';
  const mimeType = (contentType.split(';')[0] ?? '').trim().toLowerCase() || 'text/plain';
  const boundary = headerParam(contentType, 'boundary');
  if (mimeType.startsWith('multipart/') && boundary && depth < 10) {
    return { headers, mimeType, body: Buffer.alloc(0), parts: splitMultipart(body, boundary).map((p) => parseMime(p, depth + 1)) };
  }
  const cte = (headerValue(headers, 'content-transfer-encoding') ?? '').trim().toLowerCase();
  const bytes =
    cte === 'base64' ? Buffer.from(body.replace(/\s+/g, ''), 'base64') : cte === 'quoted-printable' ? decodeQuotedPrintable(body) : Buffer.from(body, 'utf8');
  return { headers, mimeType, body: bytes, parts: [] };
}

/** Every leaf part, depth first. */
function leaves(part: MimePart): MimePart[] {
  return part.parts.length === 0 ? [part] : part.parts.flatMap(leaves);
}

function findPart(part: MimePart, mimeType: string): MimePart | undefined {
  if (part.parts.length === 0) return part.mimeType === mimeType ? part : undefined;
  for (const child of part.parts) {
    const hit = findPart(child, mimeType);
    if (hit) return hit;
  }
  return undefined;
}

function partText(part: MimePart | undefined): string | undefined {
  if (!part) return undefined;
  return decodeCharset(part.body, headerParam(headerValue(part.headers, 'content-type') ?? '', 'charset'));
}

function headerRecord(headers: Header[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of headers) {
    const name = h.name.toLowerCase();
    const value = decodeEncodedWords(h.value);
    out[name] = out[name] === undefined ? value : `${out[name]}, ${value}`;
  }
  return out;
}

function toSentMessage(raw: string): SentMessage {
  const root = parseMime(raw);
  return { raw, headers: headerRecord(root.headers), text: partText(findPart(root, 'text/plain')) ?? '' };
}

const NEW_THREAD = '\u0000new-thread';
const NO_BODY = Symbol('no body');

/** A subject without its reply/forward prefixes, for Gmail's "the Subject headers must match". */
function baseSubject(subject: string): string {
  let s = subject.trim();
  for (;;) {
    const lower = s.toLowerCase();
    const prefix = ['re:', 'fwd:', 'fw:'].find((p) => lower.startsWith(p));
    if (!prefix) return s.toLowerCase();
    s = s.slice(prefix.length).trim();
  }
}

const normalizeMessageId = (id: string) => {
  const t = id.trim();
  return t.startsWith('<') ? t : `<${t}>`;
};

const messageIdsIn = (value: string | undefined): string[] => (value ? (value.match(/<[^<>\s]+>/g) ?? []) : []);

const needsEncoding = (s: string) => /[^\x20-\x7e]/.test(s);
const encodeWord = (s: string) => (needsEncoding(s) ? `=?UTF-8?B?${Buffer.from(s, 'utf8').toString('base64')}?=` : s);

function formatAddress(address: string, name?: string): string {
  if (!name) return address;
  if (needsEncoding(name)) return `${encodeWord(name)} <${address}>`;
  return `"${name.replace(/["\\]/g, '\\$&')}" <${address}>`;
}

const rfc2822Date = (d: Date) => d.toUTCString().replace(/GMT$/, '+0000');
const isoSeconds = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

function mimeLeaf(contentType: string, content: string): string[] {
  const ascii = !/[^\x00-\x7e]/.test(content) && content.split(/\r?\n/).every((l) => l.length <= 900);
  if (ascii) return [`Content-Type: ${contentType}; charset="UTF-8"`, 'Content-Transfer-Encoding: 7bit', '', content.replace(/\r?\n/g, '\r\n')];
  const b64 = Buffer.from(content, 'utf8').toString('base64').replace(/.{76}/g, '$&\r\n');
  return [`Content-Type: ${contentType}; charset="UTF-8"`, 'Content-Transfer-Encoding: base64', '', b64];
}

function buildInboundRaw(to: string, msg: DeliverOptions, date: Date): string {
  const refs = typeof msg.references === 'string' ? msg.references.split(/\s+/).filter(Boolean) : (msg.references ?? []);
  const lines = [
    `Date: ${rfc2822Date(date)}`,
    `From: ${formatAddress(msg.from, msg.fromName)}`,
    `To: ${to}`,
    `Subject: ${encodeWord(msg.subject)}`,
    `Message-ID: ${normalizeMessageId(msg.messageId)}`,
  ];
  if (msg.inReplyTo) lines.push(`In-Reply-To: ${normalizeMessageId(msg.inReplyTo)}`);
  if (refs.length > 0) lines.push(`References: ${refs.map(normalizeMessageId).join(' ')}`);
  lines.push('MIME-Version: 1.0');
  const files = (msg.attachments ?? []).filter((a) => (a.kind ?? 'file') === 'file');
  if (files.length === 0) return [...lines, ...textEntity(msg)].join('\r\n');
  const mixed = `000000000000${hex(8)}`;
  const out = [...lines, `Content-Type: multipart/mixed; boundary="${mixed}"`, '', `--${mixed}`, ...textEntity(msg)];
  for (const a of files) {
    const type = a.contentType ?? 'application/octet-stream';
    out.push(
      `--${mixed}`,
      `Content-Type: ${type}; name="${a.name}"`,
      `Content-Disposition: ${a.contentId ? 'inline' : 'attachment'}; filename="${a.name}"`,
      'Content-Transfer-Encoding: base64',
      ...(a.contentId ? [`Content-ID: <${a.contentId}>`, `X-Attachment-Id: ${a.contentId}`] : []),
      '',
      (a.content ?? Buffer.alloc(0)).toString('base64').replace(/.{76}/g, '$&\r\n'),
    );
  }
  out.push(`--${mixed}--`, '');
  return out.join('\r\n');
}

/** The message's text: a text/plain leaf, or multipart/alternative with the HTML. */
function textEntity(msg: DeliverOptions): string[] {
  if (msg.html === undefined) return mimeLeaf('text/plain', msg.text);
  const boundary = `000000000000${hex(8)}`;
  return [
    `Content-Type: multipart/alternative; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    ...mimeLeaf('text/plain', msg.text),
    `--${boundary}`,
    ...mimeLeaf('text/html', msg.html),
    `--${boundary}--`,
    '',
  ];
}

/** A part's file name: Content-Disposition's filename, else Content-Type's name ('' when neither). */
function partFilename(part: MimePart): string {
  return headerParam(headerValue(part.headers, 'content-disposition') ?? '', 'filename') ?? headerParam(headerValue(part.headers, 'content-type') ?? '', 'name') ?? '';
}

const escapeHtml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const textToHtml = (t: string) =>
  `<html><head>\r\n<meta http-equiv="Content-Type" content="text/html; charset=utf-8">\r\n</head>\r\n<body>\r\n<div>${escapeHtml(t).replace(/\r?\n/g, '<br>\r\n')}</div>\r\n</body>\r\n</html>\r\n`;

const hasRecipient = (headers: Header[]) => ['to', 'cc', 'bcc'].some((n) => (headerValue(headers, n) ?? '').includes('@'));

// ---------------------------------------------------------------------------------------------------------
// State

interface Account {
  email: string;
  name: string;
  userId: string;
  scopes: string[];
  /** Logical clock of the last setScopes; a later issueCode wins over it, an earlier one loses. */
  scopesSetAt: number;
}

interface CodeGrant {
  email: string;
  scopes: string[];
  refreshToken?: string;
  redirectUri?: string;
  issuedAt: number;
  expiresAt: number;
  used: boolean;
  revoked: boolean;
}

interface AccessGrant {
  email: string;
  scopes: string[];
  expiresAt: number;
  revoked: boolean;
}

interface ProviderState {
  down: boolean;
  accounts: Map<string, Account>;
  codes: Map<string, CodeGrant>;
  refreshTokens: Map<string, { email: string; revoked: boolean }>;
  accessTokens: Map<string, AccessGrant>;
  sent: Map<string, SentMessage[]>;
}

interface GmailMessage {
  id: string;
  threadId: string;
  labelIds: string[];
  historyId: number;
  internalDate: number;
  raw: string;
  root: MimePart;
  messageId?: string;
}

interface GmailMailbox {
  historyId: number;
  minHistoryId: number;
  messages: Map<string, GmailMessage>;
  history: GmailMessage[];
}

interface GraphAttachment {
  id: string;
  kind: 'file' | 'item' | 'reference';
  name: string;
  contentType: string;
  content: Buffer;
  isInline: boolean;
  contentId?: string;
  lastModified: Date;
}

interface GraphMessage {
  id: string;
  attachments: GraphAttachment[];
  seq: number;
  changeKey: string;
  conversationId: string;
  internetMessageId: string;
  subject: string;
  from: { address: string; name: string };
  to: string;
  received: Date;
  text: string;
  html?: string;
  headers: Header[];
}

interface GraphMailbox {
  seq: number;
  messages: GraphMessage[];
}

interface DeltaState {
  kind: 'delta' | 'skip';
  email: string;
  after: number;
  until: number;
  select?: string[];
  pageSize: number;
}

const newProviderState = (): ProviderState => ({
  down: false,
  accounts: new Map(),
  codes: new Map(),
  refreshTokens: new Map(),
  accessTokens: new Map(),
  sent: new Map(),
});

const normalizeScopes = (scopes: string[] | string) => (typeof scopes === 'string' ? scopes.split(/\s+/) : scopes).filter(Boolean);
const key = (email: string) => email.trim().toLowerCase();

// ---------------------------------------------------------------------------------------------------------
// Graph message projection

type Json = Record<string, unknown>;

const GRAPH_SELECT_ONLY = ['internetMessageHeaders', 'uniqueBody'];

function graphProperties(m: GraphMessage, bodyType: 'text' | 'html'): Json {
  const body = { contentType: bodyType, content: bodyType === 'text' ? m.text : (m.html ?? textToHtml(m.text)) };
  const from = { emailAddress: { name: m.from.name, address: m.from.address } };
  const received = isoSeconds(m.received);
  return {
    createdDateTime: received,
    lastModifiedDateTime: received,
    changeKey: m.changeKey,
    categories: [],
    receivedDateTime: received,
    sentDateTime: received,
    // Graph's hasAttachments leaves out inline attachments ("a message with only inline attachments: false").
    hasAttachments: (m.attachments ?? []).some((a) => !a.isInline),
    internetMessageId: m.internetMessageId,
    subject: m.subject,
    bodyPreview: m.text.replace(/\s+/g, ' ').trim().slice(0, 255),
    importance: 'normal',
    parentFolderId: 'AQMkADAwATM0MDAAMS1iNTcwLWI2NTEtMDACLTAwCgAuAAADinbox',
    conversationId: m.conversationId,
    isDeliveryReceiptRequested: false,
    isReadReceiptRequested: false,
    isRead: false,
    isDraft: false,
    webLink: `https://outlook.office365.com/owa/?ItemID=${encodeURIComponent(m.id)}&exvsurl=1&viewmodel=ReadMessageItem`,
    inferenceClassification: 'focused',
    body,
    sender: from,
    from,
    toRecipients: [{ emailAddress: { name: m.to, address: m.to } }],
    ccRecipients: [],
    bccRecipients: [],
    replyTo: [],
    flag: { flagStatus: 'notFlagged' },
    internetMessageHeaders: m.headers.map((h) => ({ name: h.name, value: h.value })),
    uniqueBody: body,
  };
}

const GRAPH_PROPERTY_NAMES = Object.keys(
  graphProperties(
    { id: '', attachments: [], seq: 0, changeKey: '', conversationId: '', internetMessageId: '', subject: '', from: { address: '', name: '' }, to: '', received: new Date(0), text: '', headers: [] },
    'text',
  ),
);

function graphMessageJson(m: GraphMessage, select: string[] | undefined, bodyType: 'text' | 'html', withType: boolean): Json {
  const all = graphProperties(m, bodyType);
  const out: Json = {};
  if (withType) out['@odata.type'] = '#microsoft.graph.message';
  out['@odata.etag'] = `W/"${m.changeKey}"`;
  out.id = m.id;
  for (const [name, value] of Object.entries(all)) {
    const wanted = select ? select.includes(name) : !GRAPH_SELECT_ONLY.includes(name);
    if (wanted) out[name] = value;
  }
  return out;
}

/** $select names → canonical property names; undefined when absent, an Error naming the unknown one. */
function parseSelect(raw: string | null): string[] | undefined | Error {
  if (raw === null || raw.trim() === '') return undefined;
  const canonical = new Map(['id', ...GRAPH_PROPERTY_NAMES].map((n) => [n.toLowerCase(), n]));
  const out: string[] = [];
  for (const name of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const hit = canonical.get(name.toLowerCase());
    if (!hit) return new Error(`Could not find a property named '${name}' on type 'microsoft.graph.message'.`);
    out.push(hit);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// HTTP plumbing

interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  body: Buffer;
}

function send(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
  if (body === undefined) {
    res.writeHead(status, headers);
    res.end();
    return;
  }
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': typeof body === 'string' ? 'text/html; charset=utf-8' : 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

const contentType = (req: IncomingMessage) => (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();

function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let tooBig = false;
    req.on('data', (c: Buffer) => {
      total += c.length;
      if (total > MAX_BODY_BYTES) tooBig = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(tooBig ? undefined : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const googleApiError = (res: ServerResponse, code: number, message: string, status: string, reason: string, headers: Record<string, string> = {}) =>
  send(res, code, { error: { code, message, errors: [{ message, domain: 'global', reason }], status } }, headers);

const graphError = (res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  send(res, status, { error: { code, message, innerError: { date: isoSeconds(new Date()), 'request-id': randomUUID(), 'client-request-id': randomUUID() } } }, headers);

const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

function oauthError(res: ServerResponse, provider: MailProvider, status: number, error: string, description: string): void {
  if (provider === 'google') {
    send(res, status, { error, error_description: description }, NO_STORE);
    return;
  }
  const codes = /^AADSTS(\d+)/.exec(description);
  send(
    res,
    status,
    {
      error,
      error_description: `${description}\r\nTrace ID: ${randomUUID()}\r\nCorrelation ID: ${randomUUID()}\r\nTimestamp: ${new Date().toISOString().replace('T', ' ')}`,
      error_codes: codes ? [Number(codes[1])] : [],
      timestamp: new Date().toISOString().replace('T', ' '),
      trace_id: randomUUID(),
      correlation_id: randomUUID(),
    },
    NO_STORE,
  );
}

// ---------------------------------------------------------------------------------------------------------

export async function startMailProviderDouble(options: MailProviderDoubleOptions = {}): Promise<MailProviderDouble> {
  const state: Record<MailProvider, ProviderState> = { google: newProviderState(), microsoft: newProviderState() };
  const gmail = new Map<string, GmailMailbox>();
  const graph = new Map<string, GraphMailbox>();
  const deltaStates = new Map<string, DeltaState>();
  const requests: ProviderRequest[] = [];
  let clock = 0;
  let baseUrl = '';

  // --- accounts and tokens -------------------------------------------------------------------------------

  function ensureAccount(provider: MailProvider, email: string, name?: string): Account {
    const k = key(email);
    let account = state[provider].accounts.get(k);
    if (!account) {
      const local = email.split('@')[0] ?? email;
      account = { email: email.trim(), name: name ?? local.charAt(0).toUpperCase() + local.slice(1), userId: randomUUID(), scopes: [], scopesSetAt: -1 };
      state[provider].accounts.set(k, account);
    } else if (name) {
      account.name = name;
    }
    return account;
  }

  function issueAccessToken(provider: MailProvider, email: string, scopes: string[]): string {
    const token = provider === 'google' ? `ya29.a0${rand(48)}` : `EwB${rand(60)}`;
    state[provider].accessTokens.set(token, { email: key(email), scopes, expiresAt: Date.now() + ACCESS_TOKEN_TTL_S * 1000, revoked: false });
    return token;
  }

  const newRefreshToken = (provider: MailProvider) => (provider === 'google' ? `1//0${rand(48)}` : `M.C${rand(4)}_BAY.0.U.-${rand(64)}`);

  /** The access grant for the request, or undefined after answering 401 in the provider's style. */
  function authenticate(provider: MailProvider, ctx: Ctx): AccessGrant | undefined {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(ctx.req.headers.authorization ?? '');
    const grant = m ? state[provider].accessTokens.get(m[1]!) : undefined;
    const expired = grant !== undefined && grant.expiresAt <= Date.now();
    if (grant && !grant.revoked && !expired) return grant;
    if (provider === 'google') {
      googleApiError(
        ctx.res,
        401,
        'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.',
        'UNAUTHENTICATED',
        'authError',
        { 'WWW-Authenticate': 'Bearer realm="https://accounts.google.com/", error="invalid_token"' },
      );
    } else {
      const message = !m ? 'Access token is empty.' : expired ? 'Lifetime validation failed, the token is expired.' : grant ? 'Access token has been revoked.' : 'IDX14100: JWT is not well formed, there are no dots (.).';
      graphError(ctx.res, 401, 'InvalidAuthenticationToken', message, {
        'WWW-Authenticate': 'Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", client_id="00000003-0000-0000-c000-000000000000"',
      });
    }
    return undefined;
  }

  /** With enforceScopes, answers 403 unless one granted scope ends with one of `anyOf` (case-insensitive). */
  function hasScope(provider: MailProvider, ctx: Ctx, grant: AccessGrant, anyOf: string[]): boolean {
    if (!options.enforceScopes) return true;
    const granted = grant.scopes.map((s) => s.toLowerCase());
    if (anyOf.some((want) => granted.some((g) => g === want.toLowerCase() || g.endsWith(`/${want.toLowerCase()}`) || g.endsWith(`.${want.toLowerCase()}`)))) return true;
    if (provider === 'google') googleApiError(ctx.res, 403, 'Request had insufficient authentication scopes.', 'PERMISSION_DENIED', 'insufficientPermissions');
    else graphError(ctx.res, 403, 'ErrorAccessDenied', 'Access is denied. Check credentials and try again.');
    return false;
  }

  // --- mailboxes -----------------------------------------------------------------------------------------

  function gmailBox(email: string): GmailMailbox {
    let box = gmail.get(key(email));
    if (!box) {
      box = { historyId: 1000, minHistoryId: 1000, messages: new Map(), history: [] };
      gmail.set(key(email), box);
    }
    return box;
  }

  /** Gmail's documented conditions for a sent message to join `threadId`: it answers a message of that thread (In-Reply-To or References) and its subject matches. */
  function joinsThread(box: GmailMailbox, threadId: string, headers: Header[]): boolean {
    const members = [...box.messages.values()].filter((m) => m.threadId === threadId);
    const related = [...messageIdsIn(headerValue(headers, 'in-reply-to')), ...messageIdsIn(headerValue(headers, 'references'))];
    if (!members.some((m) => m.messageId !== undefined && related.includes(m.messageId))) return false;
    const subject = baseSubject(decodeEncodedWords(headerValue(headers, 'subject') ?? ''));
    return members.some((m) => baseSubject(decodeEncodedWords(headerValue(m.root.headers, 'subject') ?? '')) === subject);
  }

  /** `threadId` NEW_THREAD files the message in a thread of its own; undefined threads it by its headers (inbound mail). */
  function gmailAdd(email: string, raw: string, labelIds: string[], threadId?: string, date = new Date(), inlineData: ReadonlySet<string> = new Set()): GmailMessage {
    const box = gmailBox(email);
    const root = parseMime(raw);
    // Parts with a filename are served by attachments.get, except those delivered to come inline (small parts).
    for (const leaf of leaves(root)) {
      const filename = partFilename(leaf);
      if (filename && !inlineData.has(filename)) leaf.attachmentId = `ANGjdJ${rand(96)}`;
    }
    const messageId = messageIdsIn(headerValue(root.headers, 'message-id'))[0];
    const related = [...messageIdsIn(headerValue(root.headers, 'in-reply-to')), ...messageIdsIn(headerValue(root.headers, 'references'))];
    let id = hex(8);
    while (box.messages.has(id)) id = hex(8);
    const parent = [...box.messages.values()].find((m) => m.messageId !== undefined && related.includes(m.messageId));
    box.historyId += 1 + Math.floor(Math.random() * 5);
    const msg: GmailMessage = { id, threadId: threadId === NEW_THREAD ? id : (threadId ?? parent?.threadId ?? id), labelIds, historyId: box.historyId, internalDate: date.getTime(), raw, root, messageId };
    box.messages.set(id, msg);
    box.history.push(msg);
    return msg;
  }

  function graphBox(email: string): GraphMailbox {
    let box = graph.get(key(email));
    if (!box) {
      box = { seq: 0, messages: [] };
      graph.set(key(email), box);
    }
    return box;
  }

  function recordSent(provider: MailProvider, email: string, raw: string, filed: Pick<SentMessage, 'threadId' | 'conversationId' | 'repliedTo'> = {}): void {
    const list = state[provider].sent.get(key(email)) ?? [];
    list.push({ ...toSentMessage(raw), ...filed });
    state[provider].sent.set(key(email), list);
  }

  // --- OAuth ---------------------------------------------------------------------------------------------

  function authorize(provider: MailProvider, ctx: Ctx): void {
    const q = ctx.url.searchParams;
    const redirectUri = q.get('redirect_uri');
    if (q.get('client_id') !== CLIENTS[provider].id) return send(ctx.res, 400, '<html><body><h1>Error 401: invalid_client</h1><p>The OAuth client was not found.</p></body></html>');
    if (!redirectUri || q.get('response_type') !== 'code') return send(ctx.res, 400, '<html><body><h1>Error 400: invalid_request</h1></body></html>');
    const hint = q.get('login_hint');
    if (!hint) return send(ctx.res, 200, `<html><body><h1>Sign in</h1><p>${provider} consent page (double): pass login_hint to be redirected with a code.</p></body></html>`);
    const scopes = normalizeScopes(q.get('scope') ?? '');
    const code = issueCode(provider, { email: hint, scopes, redirectUri });
    const target = new URL(redirectUri);
    target.searchParams.set('code', code);
    if (q.get('state') !== null) target.searchParams.set('state', q.get('state')!);
    if (provider === 'google') target.searchParams.set('scope', scopes.join(' '));
    else target.searchParams.set('session_state', randomUUID());
    send(ctx.res, 302, undefined, { Location: target.toString() });
  }

  function token(provider: MailProvider, ctx: Ctx): void {
    const st = state[provider];
    const ms = provider === 'microsoft';
    const ct = contentType(ctx.req);
    let params: URLSearchParams;
    if (ct === 'application/x-www-form-urlencoded') {
      params = new URLSearchParams(ctx.body.toString('utf8'));
    } else if (!ms && ct === 'application/json') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(ctx.body.toString('utf8'));
      } catch {
        return oauthError(ctx.res, provider, 400, 'invalid_request', 'Invalid JSON payload received.');
      }
      params = new URLSearchParams();
      if (parsed && typeof parsed === 'object') {
        for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string' || typeof v === 'number') params.set(k, String(v));
      }
    } else {
      return ms
        ? oauthError(ctx.res, provider, 400, 'invalid_request', "AADSTS900144: The request body must contain the following parameter: 'grant_type'.")
        : oauthError(ctx.res, provider, 400, 'invalid_request', 'Invalid content type; use application/x-www-form-urlencoded.');
    }
    const missing = (name: string) =>
      oauthError(ctx.res, provider, 400, 'invalid_request', ms ? `AADSTS900144: The request body must contain the following parameter: '${name}'.` : `Missing required parameter: ${name}`);

    // Client authentication: client_secret_post, or client_secret_basic.
    let clientId = params.get('client_id');
    let clientSecret = params.get('client_secret');
    const basic = /^Basic\s+(\S+)$/i.exec(ctx.req.headers.authorization ?? '');
    if (basic) {
      const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
      const i = decoded.indexOf(':');
      if (i >= 0) {
        clientId ??= decodeURIComponent(decoded.slice(0, i));
        clientSecret ??= decodeURIComponent(decoded.slice(i + 1));
      }
    }
    const grantType = params.get('grant_type');
    if (!grantType) return missing('grant_type');
    if (!clientId) return missing('client_id');
    if (clientId !== CLIENTS[provider].id) {
      return ms
        ? oauthError(ctx.res, provider, 400, 'unauthorized_client', `AADSTS700016: Application with identifier '${clientId}' was not found in the directory.`)
        : oauthError(ctx.res, provider, 401, 'invalid_client', 'The OAuth client was not found.');
    }
    if (!clientSecret) {
      return ms
        ? oauthError(ctx.res, provider, 401, 'invalid_client', "AADSTS7000218: The request body must contain the following parameter: 'client_assertion' or 'client_secret'.")
        : oauthError(ctx.res, provider, 400, 'invalid_request', 'client_secret is missing.');
    }
    if (clientSecret !== CLIENTS[provider].secret) {
      return oauthError(ctx.res, provider, 401, 'invalid_client', ms ? `AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '${clientId}'.` : 'Unauthorized');
    }

    if (grantType === 'authorization_code') {
      const code = params.get('code');
      if (!code) return missing('code');
      const redirectUri = params.get('redirect_uri');
      if (!redirectUri) return missing('redirect_uri');
      const grant = st.codes.get(code);
      if (!grant || grant.revoked || grant.expiresAt <= Date.now()) {
        return oauthError(ctx.res, provider, 400, 'invalid_grant', ms ? 'AADSTS70008: The provided authorization code or refresh token has expired due to inactivity. Send a new interactive authorization request for this user and resource.' : 'Malformed auth code.');
      }
      if (grant.used) {
        return oauthError(ctx.res, provider, 400, 'invalid_grant', ms ? 'AADSTS54005: OAuth2 Authorization code was already redeemed, please retry with a new valid code or use an existing refresh token.' : 'Bad Request');
      }
      if (grant.redirectUri !== undefined && grant.redirectUri !== redirectUri) {
        return ms
          ? oauthError(ctx.res, provider, 400, 'invalid_grant', "AADSTS500112: The reply address does not match the reply address provided when requesting Authorization code.")
          : oauthError(ctx.res, provider, 400, 'redirect_uri_mismatch', 'Bad Request');
      }
      grant.used = true;
      const account = ensureAccount(provider, grant.email);
      account.scopes = account.scopesSetAt > grant.issuedAt ? account.scopes : grant.scopes;
      const refreshToken = grant.refreshToken ?? newRefreshToken(provider);
      st.refreshTokens.set(refreshToken, { email: key(grant.email), revoked: false });
      const accessToken = issueAccessToken(provider, grant.email, account.scopes);
      const scope = account.scopes.join(' ');
      return send(
        ctx.res,
        200,
        ms
          ? { token_type: 'Bearer', scope, expires_in: ACCESS_TOKEN_TTL_S, ext_expires_in: ACCESS_TOKEN_TTL_S, access_token: accessToken, refresh_token: refreshToken }
          : { access_token: accessToken, expires_in: ACCESS_TOKEN_TTL_S, refresh_token: refreshToken, scope, token_type: 'Bearer' },
        NO_STORE,
      );
    }

    if (grantType === 'refresh_token') {
      const refreshToken = params.get('refresh_token');
      if (!refreshToken) return missing('refresh_token');
      const rec = st.refreshTokens.get(refreshToken);
      if (!rec || rec.revoked) {
        return oauthError(ctx.res, provider, 400, 'invalid_grant', ms ? "AADSTS70000: The provided grant has expired due to it being revoked, a fresh auth token is needed. The user might have changed or reset their password." : 'Token has been expired or revoked.');
      }
      const account = ensureAccount(provider, rec.email);
      const accessToken = issueAccessToken(provider, rec.email, account.scopes);
      const scope = account.scopes.join(' ');
      if (!ms) return send(ctx.res, 200, { access_token: accessToken, expires_in: ACCESS_TOKEN_TTL_S, scope, token_type: 'Bearer' }, NO_STORE);
      // Microsoft rotates the refresh token; the old one stays usable (as it does in practice until it ages out).
      const rotated = newRefreshToken(provider);
      st.refreshTokens.set(rotated, { email: rec.email, revoked: false });
      return send(ctx.res, 200, { token_type: 'Bearer', scope, expires_in: ACCESS_TOKEN_TTL_S, ext_expires_in: ACCESS_TOKEN_TTL_S, access_token: accessToken, refresh_token: rotated }, NO_STORE);
    }

    return oauthError(ctx.res, provider, 400, 'unsupported_grant_type', ms ? `AADSTS70003: The app requested an unsupported grant type '${grantType}'.` : `Invalid grant_type: ${grantType}`);
  }

  // --- Gmail ---------------------------------------------------------------------------------------------

  /** Authenticates and checks the {userId} path segment ("me" or the user's own address). */
  function gmailUser(ctx: Ctx, userId: string, scopes: string[]): AccessGrant | undefined {
    const grant = authenticate('google', ctx);
    if (!grant) return undefined;
    const who = decodeURIComponent(userId);
    if (who !== 'me' && key(who) !== grant.email) {
      googleApiError(ctx.res, 403, `Delegation denied for ${grant.email}`, 'PERMISSION_DENIED', 'forbidden');
      return undefined;
    }
    return hasScope('google', ctx, grant, scopes) ? grant : undefined;
  }

  const READ_SCOPES = ['gmail.readonly', 'gmail.modify', 'mail.google.com/'];
  const SEND_SCOPES = ['gmail.send', 'gmail.compose', 'gmail.modify', 'mail.google.com/'];

  function gmailProfile(ctx: Ctx, userId: string): void {
    const grant = gmailUser(ctx, userId, [...READ_SCOPES, 'gmail.metadata']);
    if (!grant) return;
    const box = gmailBox(grant.email);
    const account = ensureAccount('google', grant.email);
    send(ctx.res, 200, {
      emailAddress: account.email,
      messagesTotal: box.messages.size,
      threadsTotal: new Set([...box.messages.values()].map((m) => m.threadId)).size,
      historyId: String(box.historyId),
    });
  }

  function gmailHistory(ctx: Ctx, userId: string): void {
    const grant = gmailUser(ctx, userId, [...READ_SCOPES, 'gmail.metadata']);
    if (!grant) return;
    const box = gmailBox(grant.email);
    const q = ctx.url.searchParams;
    const startRaw = q.get('startHistoryId');
    if (startRaw === null) return googleApiError(ctx.res, 400, 'Missing required parameter: startHistoryId', 'INVALID_ARGUMENT', 'required');
    if (!/^\d+$/.test(startRaw)) return googleApiError(ctx.res, 400, 'Invalid startHistoryId', 'INVALID_ARGUMENT', 'invalidArgument');
    const start = Number(startRaw);
    if (start < box.minHistoryId) return googleApiError(ctx.res, 404, 'Requested entity was not found.', 'NOT_FOUND', 'notFound');
    const types = q.getAll('historyTypes').flatMap((t) => t.split(','));
    const labelId = q.get('labelId');
    const maxResults = Math.min(Math.max(Number(q.get('maxResults') ?? 100) || 100, 1), 500);
    const pageToken = q.get('pageToken');
    if (pageToken !== null && !/^\d+$/.test(pageToken)) return googleApiError(ctx.res, 400, 'Invalid pageToken', 'INVALID_ARGUMENT', 'invalidArgument');
    const after = pageToken !== null ? Math.max(Number(pageToken), start) : start;
    const matching = box.history.filter((m) => m.historyId > after && (labelId === null || m.labelIds.includes(labelId)) && (types.length === 0 || types.includes('messageAdded')));
    const page = matching.slice(0, maxResults);
    const body: Json = {};
    if (page.length > 0) {
      body.history = page.map((m) => ({
        id: String(m.historyId),
        messages: [{ id: m.id, threadId: m.threadId }],
        messagesAdded: [{ message: { id: m.id, threadId: m.threadId, labelIds: [...m.labelIds] } }],
      }));
    }
    if (matching.length > page.length) body.nextPageToken = String(page[page.length - 1]!.historyId);
    body.historyId = String(box.historyId);
    send(ctx.res, 200, body);
  }

  function gmailPayload(part: MimePart, partId: string): Json {
    const out: Json = {
      partId,
      mimeType: part.mimeType,
      filename: part.parts.length === 0 ? partFilename(part) : '',
      headers: part.headers.map((h) => ({ name: h.name, value: decodeEncodedWords(h.value) })),
    };
    if (part.parts.length > 0) {
      out.body = { size: 0 };
      out.parts = part.parts.map((p, i) => gmailPayload(p, partId === '' ? String(i) : `${partId}.${i}`));
    } else if (part.attachmentId) {
      out.body = { attachmentId: part.attachmentId, size: part.body.length };
    } else {
      out.body = part.body.length > 0 ? { size: part.body.length, data: part.body.toString('base64url') } : { size: 0 };
    }
    return out;
  }

  /** users.messages.attachments.get: the MessagePartBody of a part with an attachmentId. */
  function gmailAttachment(ctx: Ctx, userId: string, messageId: string, attachmentId: string): void {
    const grant = gmailUser(ctx, userId, READ_SCOPES);
    if (!grant) return;
    const msg = gmailBox(grant.email).messages.get(decodeURIComponent(messageId));
    const part = msg ? leaves(msg.root).find((p) => p.attachmentId === decodeURIComponent(attachmentId)) : undefined;
    if (!part) return googleApiError(ctx.res, 404, 'Requested entity was not found.', 'NOT_FOUND', 'notFound');
    if (attachmentFailure.google !== null) return googleApiError(ctx.res, attachmentFailure.google, 'Internal error encountered.', 'INTERNAL', 'backendError');
    send(ctx.res, 200, { size: part.body.length, data: part.body.toString('base64url') });
  }

  function gmailGet(ctx: Ctx, userId: string, id: string): void {
    const grant = gmailUser(ctx, userId, READ_SCOPES);
    if (!grant) return;
    const msg = gmailBox(grant.email).messages.get(decodeURIComponent(id));
    if (!msg) return googleApiError(ctx.res, 404, 'Requested entity was not found.', 'NOT_FOUND', 'notFound');
    const format = ctx.url.searchParams.get('format') ?? 'full';
    if (!['full', 'metadata', 'minimal', 'raw'].includes(format)) return googleApiError(ctx.res, 400, `Invalid value at 'format' (type.googleapis.com/google.apps.gmail.v1.Format), "${format}"`, 'INVALID_ARGUMENT', 'badRequest');
    const text = partText(findPart(msg.root, 'text/plain')) ?? '';
    const body: Json = {
      id: msg.id,
      threadId: msg.threadId,
      labelIds: [...msg.labelIds],
      snippet: text.replace(/\s+/g, ' ').trim().slice(0, 100),
      sizeEstimate: Buffer.byteLength(msg.raw),
      historyId: String(msg.historyId),
      internalDate: String(msg.internalDate),
    };
    if (format === 'raw') body.raw = Buffer.from(msg.raw, 'utf8').toString('base64url');
    if (format === 'full') body.payload = gmailPayload(msg.root, '');
    if (format === 'metadata') {
      const wanted = ctx.url.searchParams.getAll('metadataHeaders').map((h) => h.toLowerCase());
      const headers = msg.root.headers.filter((h) => wanted.length === 0 || wanted.includes(h.name.toLowerCase()));
      body.payload = { partId: '', mimeType: msg.root.mimeType, filename: '', headers: headers.map((h) => ({ name: h.name, value: decodeEncodedWords(h.value) })), body: { size: 0 } };
    }
    send(ctx.res, 200, body);
  }

  function gmailSend(ctx: Ctx, userId: string, upload: boolean): void {
    const grant = gmailUser(ctx, userId, SEND_SCOPES);
    if (!grant) return;
    let raw: string;
    let threadId: string | undefined;
    if (upload) {
      raw = ctx.body.toString('utf8');
    } else {
      let parsed: unknown;
      try {
        parsed = JSON.parse(ctx.body.toString('utf8') || '{}');
      } catch {
        return googleApiError(ctx.res, 400, 'Invalid JSON payload received.', 'INVALID_ARGUMENT', 'parseError');
      }
      const obj = (parsed && typeof parsed === 'object' ? parsed : {}) as { raw?: unknown; threadId?: unknown };
      if (typeof obj.raw !== 'string' || obj.raw === '') {
        return googleApiError(ctx.res, 400, "'raw' RFC822 payload message string or uploading message via /upload/* URL required", 'INVALID_ARGUMENT', 'invalidArgument');
      }
      if (!/^[A-Za-z0-9+/_=\-\s]+$/.test(obj.raw)) return googleApiError(ctx.res, 400, "Invalid value for ByteString: raw", 'INVALID_ARGUMENT', 'invalidArgument');
      raw = Buffer.from(obj.raw, 'base64url').toString('utf8');
      if (obj.threadId !== undefined && obj.threadId !== null) {
        if (typeof obj.threadId !== 'string') return googleApiError(ctx.res, 400, 'Invalid thread_id value', 'INVALID_ARGUMENT', 'invalidArgument');
        threadId = obj.threadId;
      }
    }
    const box = gmailBox(grant.email);
    if (threadId !== undefined && ![...box.messages.values()].some((m) => m.threadId === threadId)) {
      return googleApiError(ctx.res, 404, 'Requested entity was not found.', 'NOT_FOUND', 'notFound');
    }
    const headers = parseMime(raw).headers;
    if (!hasRecipient(headers)) return googleApiError(ctx.res, 400, 'Recipient address required', 'INVALID_ARGUMENT', 'invalidArgument');
    const filed = threadId !== undefined && joinsThread(box, threadId, headers) ? threadId : undefined;
    // No thread (or one the message does not qualify for): a thread of its own, as Gmail files it.
    const msg = gmailAdd(grant.email, raw, ['SENT'], filed ?? NEW_THREAD);
    recordSent('google', grant.email, raw, { threadId: msg.threadId });
    send(ctx.res, 200, { id: msg.id, threadId: msg.threadId, labelIds: ['SENT'] });
  }

  // --- Graph ---------------------------------------------------------------------------------------------

  function bodyType(ctx: Ctx): { type: 'text' | 'html'; applied: Record<string, string> } {
    const m = /outlook\.body-content-type\s*=\s*"?(text|html)"?/i.exec(String(ctx.req.headers.prefer ?? ''));
    if (!m) return { type: 'html', applied: {} };
    const type = m[1]!.toLowerCase() as 'text' | 'html';
    return { type, applied: { 'Preference-Applied': `outlook.body-content-type="${type}"` } };
  }

  function graphMe(ctx: Ctx): void {
    const grant = authenticate('microsoft', ctx);
    if (!grant || !hasScope('microsoft', ctx, grant, ['User.Read', 'User.ReadBasic.All', 'User.Read.All'])) return;
    const account = ensureAccount('microsoft', grant.email);
    send(ctx.res, 200, {
      '@odata.context': `${baseUrl}/microsoft/graph/v1.0/$metadata#users/$entity`,
      businessPhones: [],
      displayName: account.name,
      givenName: account.name.split(' ')[0] ?? account.name,
      jobTitle: null,
      mail: account.email,
      mobilePhone: null,
      officeLocation: null,
      preferredLanguage: 'en-US',
      surname: account.name.split(' ').slice(1).join(' ') || null,
      userPrincipalName: account.email,
      id: account.userId,
    });
  }

  const MAIL_READ = ['Mail.Read', 'Mail.ReadWrite'];

  function graphDelta(ctx: Ctx): void {
    const grant = authenticate('microsoft', ctx);
    if (!grant || !hasScope('microsoft', ctx, grant, MAIL_READ)) return;
    const box = graphBox(grant.email);
    const q = ctx.url.searchParams;
    const deltaToken = q.get('$deltatoken') ?? q.get('deltatoken');
    const skipToken = q.get('$skiptoken') ?? q.get('skiptoken');
    const prefer = String(ctx.req.headers.prefer ?? '');
    const maxPage = /odata\.maxpagesize\s*=\s*(\d+)/i.exec(prefer);
    let round: DeltaState;
    const gone = () => graphError(ctx.res, 410, 'SyncStateNotFound', 'The sync state generation is not found or has expired. Please restart the sync without a state token.');
    if (skipToken !== null) {
      const s = deltaStates.get(skipToken);
      if (!s || s.kind !== 'skip' || s.email !== grant.email) return gone();
      round = s;
    } else if (deltaToken !== null) {
      if (deltaToken === 'latest') {
        round = { kind: 'delta', email: grant.email, after: box.seq, until: box.seq, pageSize: GRAPH_DEFAULT_PAGE };
      } else {
        const s = deltaStates.get(deltaToken);
        if (!s || s.kind !== 'delta' || s.email !== grant.email) return gone();
        round = { ...s, until: box.seq };
      }
    } else {
      const select = parseSelect(q.get('$select') ?? q.get('select'));
      if (select instanceof Error) return graphError(ctx.res, 400, 'RequestBroker--ParseUri', select.message);
      const top = Number(q.get('$top') ?? q.get('top') ?? '');
      round = { kind: 'delta', email: grant.email, after: 0, until: box.seq, select, pageSize: top > 0 ? top : GRAPH_DEFAULT_PAGE };
    }
    const pageSize = maxPage ? Math.max(1, Number(maxPage[1])) : round.pageSize;
    const pending = box.messages.filter((m) => m.seq > round.after && m.seq <= round.until);
    const page = deltaToken === 'latest' ? [] : pending.slice(0, pageSize);
    const { type, applied } = bodyType(ctx);
    const link = (param: string, s: DeltaState) => {
      const t = rand(32);
      deltaStates.set(t, s);
      return `${baseUrl}/microsoft/graph/v1.0/me/mailFolders/inbox/messages/delta?${param}=${t}`;
    };
    const body: Json = {
      '@odata.context': `${baseUrl}/microsoft/graph/v1.0/$metadata#Collection(message)`,
      value: page.map((m) => graphMessageJson(m, round.select, type, true)),
    };
    if (pending.length > page.length) {
      body['@odata.nextLink'] = link('$skiptoken', { ...round, kind: 'skip', after: page[page.length - 1]!.seq, pageSize: round.pageSize });
    } else {
      body['@odata.deltaLink'] = link('$deltatoken', { ...round, kind: 'delta', after: round.until });
    }
    send(ctx.res, 200, body, applied);
  }

  function graphGetMessage(ctx: Ctx, id: string): void {
    const grant = authenticate('microsoft', ctx);
    if (!grant || !hasScope('microsoft', ctx, grant, MAIL_READ)) return;
    const msg = graphBox(grant.email).messages.find((m) => m.id === id);
    if (!msg) return graphError(ctx.res, 404, 'ErrorItemNotFound', 'The specified object was not found in the store.');
    const select = parseSelect(ctx.url.searchParams.get('$select') ?? ctx.url.searchParams.get('select'));
    if (select instanceof Error) return graphError(ctx.res, 400, 'RequestBroker--ParseUri', select.message);
    const { type, applied } = bodyType(ctx);
    send(ctx.res, 200, { '@odata.context': `${baseUrl}/microsoft/graph/v1.0/$metadata#users('${grant.email}')/messages/$entity`, ...graphMessageJson(msg, select, type, false) }, applied);
  }

  const GRAPH_ATTACHMENT_PROPERTIES = ['id', 'lastModifiedDateTime', 'name', 'contentType', 'size', 'isInline', 'contentId', 'contentLocation', 'contentBytes'];

  function graphAttachmentJson(a: GraphAttachment, select: string[] | undefined): Json {
    const type = a.kind === 'file' ? '#microsoft.graph.fileAttachment' : a.kind === 'item' ? '#microsoft.graph.itemAttachment' : '#microsoft.graph.referenceAttachment';
    const all: Json = {
      id: a.id,
      lastModifiedDateTime: isoSeconds(a.lastModified),
      name: a.name,
      contentType: a.kind === 'item' ? null : a.contentType,
      size: a.content.length,
      isInline: a.isInline,
    };
    if (a.kind === 'file') Object.assign(all, { contentId: a.contentId ?? null, contentLocation: null, contentBytes: a.content.toString('base64') });
    const out: Json = { '@odata.type': type };
    if (a.kind === 'file') out['@odata.mediaContentType'] = a.contentType;
    for (const [name, value] of Object.entries(all)) if (!select || select.includes(name) || name === 'id') out[name] = value;
    return out;
  }

  /** GET /me/messages/{id}/attachments: every attachment with its @odata.type; $select narrows the properties. */
  function graphListAttachments(ctx: Ctx, id: string): void {
    const grant = authenticate('microsoft', ctx);
    if (!grant || !hasScope('microsoft', ctx, grant, MAIL_READ)) return;
    const msg = graphBox(grant.email).messages.find((m) => m.id === id);
    if (!msg) return graphError(ctx.res, 404, 'ErrorItemNotFound', 'The specified object was not found in the store.');
    const raw = ctx.url.searchParams.get('$select') ?? ctx.url.searchParams.get('select');
    let select: string[] | undefined;
    if (raw !== null && raw.trim() !== '') {
      select = [];
      for (const name of raw.split(',').map((n) => n.trim()).filter(Boolean)) {
        const hit = GRAPH_ATTACHMENT_PROPERTIES.find((p) => p.toLowerCase() === name.toLowerCase());
        if (!hit) return graphError(ctx.res, 400, 'RequestBroker--ParseUri', `Could not find a property named '${name}' on type 'microsoft.graph.attachment'.`);
        select.push(hit);
      }
    }
    send(ctx.res, 200, {
      '@odata.context': `${baseUrl}/microsoft/graph/v1.0/$metadata#users('${grant.email}')/messages('${msg.id}')/attachments`,
      value: msg.attachments.map((a) => graphAttachmentJson(a, select)),
    });
  }

  /** GET /me/messages/{id}/attachments/{id}/$value: a fileAttachment's raw bytes. */
  function graphAttachmentValue(ctx: Ctx, id: string, attachmentId: string): void {
    const grant = authenticate('microsoft', ctx);
    if (!grant || !hasScope('microsoft', ctx, grant, MAIL_READ)) return;
    const a = graphBox(grant.email).messages.find((m) => m.id === id)?.attachments.find((x) => x.id === attachmentId);
    if (!a) return graphError(ctx.res, 404, 'ErrorItemNotFound', 'The specified object was not found in the store.');
    if (a.kind !== 'file') return graphError(ctx.res, 400, 'ErrorInvalidRequest', 'The $value of this attachment type is not supported by this double.');
    if (attachmentFailure.microsoft !== null) return graphError(ctx.res, attachmentFailure.microsoft, 'ErrorInternalServerError', 'An internal server error occurred. The operation failed.');
    ctx.res.writeHead(200, { 'Content-Type': a.contentType, 'Content-Length': String(a.content.length) });
    ctx.res.end(a.content);
  }

  /** The JSON body, or NO_BODY after answering Graph's 400. */
  function graphJson(ctx: Ctx): unknown {
    try {
      return JSON.parse(ctx.body.toString('utf8'));
    } catch {
      graphError(ctx.res, 400, 'BadRequest', 'Unable to read JSON request payload. Please ensure Content-Type header is set and payload is of valid JSON format.');
      return NO_BODY;
    }
  }

  /** A MIME-format body (base64 RFC 5322) decoded, or undefined after answering Graph's 400. */
  function graphMime(ctx: Ctx): string | undefined {
    const b64 = ctx.body.toString('latin1').trim();
    if (b64 === '' || !/^[A-Za-z0-9+/=\r\n]+$/.test(b64)) {
      graphError(ctx.res, 400, 'ErrorMimeContentInvalidBase64String', 'Invalid base64 string for MIME content.');
      return undefined;
    }
    const raw = Buffer.from(b64, 'base64').toString('utf8');
    if (parseMime(raw).headers.length === 0) {
      graphError(ctx.res, 400, 'ErrorMimeContentInvalid', 'The MIME content is invalid.');
      return undefined;
    }
    return raw;
  }

  /**
   * The message a send or reply carries, as RFC 5322 text: JSON (built by `fromJson`, which answers its own
   * 400s and returns undefined) or MIME format (base64 as text/plain). Undefined once an error was answered.
   */
  function graphOutgoing(ctx: Ctx, fromJson: (parsed: unknown) => string | undefined): string | undefined {
    const ct = contentType(ctx.req);
    if (ct === 'application/json') {
      const parsed = graphJson(ctx);
      return parsed === NO_BODY ? undefined : fromJson(parsed);
    }
    if (ct === 'text/plain' || ct === '') return graphMime(ctx);
    graphError(ctx.res, 415, 'UnsupportedMediaType', `Content-Type '${ct}' is not supported; use application/json or text/plain (base64 MIME).`);
    return undefined;
  }

  function graphSendMail(ctx: Ctx): void {
    const grant = authenticate('microsoft', ctx);
    if (!grant || !hasScope('microsoft', ctx, grant, ['Mail.Send'])) return;
    const account = ensureAccount('microsoft', grant.email);
    const raw = graphOutgoing(ctx, (parsed) => {
      const message = (parsed as { message?: unknown } | null)?.message;
      if (!message || typeof message !== 'object') return void graphError(ctx.res, 400, 'ErrorInvalidRequest', 'The message parameter is required.');
      const m = message as {
        subject?: unknown;
        body?: { contentType?: unknown; content?: unknown };
        toRecipients?: unknown;
        ccRecipients?: unknown;
        bccRecipients?: unknown;
        internetMessageHeaders?: unknown;
      };
      const addresses = (list: unknown) =>
        (Array.isArray(list) ? list : [])
          .map((r: { emailAddress?: { address?: unknown; name?: unknown } }) => r?.emailAddress)
          .filter((e): e is { address: string; name?: unknown } => typeof e?.address === 'string')
          .map((e) => formatAddress(e.address, typeof e.name === 'string' ? e.name : undefined));
      const extra = Array.isArray(m.internetMessageHeaders) ? (m.internetMessageHeaders as Array<{ name?: unknown; value?: unknown }>) : [];
      const bad = extra.find((h) => typeof h?.name !== 'string' || !/^x-/i.test(h.name) || typeof h.value !== 'string');
      if (bad) {
        return void graphError(ctx.res, 400, 'InvalidInternetMessageHeader', `The internet message header name '${String(bad?.name)}' should start with 'x-' or 'X-'.`);
      }
      const to = addresses(m.toRecipients);
      const cc = addresses(m.ccRecipients);
      const bcc = addresses(m.bccRecipients);
      if (to.length + cc.length + bcc.length === 0) return void graphError(ctx.res, 400, 'ErrorInvalidRecipients', 'At least one recipient is required, but none were found.');
      const html = typeof m.body?.contentType === 'string' && m.body.contentType.toLowerCase() === 'html';
      const lines = [`Date: ${rfc2822Date(new Date())}`, `From: ${formatAddress(account.email, account.name)}`];
      if (to.length) lines.push(`To: ${to.join(', ')}`);
      if (cc.length) lines.push(`Cc: ${cc.join(', ')}`);
      if (bcc.length) lines.push(`Bcc: ${bcc.join(', ')}`);
      lines.push(`Subject: ${encodeWord(typeof m.subject === 'string' ? m.subject : '')}`, `Message-ID: <${hex(16)}@double.prod.outlook.com>`);
      for (const h of extra) lines.push(`${String(h.name)}: ${String(h.value)}`);
      lines.push('MIME-Version: 1.0', ...mimeLeaf(html ? 'text/html' : 'text/plain', typeof m.body?.content === 'string' ? m.body.content : ''));
      return lines.join('\r\n');
    });
    if (raw === undefined) return;
    if (!hasRecipient(parseMime(raw).headers)) return graphError(ctx.res, 400, 'ErrorInvalidRecipients', 'At least one recipient is required, but none were found.');
    recordSent('microsoft', grant.email, raw, { conversationId: `AAQkAD${rand(30)}AQA${rand(12)}=` });
    send(ctx.res, 202, undefined);
  }

  /** message: reply. MIME (base64, text/plain) as our client sends it, or JSON with a comment; filed in the original's conversation. */
  function graphReply(ctx: Ctx, id: string): void {
    const grant = authenticate('microsoft', ctx);
    if (!grant || !hasScope('microsoft', ctx, grant, ['Mail.Send'])) return;
    const original = graphBox(grant.email).messages.find((m) => m.id === id);
    if (!original) return graphError(ctx.res, 404, 'ErrorItemNotFound', 'The specified object was not found in the store.');
    const account = ensureAccount('microsoft', grant.email);
    const raw = graphOutgoing(ctx, (parsed) => {
      const comment = (parsed as { comment?: unknown } | null)?.comment;
      if (typeof comment !== 'string') return void graphError(ctx.res, 400, 'ErrorInvalidRequest', 'The comment parameter is required.');
      return [
        `Date: ${rfc2822Date(new Date())}`,
        `From: ${formatAddress(account.email, account.name)}`,
        `To: ${formatAddress(original.from.address, original.from.name)}`,
        `Subject: ${encodeWord(`RE: ${original.subject}`)}`,
        `Message-ID: <${hex(16)}@double.prod.outlook.com>`,
        `In-Reply-To: ${original.internetMessageId}`,
        `References: ${original.internetMessageId}`,
        'MIME-Version: 1.0',
        ...mimeLeaf('text/plain', comment),
      ].join('\r\n');
    });
    if (raw === undefined) return;
    recordSent('microsoft', grant.email, raw, { conversationId: original.conversationId, repliedTo: original.id });
    send(ctx.res, 202, undefined);
  }

  // --- routing -------------------------------------------------------------------------------------------

  interface Route {
    method: string;
    re: RegExp;
    handle: (ctx: Ctx, m: RegExpExecArray) => void;
  }
  const G = '^/google/gmail/gmail/v1/users/([^/]+)';
  const M = '^/microsoft/graph/v1\\.0/me';
  const INBOX = "/mailfolders(?:/inbox|\\('inbox'\\))";
  const routes: Record<MailProvider, Route[]> = {
    google: [
      { method: 'GET', re: /^\/google\/auth$/, handle: (ctx) => authorize('google', ctx) },
      { method: 'POST', re: /^\/google\/token$/, handle: (ctx) => token('google', ctx) },
      { method: 'GET', re: new RegExp(`${G}/profile$`), handle: (ctx, m) => gmailProfile(ctx, m[1]!) },
      { method: 'GET', re: new RegExp(`${G}/history$`), handle: (ctx, m) => gmailHistory(ctx, m[1]!) },
      { method: 'POST', re: new RegExp(`${G}/messages/send$`), handle: (ctx, m) => gmailSend(ctx, m[1]!, false) },
      { method: 'GET', re: new RegExp(`${G}/messages/([^/]+)$`), handle: (ctx, m) => gmailGet(ctx, m[1]!, m[2]!) },
      { method: 'GET', re: new RegExp(`${G}/messages/([^/]+)/attachments/([^/]+)$`), handle: (ctx, m) => gmailAttachment(ctx, m[1]!, m[2]!, m[3]!) },
      { method: 'POST', re: /^\/google\/gmail\/upload\/gmail\/v1\/users\/([^/]+)\/messages\/send$/, handle: (ctx, m) => gmailSend(ctx, m[1]!, true) },
    ],
    microsoft: [
      { method: 'GET', re: /^\/microsoft\/authorize$/, handle: (ctx) => authorize('microsoft', ctx) },
      { method: 'POST', re: /^\/microsoft\/token$/, handle: (ctx) => token('microsoft', ctx) },
      { method: 'GET', re: new RegExp(`${M}$`, 'i'), handle: (ctx) => graphMe(ctx) },
      { method: 'GET', re: new RegExp(`${M}${INBOX}/messages/delta(?:\\(\\))?$`, 'i'), handle: (ctx) => graphDelta(ctx) },
      { method: 'GET', re: new RegExp(`${M}(?:${INBOX})?/messages/([^/]+)$`, 'i'), handle: (ctx, m) => graphGetMessage(ctx, m[1]!) },
      { method: 'POST', re: new RegExp(`${M}/sendmail$`, 'i'), handle: (ctx) => graphSendMail(ctx) },
      { method: 'GET', re: new RegExp(`${M}(?:${INBOX})?/messages/([^/]+)/attachments$`, 'i'), handle: (ctx, m) => graphListAttachments(ctx, m[1]!) },
      { method: 'GET', re: new RegExp(`${M}(?:${INBOX})?/messages/([^/]+)/attachments/([^/]+)/\\$value$`, 'i'), handle: (ctx, m) => graphAttachmentValue(ctx, m[1]!, m[2]!) },
      { method: 'POST', re: new RegExp(`${M}(?:${INBOX})?/messages/([^/]+)/reply$`, 'i'), handle: (ctx, m) => graphReply(ctx, decodeURIComponent(m[1]!)) },
    ],
  };

  function notFound(provider: MailProvider | undefined, res: ServerResponse, status = 404): void {
    const message = status === 405 ? 'Method not allowed.' : 'Not found.';
    if (provider === 'microsoft') return graphError(res, status, status === 405 ? 'Request_BadRequest' : 'ResourceNotFound', message);
    if (provider === 'google') return googleApiError(res, status, message, status === 405 ? 'INVALID_ARGUMENT' : 'NOT_FOUND', status === 405 ? 'badRequest' : 'notFound');
    send(res, status, { error: { code: status, message } });
  }

  function unavailable(provider: MailProvider, path: string, res: ServerResponse): void {
    const retry = { 'Retry-After': '1' };
    if (path === '/google/token' || path === '/microsoft/token') {
      return oauthError(res, provider, 503, 'temporarily_unavailable', provider === 'microsoft' ? 'AADSTS90033: A transient error has occurred. Please try again.' : 'The service is currently unavailable.');
    }
    if (provider === 'google') return googleApiError(res, 503, 'The service is currently unavailable.', 'UNAVAILABLE', 'backendError', retry);
    return graphError(res, 503, 'ServiceNotAvailable', 'The service is temporarily unavailable. Please retry later.', retry);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', baseUrl);
    const path = url.pathname;
    const method = (req.method ?? 'GET').toUpperCase();
    const provider: MailProvider | undefined = /^\/google(\/|$)/.test(path) ? 'google' : /^\/microsoft(\/|$)/.test(path) ? 'microsoft' : undefined;
    if (provider) requests.push({ provider, method, path });
    const body = await readBody(req);
    if (!provider) return notFound(undefined, res);
    if (state[provider].down) return unavailable(provider, path, res);
    if (body === undefined) return send(res, 413, { error: { code: 413, message: 'Request entity too large.' } });
    let decoded = path;
    try {
      decoded = decodeURIComponent(path);
    } catch {
      // keep the raw path
    }
    const matches = routes[provider].map((r) => ({ r, m: r.re.exec(provider === 'microsoft' ? decoded : path) })).filter((x) => x.m !== null);
    const hit = matches.find((x) => x.r.method === method);
    if (!hit) return notFound(provider, res, matches.length > 0 ? 405 : 404);
    hit.r.handle({ req, res, url, body }, hit.m!);
  }

  const attachmentFailure: Record<MailProvider, number | null> = { google: null, microsoft: null };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, { error: { code: 500, message: `mail provider double: ${err instanceof Error ? err.message : String(err)}` } });
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
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // --- control API ---------------------------------------------------------------------------------------

  function issueCode(provider: MailProvider, opts: IssueCodeOptions): string {
    ensureAccount(provider, opts.email, opts.name);
    const code = provider === 'google' ? `4/0A${rand(36)}` : `M.C${rand(4)}_BAY.2.U.${randomUUID()}`;
    state[provider].codes.set(code, {
      email: key(opts.email),
      scopes: normalizeScopes(opts.scopes),
      refreshToken: opts.refreshToken,
      redirectUri: opts.redirectUri,
      issuedAt: ++clock,
      expiresAt: Date.now() + CODE_TTL_MS,
      used: false,
      revoked: false,
    });
    return code;
  }

  let closed: Promise<void> | undefined;

  return {
    baseUrl,
    env: {
      GOOGLE_CLIENT_ID: CLIENTS.google.id,
      GOOGLE_CLIENT_SECRET: CLIENTS.google.secret,
      GOOGLE_AUTH_URL: `${baseUrl}/google/auth`,
      GOOGLE_TOKEN_URL: `${baseUrl}/google/token`,
      GOOGLE_GMAIL_API_URL: `${baseUrl}/google/gmail`,
      MICROSOFT_CLIENT_ID: CLIENTS.microsoft.id,
      MICROSOFT_CLIENT_SECRET: CLIENTS.microsoft.secret,
      MICROSOFT_AUTH_URL: `${baseUrl}/microsoft/authorize`,
      MICROSOFT_TOKEN_URL: `${baseUrl}/microsoft/token`,
      MICROSOFT_GRAPH_API_URL: `${baseUrl}/microsoft/graph`,
    },
    issueCode,
    revoke(provider, email) {
      const st = state[provider];
      const k = key(email);
      for (const rec of st.refreshTokens.values()) if (rec.email === k) rec.revoked = true;
      for (const grant of st.accessTokens.values()) if (grant.email === k) grant.revoked = true;
      for (const code of st.codes.values()) if (code.email === k) code.revoked = true;
    },
    setDown(provider, down) {
      state[provider].down = down;
    },
    setScopes(provider, email, scopes) {
      const account = ensureAccount(provider, email);
      account.scopes = normalizeScopes(scopes);
      account.scopesSetAt = ++clock;
    },
    expireAccessTokens(provider, email) {
      const now = Date.now();
      for (const grant of state[provider].accessTokens.values()) if (email === undefined || grant.email === key(email)) grant.expiresAt = Math.min(grant.expiresAt, now - 1);
    },
    deliver(provider, email, msg) {
      const date = msg.date ?? new Date();
      const raw = buildInboundRaw(email.trim(), msg, date);
      if (provider === 'google') {
        if ((msg.attachments ?? []).some((a) => (a.kind ?? 'file') !== 'file')) throw new Error('Gmail messages carry MIME parts only: item and reference attachments are Graph\'s');
        const inlineData = new Set((msg.attachments ?? []).filter((a) => a.gmailInlineData).map((a) => a.name));
        return gmailAdd(email, raw, ['UNREAD', 'CATEGORY_PERSONAL', 'INBOX'], undefined, date, inlineData).id;
      }
      const box = graphBox(email);
      const root = parseMime(raw);
      const internetMessageId = normalizeMessageId(msg.messageId);
      const related = [...messageIdsIn(msg.inReplyTo ? normalizeMessageId(msg.inReplyTo) : undefined), ...messageIdsIn(headerValue(root.headers, 'references'))];
      const parent = box.messages.find((m) => related.includes(m.internetMessageId));
      const id = `AAMkAD${rand(24)}BGAAAAAAD${rand(30)}AAA=`;
      box.seq += 1;
      box.messages.push({
        id,
        attachments: (msg.attachments ?? []).map((a) => ({
          id: `AAMkAD${rand(24)}BGAAAAAAD${rand(30)}AAABEgAQA${rand(16)}=`,
          kind: a.kind ?? 'file',
          name: a.name,
          contentType: a.contentType ?? 'application/octet-stream',
          content: a.content ?? Buffer.alloc(0),
          isInline: a.contentId !== undefined,
          ...(a.contentId ? { contentId: a.contentId } : {}),
          lastModified: date,
        })),
        seq: box.seq,
        changeKey: `CQAAABYAAAD${rand(18)}`,
        conversationId: parent?.conversationId ?? `AAQkAD${rand(30)}AQA${rand(12)}=`,
        internetMessageId,
        subject: msg.subject,
        from: { address: msg.from, name: msg.fromName ?? msg.from },
        to: email.trim(),
        received: date,
        text: msg.text,
        html: msg.html,
        headers: root.headers.map((h) => ({ name: h.name, value: decodeEncodedWords(h.value) })),
      });
      return id;
    },
    sent(provider, email) {
      return (state[provider].sent.get(key(email)) ?? []).map((s) => ({ ...s, headers: { ...s.headers } }));
    },
    remove(provider, email, providerMessageId) {
      if (provider === 'google') gmailBox(email).messages.delete(providerMessageId);
      else graphBox(email).messages = graphBox(email).messages.filter((m) => m.id !== providerMessageId);
    },
    threadOf(provider, email, providerMessageId) {
      if (provider === 'google') return gmailBox(email).messages.get(providerMessageId)?.threadId;
      return graphBox(email).messages.find((m) => m.id === providerMessageId)?.conversationId;
    },
    forgetHistory(provider, email) {
      if (provider === 'google') {
        const box = gmailBox(email);
        box.historyId += 1;
        box.minHistoryId = box.historyId;
        return;
      }
      for (const [t, s] of deltaStates) if (s.email === key(email)) deltaStates.delete(t);
    },
    requests,
    failAttachments(provider, status) {
      attachmentFailure[provider] = status;
    },
    close() {
      closed ??= new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
