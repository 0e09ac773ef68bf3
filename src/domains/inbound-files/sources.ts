import type { Readable } from 'node:stream';
import type { ConfigSection } from '../../config';
import type { InboundFileRef } from '../channels/adapters/types';
import type { BlobStore } from '../files/types';
import { base64Decoder, byteLimit, FetchFailed, getJson, streamingGet } from './download';
import { gmailAttachmentBody } from './gmail-body';

/**
 * Where each provider's inbound file bytes come from (issue 34), as an `open()` the files domain calls when it
 * stores the file. Every request goes to an operator-configured provider base URL, never to an address a
 * payload chose, with one exception that is checked: Twilio's MediaUrl is absolute, so it is fetched only when
 * it is on TWILIO_API_URL's origin or a TWILIO_MEDIA_HOSTS host (SSRF: the URL is whatever the request said,
 * and the account's credentials go with it).
 */
export type SourceConfig = ConfigSection<'outbound' | 'inboundFiles'> & Pick<ConfigSection<'mailbox'>, 'GOOGLE_GMAIL_API_URL' | 'MICROSOFT_GRAPH_API_URL'>;

/** The connected mailbox a polled message came from: its provider and address, as the file's reference names them. */
export interface MailboxOfFile {
  provider: 'google' | 'microsoft';
  address: string;
}

/**
 * A valid access token of the workspace's connected mailbox, from the mailbox service (which refreshes it as
 * polling does; `force` refreshes it even when it looks valid, after the provider answered 401). It rejects with an
 * Error whose message says why there is none (disconnected, reconnected to another account, grant revoked); that
 * message never holds a token. Tokens are asked for when a file is fetched and never travel in the job.
 */
export type MailboxTokens = (tenantId: string, mailbox: MailboxOfFile, opts: { force: boolean }) => Promise<string>;

/** A file as the ingest job carries it: the adapter's reference, and what the edge did with it. */
export interface QueuedFileRef extends InboundFileRef {
  /** Postmark: the blob key the edge staged the part's base64 text under (absent: the part had no content). */
  staged?: string;
  /** Not fetched, and why (more files than FILES_MAX_PER_MESSAGE; a declared size over FILES_MAX_BYTES). */
  skip?: { reason: string; limit?: number };
}

const str = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
const trimSlash = (u: string) => {
  let end = u.length;
  while (end > 0 && u[end - 1] === '/') end--;
  return u.slice(0, end);
};

/** `api.twilio.com, *.twilio.com` as matchers of a lower-case host name. */
export function hostMatchers(list: string): ((host: string) => boolean)[] {
  return list
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '')
    .map((h) => (h.startsWith('*.') ? (host: string) => host.endsWith(h.slice(1)) && host.length > h.length - 1 : (host: string) => host === h));
}

/**
 * Whether a Twilio MediaUrl may be fetched: https on an allowed Twilio host (any port but the default is
 * refused too: a MediaUrl names none), or anywhere on TWILIO_API_URL's own origin (a regional edge or a test
 * double). Userinfo (`https://x@host`) is refused: it would change whose credentials are sent.
 */
export function twilioMediaAllowed(url: URL, config: Pick<SourceConfig, 'TWILIO_API_URL' | 'TWILIO_MEDIA_HOSTS'>): boolean {
  if (url.username || url.password) return false;
  if (url.origin === new URL(config.TWILIO_API_URL).origin) return true;
  return url.protocol === 'https:' && url.port === '' && hostMatchers(config.TWILIO_MEDIA_HOSTS).some((m) => m(url.hostname.toLowerCase()));
}

/** A redirect from a provider may go to its CDN over https, or stay on the configured origin (a double over http). */
const redirectAllowed = (base: string) => (to: URL) => !to.username && !to.password && (to.protocol === 'https:' || to.origin === new URL(base).origin);

export interface OpenContext {
  config: SourceConfig;
  /** The connection's config with its credentials opened (channels service `credentials`). */
  credentials: Record<string, unknown>;
  blobs: Pick<BlobStore, 'get'>;
  /** Bytes read at most, plus one (the store then reports the file too large, with the limit). */
  maxBytes: number;
  /** The connected mailbox's token, for polled mail (`gmail`, `graph`), bound to the job's workspace. */
  mailboxToken?: (mailbox: MailboxOfFile, opts: { force: boolean }) => Promise<string>;
}

/**
 * Base64 text for `bytes` bytes, plus room for a JSON answer's other members: how much of Gmail's attachment answer
 * is read at most. The decoded stream is cut at the file limit first; this only bounds what a wrong answer can make
 * us read.
 */
export const base64Bound = (bytes: number) => Math.ceil((bytes + 1) / 3) * 4 + 64 * 1024;

