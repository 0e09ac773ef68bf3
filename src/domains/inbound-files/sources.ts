import type { Readable } from 'node:stream';
import type { ConfigSection } from '../../config';
import type { InboundFileRef } from '../channels/adapters/types';
import type { BlobStore } from '../files/types';
import { base64Decoder, byteLimit, FetchFailed, getJson, streamingGet } from './download';

/**
 * Where each provider's inbound file bytes come from (issue 34), as an `open()` the files domain calls when it
 * stores the file. Every request goes to an operator-configured provider base URL, never to an address a
 * payload chose, with one exception that is checked: Twilio's MediaUrl is absolute, so it is fetched only when
 * it is on TWILIO_API_URL's origin or a TWILIO_MEDIA_HOSTS host (SSRF: the URL is whatever the request said,
 * and the account's credentials go with it).
 */
export type SourceConfig = ConfigSection<'outbound' | 'inboundFiles'>;

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
  }
}
