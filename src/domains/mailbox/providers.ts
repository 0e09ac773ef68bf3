import { z } from 'zod';
import type { ConfigSection } from '../../config';

export type MailProviderId = 'google' | 'microsoft';
export const MAIL_PROVIDERS: readonly MailProviderId[] = ['google', 'microsoft'];

export interface TokenSet {
  accessToken: string;
  /** Absent on a refresh that keeps the old refresh token (Google). */
  refreshToken?: string;
  expiresAt: Date;
  scopes: string[];
}

/**
 * Why a provider call failed, in the terms the health checks need: `unavailable` (down, timed out, 5xx —
 * try again later), `revoked` (the grant is gone: reconnect), `refused` (the provider said no for another
 * reason, e.g. a misconfigured client), `unauthorized` (an API call's 401: the access token no longer
 * works, which a refresh may fix; only the token endpoint's invalid_grant means the grant is gone). The
 * message never contains a token.
 */
export class ProviderError extends Error {
  constructor(
    readonly kind: 'unavailable' | 'revoked' | 'refused' | 'unauthorized',
    message: string,
    /** The provider's HTTP status, when it answered. */
    readonly status?: number,
    /** No answer came after the request may have left (a timeout): a send may have gone out. */
    readonly maybeSent = false,
  ) {
    super(message);
  }
}

/** A message read from the mailbox, in the terms the email channel's inbound format needs. */
export interface FetchedMail {
  /** The provider's own id (used as the ledger key only when the message has no Message-ID header). */
  providerId: string;
  /** Header name (lower case) → value, as sent. */
  headers: Record<string, string>;
  from: { address: string; name?: string };
  subject: string;
  text?: string;
  html?: string;
  receivedAt?: string;
  /** The provider's conversation: Gmail `threadId`, Graph `conversationId`. A reply names it to join the thread. */
  threadId?: string;
  /** Every file the message carries, inline images included, in the provider's order (issue 34). */
  attachments?: MailAttachment[];
}

/** A file of a polled message, as the provider describes it: where to fetch it, never its bytes. */
export interface MailAttachment {
  name: string;
  contentType?: string;
  /** Bytes, as the provider declares them (Gmail `body.size`, Graph `size`). */
  size?: number;
  /** The Content-ID an HTML body's `cid:` links name (inline images). */
  contentId?: string;
  /** Gmail `body.attachmentId` / Graph attachment id. */
  attachmentId?: string;
  /** Gmail: the part whose small body came inline (`body.data`), fetched again by its partId. */
  partId?: string;
  /** Listed but never fetched, and why (Graph item and reference attachments are not files). */
  skip?: string;
}

/** The customer's message a reply answers, as the mailbox that polled it knows it. */
export interface ReplyTarget {
  /** The provider's id of the customer's message (Gmail message id, Graph message id). */
  messageId: string;
  /** Gmail `threadId` / Graph `conversationId`. */
  threadId?: string;
}

export interface MailPage {
  messages: FetchedMail[];
  /** Where the next poll continues; store it only once the messages are safely ingested. */
  cursor: string;
}

export interface MailProvider {
  id: MailProviderId;
  /** The scopes we ask for: read (polling) and send. */
  scopes: string[];
  configured: boolean;
  authorizeUrl(state: string, redirectUri: string): string;
  exchangeCode(code: string, redirectUri: string): Promise<TokenSet>;
  refresh(refreshToken: string): Promise<TokenSet>;
  emailAddress(accessToken: string): Promise<string>;
  /** Whether these granted scopes allow sending mail. */
  canSend(scopes: string[]): boolean;
  /** Whether these granted scopes allow reading new mail. */
  canRead(scopes: string[]): boolean;
  /**
   * Inbox messages that arrived after the cursor. Without a cursor (first poll, or one the provider no
   * longer honours) it returns none and a cursor for "now": connecting a mailbox does not import its past.
   */
  listSince(accessToken: string, cursor: string | null): Promise<MailPage>;
  /**
   * Sends one RFC 5322 message as written (our headers, including the threading ones, are kept). With a
   * target, the provider files it in the customer's conversation: Gmail by `threadId` (with the matching
   * In-Reply-To, References and subject we write), Graph through the message's reply endpoint.
   */
  send(accessToken: string, rfc822: string, target?: ReplyTarget): Promise<{ providerId: string | null; threadId: string | null }>;
}

