import type { Config } from '../../config';

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
 * reason, e.g. a misconfigured client). The message never contains a token.
 */
export class ProviderError extends Error {
  constructor(
    readonly kind: 'unavailable' | 'revoked' | 'refused',
    message: string,
  ) {
    super(message);
  }
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
}

async function call(name: string, url: string, init: RequestInit, timeoutMs: number): Promise<Record<string, unknown>> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw new ProviderError('unavailable', `${name} could not be reached (${(err as Error).name === 'TimeoutError' ? 'timed out' : 'connection failed'})`);
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
  if (code === 'invalid_grant' || res.status === 401) throw new ProviderError('revoked', `${name} refused the grant (${res.status}${code ? ` ${code}` : ''})`);
  throw new ProviderError('refused', `${name} refused the request (${res.status}${code ? ` ${code}` : ''})`);
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

function google(config: Config): MailProvider {
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
  };
}

function microsoft(config: Config): MailProvider {
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
  };
}

export function createMailProviders(config: Config): Record<MailProviderId, MailProvider> {
  return { google: google(config), microsoft: microsoft(config) };
}