/**
 * Runs a mailbox request with the mailbox's current token; a 401 (revoked early, clock skew) is answered by one
 * forced refresh and one retry, as polling does. A token that cannot be had is the file's reason.
 */
async function withMailboxToken<T>(ctx: OpenContext, mailbox: MailboxOfFile, run: (auth: Record<string, string>) => Promise<T>): Promise<T> {
  const lookup = ctx.mailboxToken;
  if (!lookup) throw new FetchFailed('this process cannot reach the connected mailbox');
  const token = async (force: boolean) => {
    try {
      return await lookup(mailbox, { force });
    } catch (err) {
      throw new FetchFailed(`the mailbox gave no access token: ${(err as Error)?.message ?? String(err)}`);
    }
  };
  try {
    return await run({ authorization: `Bearer ${await token(false)}` });
  } catch (err) {
    if (!(err instanceof FetchFailed) || err.status !== 401) throw err;
    return run({ authorization: `Bearer ${await token(true)}` });
  }
}

/** The part of a Gmail `format=full` payload with this partId, depth first (explicit checks: it is the provider's JSON). */
function gmailPartById(part: unknown, partId: string, depth = 0): Record<string, unknown> | undefined {
  if (depth > 30 || part === null || typeof part !== 'object' || Array.isArray(part)) return undefined;
  const p = part as Record<string, unknown>;
  if (p.partId === partId) return p;
  if (!Array.isArray(p.parts)) return undefined;
  for (const child of p.parts) {
    const hit = gmailPartById(child, partId, depth + 1);
    if (hit) return hit;
  }
  return undefined;
}

/**
 * Opens one file's bytes: resolves the provider's reference (WhatsApp media id, Telegram getFile) and starts
 * the download, all within FILES_FETCH_TIMEOUT_MS of the call. Rejects with FetchFailed, whose message is the
 * reason the attachment's row records.
 */