async function call(name: string, url: string, init: RequestInit, timeoutMs: number): Promise<Record<string, unknown>> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const timedOut = (err as Error).name === 'TimeoutError';
    throw new ProviderError('unavailable', `${name} could not be reached (${timedOut ? 'timed out' : 'connection failed'})`, undefined, timedOut);
  }
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    if (res.ok) throw new ProviderError('unavailable', `${name} answered with something other than JSON`);
  }
  if (res.ok) return body;
  if (res.status >= 500 || res.status === 429) throw new ProviderError('unavailable', `${name} answered ${res.status}`);
  // OAuth errors carry a code; API errors an object. Only the code is kept: descriptions may echo input.
  const code = typeof body.error === 'string' ? body.error : typeof (body.error as { status?: unknown })?.status === 'string' ? String((body.error as { status: string }).status) : '';
  if (code === 'invalid_grant') throw new ProviderError('revoked', `${name} refused the grant (${res.status} ${code})`, res.status);
  // A wrong client secret is 401 invalid_client: the deployment's fault, not a lost grant.
  if (res.status === 401 && code !== 'invalid_client' && code !== 'unauthorized_client') {
    throw new ProviderError('unauthorized', `${name} did not accept the access token (401)`, 401);
  }
  throw new ProviderError('refused', `${name} refused the request (${res.status}${code ? ` ${code}` : ''})`, res.status);
}

const form = (fields: Record<string, string | undefined>) =>
  new URLSearchParams(Object.entries(fields).filter((e): e is [string, string] => e[1] !== undefined));

function tokenSet(body: Record<string, unknown>, name: string): TokenSet {
  if (typeof body.access_token !== 'string' || !body.access_token) throw new ProviderError('refused', `${name} returned no access token`);
  const expiresIn = Number(body.expires_in ?? 3600);
  return {
    accessToken: body.access_token,
    ...(typeof body.refresh_token === 'string' && body.refresh_token ? { refreshToken: body.refresh_token } : {}),
    expiresAt: new Date(Date.now() + (Number.isFinite(expiresIn) ? expiresIn : 3600) * 1000),
    scopes: typeof body.scope === 'string' ? body.scope.split(/\s+/).filter(Boolean) : [],
  };
}

const decode = (b64url: unknown) => (typeof b64url === 'string' ? Buffer.from(b64url, 'base64url').toString('utf8') : undefined);

interface GmailPart {
  partId?: string;
  mimeType?: string;
  filename?: string;
  body?: { data?: string; attachmentId?: string; size?: number };
  parts?: GmailPart[];
  headers?: { name: string; value: string }[];
}

/** The first part of a type, depth first (multipart/alternative keeps text/plain and text/html side by side). */
function gmailPart(part: GmailPart | undefined, type: string): string | undefined {
  if (!part) return undefined;
  // An attached text file (a filename) is a file, not the message's text.
  if (part.mimeType === type && part.body?.data && !nonEmpty(part.filename)) return decode(part.body.data);
  for (const child of part.parts ?? []) {
    const found = gmailPart(child, type);
    if (found !== undefined) return found;
  }
  return undefined;
}

const nonEmpty = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
/** Parts walked and files listed per message at most: a message is never refused, but its walk is bounded. */
const MAX_PARTS = 500;
const MAX_DEPTH = 30;

/**
 * Every file in a Gmail `format=full` payload, depth first: each part with a filename whose body has an
 * `attachmentId` (fetched with messages.attachments.get) or inline `data` (small parts; fetched again by partId),
 * inline images included with their Content-ID. Checked field by field: it is the provider's JSON. A part with a
 * filename is not entered (an attached message's own files are inside its file).
 */
function gmailAttachments(root: unknown): MailAttachment[] {
  const out: MailAttachment[] = [];
  let seen = 0;
  const walk = (part: unknown, depth: number) => {
    if (!isObject(part) || depth > MAX_DEPTH || ++seen > MAX_PARTS) return;
    const filename = nonEmpty(part.filename);
    const body = isObject(part.body) ? part.body : {};
    const attachmentId = nonEmpty(body.attachmentId);
    const partId = nonEmpty(part.partId);
    if (filename && (attachmentId || partId)) {
      const size = typeof body.size === 'number' && Number.isSafeInteger(body.size) && body.size >= 0 ? body.size : undefined;
      let contentId: string | undefined;
      if (Array.isArray(part.headers)) {
        for (const h of part.headers) if (isObject(h) && typeof h.name === 'string' && h.name.toLowerCase() === 'content-id' && typeof h.value === 'string') contentId = nonEmpty(h.value);
      }
      out.push({
        name: filename,
        ...(nonEmpty(part.mimeType) ? { contentType: nonEmpty(part.mimeType) } : {}),
        ...(size !== undefined ? { size } : {}),
        ...(contentId ? { contentId } : {}),
        ...(attachmentId ? { attachmentId } : { partId }),
      });
      return;
    }
    if (Array.isArray(part.parts)) for (const child of part.parts) walk(child, depth + 1);
  };
  walk(root, 0);
  return out;
}

/** One page of Graph's `GET /me/messages/{id}/attachments` (an entry is read on its own: one odd entry is one skipped file). */
const graphAttachmentPage = z.object({ value: z.array(z.unknown()), '@odata.nextLink': z.string().optional() });
const graphAttachment = z.object({
  '@odata.type': z.string().optional(),
  id: z.string().min(1),
  name: z.string().nullish(),
  contentType: z.string().nullish(),
  size: z.number().int().min(0).nullish(),
  isInline: z.boolean().nullish(),
  contentId: z.string().nullish(),
});
/** Why an attachment Graph lists is not fetched: only a fileAttachment holds a file's bytes. */
const GRAPH_NOT_A_FILE: Record<string, string> = {
  '#microsoft.graph.itemAttachment': 'an attached Outlook item (a message, event or contact), not a file; it is not fetched',
  '#microsoft.graph.referenceAttachment': 'a link to a file stored elsewhere (OneDrive, SharePoint), not the file; it is not fetched',
};
/** Attachment list pages followed per message at most. */
const GRAPH_ATTACHMENT_PAGES = 20;

/** `Ada Lovelace <ada@x.test>` → { address, name }. */
function parseFrom(value: string | undefined): { address: string; name?: string } {
  const v = (value ?? '').trim();
  // Index arithmetic, not a regular expression: the pattern this replaces backtracked polynomially on long
  // runs of spaces in a header the sender controls.
  const lt = v.indexOf('<');
  const gt = lt === -1 ? -1 : v.indexOf('>', lt);
  if (lt === -1 || gt !== v.length - 1 || gt === lt + 1) return { address: v };
  let name = v.slice(0, lt).trim();
  if (name.startsWith('"')) name = name.slice(1);
  if (name.endsWith('"')) name = name.slice(0, -1);
  if (name.includes('"')) return { address: v };
  name = name.trim();
  return { address: v.slice(lt + 1, gt).trim(), ...(name ? { name } : {}) };
}