export async function openSource(ref: QueuedFileRef, ctx: OpenContext): Promise<Readable> {
  const timeoutMs = ctx.config.FILES_FETCH_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  const creds = ctx.credentials;
  const s = ref.source;
  switch (s.kind) {
    case 'postmark': {
      if (!ref.staged) throw new FetchFailed('the attachment arrived without content');
      const blob = await ctx.blobs.get(ref.staged);
      if (!blob) throw new FetchFailed('the attachment\'s staged content is gone (it was not fetched in time)');
      // Decoded as it streams: never the whole part in memory, never on the API's event loop.
      const decoder = base64Decoder();
      const limited = byteLimit(ctx.maxBytes, () => blob.body.destroy());
      blob.body.on('error', (err) => limited.destroy(err));
      decoder.on('error', (err) => limited.destroy(err));
      return blob.body.pipe(decoder).pipe(limited);
    }
    case 'twilio': {
      let url: URL;
      try {
        url = new URL(s.url);
      } catch {
        throw new FetchFailed(s.url === '' ? 'the message named no MediaUrl for this file' : 'the MediaUrl is not a URL');
      }
      if (!twilioMediaAllowed(url, ctx.config)) throw new FetchFailed(`the MediaUrl is not on a Twilio host (${url.host.slice(0, 100)}); it was not fetched`);
      const sid = str(creds.account_sid);
      const token = str(creds.auth_token);
      const headers: Record<string, string> = sid && token ? { authorization: `Basic ${Buffer.from(`${sid}:${token}`).toString('base64')}` } : {};
      // Without credentials the URL is still asked: a Twilio account without HTTP auth on media serves it openly.
      const answer = await streamingGet(url.href, { headers, deadline, timeoutMs, maxBytes: ctx.maxBytes, followRedirect: redirectAllowed(ctx.config.TWILIO_API_URL) });
      return answer.body;
    }
    case 'whatsapp': {
      const token = str(creds.api_key);
      if (!token) throw new FetchFailed('the WhatsApp channel has no api_key to fetch media with');
      if (!s.mediaId) throw new FetchFailed('the message named no media id for this file');
      const auth = { authorization: `Bearer ${token}` };
      const base = trimSlash(ctx.config.WHATSAPP_API_URL);
      const info = await getJson(`${base}/${ctx.config.WHATSAPP_API_VERSION}/${encodeURIComponent(s.mediaId)}`, { headers: auth, deadline, timeoutMs });
      const url = str(info.url);
      if (!url) throw new FetchFailed('the Graph media endpoint named no download url');
      let target: URL;
      try {
        target = new URL(url);
      } catch {
        throw new FetchFailed('the Graph media endpoint\'s url is not a URL');
      }
      // The url is Graph's answer (not the payload's), on Meta's CDN: https only, or the configured origin.
      if (!redirectAllowed(ctx.config.WHATSAPP_API_URL)(target)) throw new FetchFailed('the Graph media url is not https; it was not fetched');
      // The same bearer token goes to Meta's media host: that is its documented download (a second request, not a redirect).
      const answer = await streamingGet(target.href, { headers: auth, deadline, timeoutMs, maxBytes: ctx.maxBytes, followRedirect: redirectAllowed(ctx.config.WHATSAPP_API_URL) });
      return answer.body;
    }
    case 'telegram': {
      const token = str(creds.bot_token);
      if (!token) throw new FetchFailed('the Telegram channel has no bot_token to fetch files with');
      if (!s.fileId) throw new FetchFailed('the message named no file_id for this file');
      const base = trimSlash(ctx.config.TELEGRAM_API_URL);
      let info: Record<string, unknown>;
      try {
        info = await getJson(`${base}/bot${token}/getFile?file_id=${encodeURIComponent(s.fileId)}`, { deadline, timeoutMs });
      } catch (err) {
        // Telegram's own words ("Bad Request: file is too big") are the reason; the URL (with the token) never is.
        throw err instanceof FetchFailed ? err : new FetchFailed('getFile failed');
      }
      const result = info.result as Record<string, unknown> | undefined;
      const path = str(result?.file_path);
      if (info.ok !== true || !path) throw new FetchFailed(`getFile answered no file_path${str(info.description) ? `: ${str(info.description)}` : ''}`);
      if (path.split('/').some((seg) => seg === '..' || seg === '.') || /[?#\\]/.test(path)) throw new FetchFailed('getFile answered an unusable file_path');
      const answer = await streamingGet(`${base}/file/bot${token}/${path.split('/').map(encodeURIComponent).join('/')}`, { deadline, timeoutMs, maxBytes: ctx.maxBytes });
      return answer.body;
    }
    case 'gmail': {
      const message = `${trimSlash(ctx.config.GOOGLE_GMAIL_API_URL)}/gmail/v1/users/me/messages/${encodeURIComponent(s.messageId)}`;
      const mailbox: MailboxOfFile = { provider: 'google', address: s.address };
      if (s.attachmentId) {
        const attachmentId = s.attachmentId;
        return withMailboxToken(ctx, mailbox, async (auth) => {
          // The file is inside a JSON string: read at most its base64 for the limit (plus one byte) and the answer's
          // other members, and decode while it streams (gmail-body.ts), so memory holds a chunk, not the file.
          const answer = await streamingGet(`${message}/attachments/${encodeURIComponent(attachmentId)}`, { headers: auth, deadline, timeoutMs, maxBytes: base64Bound(ctx.maxBytes) });
          const body = gmailAttachmentBody();
          const limited = byteLimit(ctx.maxBytes, () => answer.body.destroy());
          answer.body.on('error', (err) => limited.destroy(err));
          body.on('error', (err) => limited.destroy(err));
          return answer.body.pipe(body).pipe(limited);
        });
      }
      if (!s.partId) throw new FetchFailed('the message named neither an attachment id nor a part for this file');
      const partId = s.partId;
      return withMailboxToken(ctx, mailbox, async (auth) => {
        // A small part whose data Gmail sent inline in the message: the message is read again (bounded like an
        // attachment answer) rather than its bytes ever travelling in the job.
        const m = await getJson(`${message}?format=full`, { headers: auth, deadline, timeoutMs, maxBytes: base64Bound(ctx.maxBytes) });
        const part = gmailPartById(m.payload, partId);
        if (!part) throw new FetchFailed('the message no longer has this part');
        const body = part.body as Record<string, unknown> | undefined;
        const data = typeof body?.data === 'string' ? body.data : '';
        const decoder = base64Decoder('base64url');
        const limited = byteLimit(ctx.maxBytes, () => undefined);
        decoder.on('error', (err) => limited.destroy(err));
        decoder.end(Buffer.from(data, 'latin1'));
        return decoder.pipe(limited);
      });
    }
    case 'graph': {
      if (!s.attachmentId) throw new FetchFailed('the message named no attachment id for this file');
      const url = `${trimSlash(ctx.config.MICROSOFT_GRAPH_API_URL)}/v1.0/me/messages/${encodeURIComponent(s.messageId)}/attachments/${encodeURIComponent(s.attachmentId)}/$value`;
      return withMailboxToken(ctx, { provider: 'microsoft', address: s.address }, async (auth) => {
        // $value is the file's raw bytes: streamed like any download, credentials never sent on to a redirect.
        const answer = await streamingGet(url, { headers: auth, deadline, timeoutMs, maxBytes: ctx.maxBytes, followRedirect: redirectAllowed(ctx.config.MICROSOFT_GRAPH_API_URL) });
        return answer.body;
      });
    }
  }
}