function google(config: ConfigSection<'mailbox'>): MailProvider {
  const name = 'Google';
  const t = config.MAIL_PROVIDER_TIMEOUT_MS;
  const SEND = ['https://www.googleapis.com/auth/gmail.send', 'https://www.googleapis.com/auth/gmail.compose', 'https://www.googleapis.com/auth/gmail.modify', 'https://mail.google.com/'];
  const READ = ['https://www.googleapis.com/auth/gmail.readonly', 'https://www.googleapis.com/auth/gmail.modify', 'https://mail.google.com/'];
  const token = (fields: Record<string, string | undefined>) =>
    call(name, config.GOOGLE_TOKEN_URL, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ client_id: config.GOOGLE_CLIENT_ID, client_secret: config.GOOGLE_CLIENT_SECRET, ...fields }),
    }, t);
  return {
    id: 'google',
    scopes: ['openid', 'email', 'https://www.googleapis.com/auth/gmail.readonly', 'https://www.googleapis.com/auth/gmail.send'],
    configured: Boolean(config.GOOGLE_CLIENT_ID && config.GOOGLE_CLIENT_SECRET),
    authorizeUrl(state, redirectUri) {
      const u = new URL(config.GOOGLE_AUTH_URL);
      // offline + consent: Google only returns a refresh token when asked like this.
      for (const [k, v] of Object.entries({ client_id: config.GOOGLE_CLIENT_ID ?? '', redirect_uri: redirectUri, response_type: 'code', scope: this.scopes.join(' '), state, access_type: 'offline', prompt: 'consent', include_granted_scopes: 'true' })) {
        u.searchParams.set(k, v);
      }
      return u.toString();
    },
    exchangeCode: async (code, redirectUri) => tokenSet(await token({ grant_type: 'authorization_code', code, redirect_uri: redirectUri }), name),
    refresh: async (refreshToken) => tokenSet(await token({ grant_type: 'refresh_token', refresh_token: refreshToken }), name),
    async emailAddress(accessToken) {
      const body = await call(name, `${config.GOOGLE_GMAIL_API_URL}/gmail/v1/users/me/profile`, { headers: { authorization: `Bearer ${accessToken}` } }, t);
      if (typeof body.emailAddress !== 'string') throw new ProviderError('refused', `${name} profile has no email address`);
      return body.emailAddress;
    },
    canSend: (scopes) => scopes.some((s) => SEND.includes(s)),
    canRead: (scopes) => scopes.some((s) => READ.includes(s)),

    async listSince(accessToken, cursor) {
      const api = `${config.GOOGLE_GMAIL_API_URL}/gmail/v1/users/me`;
      const auth = { headers: { authorization: `Bearer ${accessToken}` } };
      const now = async () => {
        const profile = await call(name, `${api}/profile`, auth, t);
        return { messages: [], cursor: String(profile.historyId ?? '') };
      };
      if (!cursor) return now();
      const ids: string[] = [];
      let next = cursor;
      let pageToken: string | undefined;
      do {
        const u = new URL(`${api}/history`);
        u.searchParams.set('startHistoryId', cursor);
        u.searchParams.set('historyTypes', 'messageAdded');
        u.searchParams.set('labelId', 'INBOX');
        if (pageToken) u.searchParams.set('pageToken', pageToken);
        let page: Record<string, unknown>;
        try {
          page = await call(name, u.toString(), auth, t);
        } catch (err) {
          // Gmail keeps history for about a week; an older cursor is answered 404: start again from now.
          if (err instanceof ProviderError && err.status === 404) return now();
          throw err;
        }
        for (const h of (page.history as { messagesAdded?: { message?: { id?: string } }[] }[] | undefined) ?? []) {
          for (const added of h.messagesAdded ?? []) if (added.message?.id && !ids.includes(added.message.id)) ids.push(added.message.id);
        }
        if (page.historyId !== undefined) next = String(page.historyId);
        pageToken = typeof page.nextPageToken === 'string' ? page.nextPageToken : undefined;
      } while (pageToken);
      const messages: FetchedMail[] = [];
      for (const id of ids) {
        const m = (await call(name, `${api}/messages/${encodeURIComponent(id)}?format=full`, auth, t)) as { id: string; threadId?: string; internalDate?: string; payload?: GmailPart };
        const headers: Record<string, string> = {};
        for (const h of m.payload?.headers ?? []) headers[h.name.toLowerCase()] = h.value;
        messages.push({
          providerId: m.id,
          headers,
          from: parseFrom(headers.from),
          subject: headers.subject ?? '',
          text: gmailPart(m.payload, 'text/plain'),
          html: gmailPart(m.payload, 'text/html'),
          ...(m.internalDate ? { receivedAt: new Date(Number(m.internalDate)).toISOString() } : {}),
          ...(typeof m.threadId === 'string' && m.threadId ? { threadId: m.threadId } : {}),
          attachments: gmailAttachments(m.payload),
        });
      }
      return { messages, cursor: next };
    },

    async send(accessToken, rfc822, target) {
      // Gmail files a sent message in a thread only when the request names the threadId and the message's
      // In-Reply-To, References and Subject match (users.messages reference, "threadId"); without it the
      // agent's reply starts a new conversation in the connected mailbox.
      const body = await call(name, `${config.GOOGLE_GMAIL_API_URL}/gmail/v1/users/me/messages/send`, {
        method: 'POST',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ raw: Buffer.from(rfc822, 'utf8').toString('base64url'), ...(target?.threadId ? { threadId: target.threadId } : {}) }),
      }, t);
      return { providerId: typeof body.id === 'string' ? body.id : null, threadId: typeof body.threadId === 'string' ? body.threadId : null };
    },
  };
}

function microsoft(config: ConfigSection<'mailbox'>): MailProvider {
  const name = 'Microsoft';
  const t = config.MAIL_PROVIDER_TIMEOUT_MS;
  const has = (scopes: string[], wanted: string[]) => scopes.some((s) => wanted.includes(s.replace(/^https:\/\/graph\.microsoft\.com\//i, '').toLowerCase()));
  const requested = ['openid', 'email', 'offline_access', 'User.Read', 'Mail.Read', 'Mail.Send'];
  const token = (fields: Record<string, string | undefined>) =>
    call(name, config.MICROSOFT_TOKEN_URL, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ client_id: config.MICROSOFT_CLIENT_ID, client_secret: config.MICROSOFT_CLIENT_SECRET, scope: requested.join(' '), ...fields }),
    }, t);
  return {
    id: 'microsoft',
    scopes: requested,
    configured: Boolean(config.MICROSOFT_CLIENT_ID && config.MICROSOFT_CLIENT_SECRET),
    authorizeUrl(state, redirectUri) {
      const u = new URL(config.MICROSOFT_AUTH_URL);
      for (const [k, v] of Object.entries({ client_id: config.MICROSOFT_CLIENT_ID ?? '', redirect_uri: redirectUri, response_type: 'code', response_mode: 'query', scope: requested.join(' '), state })) {
        u.searchParams.set(k, v);
      }
      return u.toString();
    },
    exchangeCode: async (code, redirectUri) => tokenSet(await token({ grant_type: 'authorization_code', code, redirect_uri: redirectUri }), name),
    refresh: async (refreshToken) => tokenSet(await token({ grant_type: 'refresh_token', refresh_token: refreshToken }), name),
    async emailAddress(accessToken) {
      const body = await call(name, `${config.MICROSOFT_GRAPH_API_URL}/v1.0/me`, { headers: { authorization: `Bearer ${accessToken}` } }, t);
      const address = typeof body.mail === 'string' && body.mail ? body.mail : body.userPrincipalName;
      if (typeof address !== 'string') throw new ProviderError('refused', `${name} profile has no email address`);
      return address;
    },
    canSend: (scopes) => has(scopes, ['mail.send']),
    canRead: (scopes) => has(scopes, ['mail.read', 'mail.readwrite']),

    async listSince(accessToken, cursor) {
      const auth = { headers: { authorization: `Bearer ${accessToken}`, prefer: 'outlook.body-content-type="text"' } };
      const select = 'id,internetMessageId,conversationId,subject,from,body,receivedDateTime,internetMessageHeaders,hasAttachments';
      const graphOrigin = new URL(config.MICROSOFT_GRAPH_API_URL).origin;

      /**
       * The message's attachments (metadata only: the $select leaves out contentBytes, the worker streams $value).
       * Each fileAttachment is a file; item and reference attachments are listed as skipped with the reason; an
       * entry we cannot read is skipped saying so. A message deleted since the delta (404) has none to list.
       */
      const attachmentsOf = async (id: string): Promise<MailAttachment[]> => {
        const out: MailAttachment[] = [];
        let url: string | undefined = `${config.MICROSOFT_GRAPH_API_URL}/v1.0/me/messages/${encodeURIComponent(id)}/attachments?$select=id,name,contentType,size,isInline,contentId`;
        for (let page = 0; url && page < GRAPH_ATTACHMENT_PAGES; page++) {
          let body: Record<string, unknown>;
          try {
            body = await call(name, url, { headers: { authorization: `Bearer ${accessToken}` } }, t);
          } catch (err) {
            if (err instanceof ProviderError && err.status === 404) return out;
            throw err;
          }
          const parsed = graphAttachmentPage.safeParse(body);
          if (!parsed.success) throw new ProviderError('unavailable', `${name} answered an attachment list without a value array`);
          for (const entry of parsed.data.value) {
            const a = graphAttachment.safeParse(entry);
            if (!a.success) {
              out.push({ name: 'attachment', attachmentId: '', skip: 'the provider described this attachment in a form we do not read; it is not fetched' });
              continue;
            }
            const type = a.data['@odata.type'] ?? '';
            const common = {
              name: nonEmpty(a.data.name) ?? 'attachment',
              ...(nonEmpty(a.data.contentType) ? { contentType: nonEmpty(a.data.contentType) } : {}),
              ...(typeof a.data.size === 'number' ? { size: a.data.size } : {}),
              ...(nonEmpty(a.data.contentId) ? { contentId: nonEmpty(a.data.contentId) } : {}),
              attachmentId: a.data.id,
            };
            if (type === '#microsoft.graph.fileAttachment') out.push(common);
            else out.push({ ...common, skip: GRAPH_NOT_A_FILE[type] ?? `an attachment of a kind that is not a file (${type.slice(0, 80) || 'no type given'}); it is not fetched` });
          }
          const nextLink: string | undefined = parsed.data['@odata.nextLink'];
          // Followed only on the configured Graph host, like the delta link: the token never goes elsewhere.
          url = nextLink && URL.canParse(nextLink) && new URL(nextLink).origin === graphOrigin ? nextLink : undefined;
        }
        return out;
      };
      // A stored delta link is only followed on the configured Graph host: a cursor never sends a token elsewhere.
      const start = cursor && new URL(cursor).origin === new URL(config.MICROSOFT_GRAPH_API_URL).origin
        ? cursor
        : `${config.MICROSOFT_GRAPH_API_URL}/v1.0/me/mailFolders/inbox/messages/delta?$select=${select}`;
      const messages: FetchedMail[] = [];
      let url: string | undefined = start;
      let deltaLink = '';
      while (url) {
        const page = await call(name, url, auth, t);
        for (const m of (page.value as Record<string, unknown>[] | undefined) ?? []) {
          if (m['@removed']) continue;
          const headers: Record<string, string> = {};
          for (const h of (m.internetMessageHeaders as { name: string; value: string }[] | undefined) ?? []) headers[h.name.toLowerCase()] = h.value;
          if (typeof m.internetMessageId === 'string' && !headers['message-id']) headers['message-id'] = m.internetMessageId;
          const from = (m.from as { emailAddress?: { address?: string; name?: string } } | undefined)?.emailAddress;
          const body = m.body as { contentType?: string; content?: string } | undefined;
          // hasAttachments leaves out inline attachments (Graph's message resource says so): a body naming a
          // `cid:` is asked too, so a message with only inline images keeps them.
          const listFiles = m.hasAttachments === true || (typeof body?.content === 'string' && body.content.toLowerCase().includes('cid:'));
          const attachments = listFiles && start === cursor ? await attachmentsOf(String(m.id)) : [];
          messages.push({
            providerId: String(m.id),
            headers,
            from: { address: from?.address ?? '', ...(from?.name ? { name: from.name } : {}) },
            subject: typeof m.subject === 'string' ? m.subject : '',
            ...(body?.contentType?.toLowerCase() === 'html' ? { html: body.content ?? '' } : { text: body?.content ?? '' }),
            ...(typeof m.receivedDateTime === 'string' ? { receivedAt: m.receivedDateTime } : {}),
            ...(typeof m.conversationId === 'string' && m.conversationId ? { threadId: m.conversationId } : {}),
            ...(attachments.length > 0 ? { attachments } : {}),
          });
        }
        url = typeof page['@odata.nextLink'] === 'string' ? page['@odata.nextLink'] : undefined;
        if (typeof page['@odata.deltaLink'] === 'string') deltaLink = page['@odata.deltaLink'];
      }
      // The first round of a delta query lists the whole inbox: it only establishes where "now" is.
      return { messages: start === cursor ? messages : [], cursor: deltaLink };
    },

    async send(accessToken, rfc822, target) {
      // MIME format: the RFC 5322 text, base64, as a text/plain body; answered 202 with no id. A reply goes
      // through the customer's message's reply endpoint (message: reply), which files it in that message's
      // conversation; sendMail (our In-Reply-To and References headers alone) is for mail we never polled.
      const url = target
        ? `${config.MICROSOFT_GRAPH_API_URL}/v1.0/me/messages/${encodeURIComponent(target.messageId)}/reply`
        : `${config.MICROSOFT_GRAPH_API_URL}/v1.0/me/sendMail`;
      await call(name, url, {
        method: 'POST',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'text/plain' },
        body: Buffer.from(rfc822, 'utf8').toString('base64'),
      }, t);
      return { providerId: null, threadId: target?.threadId ?? null };
    },
  };
}

export function createMailProviders(config: ConfigSection<'mailbox'>): Record<MailProviderId, MailProvider> {
  return { google: google(config), microsoft: microsoft(config) };
}
