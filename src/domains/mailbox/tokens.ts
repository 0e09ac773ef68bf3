import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { MailboxRow } from '../../db/types';
import { createFieldSealer } from '../../lib/crypto';
import type { MailboxOfFile } from '../inbound-files/sources';
import { ProviderError, type MailProvider, type MailProviderId, type TokenSet } from './providers';
import * as store from './store';

/**
 * The mailbox's OAuth tokens, in one place (issue 35): sealed at rest, opened for a provider call, refreshed
 * (and stored) when close to expiry or when a call says the token no longer works. OAuth completion seals the
 * first ones here; health checks, polling, sending and the inbound files' fetches all use them through here.
 */

// An access token this close to expiry is refreshed before use rather than failing mid-call.
const REFRESH_MARGIN_MS = 60 * 1000;

// The associated data binds a sealed token to its workspace and field: copied elsewhere, it will not open.
export const mailboxTokenContext = (tenantId: string, field: 'access' | 'refresh') => `mailbox:${tenantId}:${field}`;

export function createMailboxTokens(deps: { db: Db; config: ConfigSection<'secrets'>; providers: Record<MailProviderId, MailProvider> }) {
  const { db, providers } = deps;
  const sealer = createFieldSealer(deps.config.ENCRYPTION_KEYS, mailboxTokenContext);

  /** The columns a fresh grant (OAuth completion) stores: both tokens sealed, with the access token's expiry and scopes. */
  function sealed(tenantId: string, tokens: TokenSet) {
    return {
      scopes: tokens.scopes,
      access_token_sealed: sealer.seal(tenantId, 'access', tokens.accessToken),
      refresh_token_sealed: tokens.refreshToken ? sealer.seal(tenantId, 'refresh', tokens.refreshToken) : null,
      access_expires_at: tokens.expiresAt,
    };
  }

  /**
   * A working access token, refreshed (and stored) when close to expiry or when `force`d — a refresh is
   * also how we learn which scopes the grant holds now.
   */
  async function accessToken(m: MailboxRow, p: MailProvider, force = false): Promise<{ token: string; scopes: string[]; fresh: boolean }> {
    if (!force && m.access_expires_at.getTime() - Date.now() > REFRESH_MARGIN_MS) {
      return { token: sealer.open(m.tenant_id, 'access', m.access_token_sealed), scopes: m.scopes, fresh: false };
    }
    if (!m.refresh_token_sealed) throw new ProviderError('revoked', `the ${p.id} access token expired and no refresh token was granted`);
    const fresh = await p.refresh(sealer.open(m.tenant_id, 'refresh', m.refresh_token_sealed));
    const scopes = fresh.scopes.length > 0 ? fresh.scopes : m.scopes;
    await store.updateTokens(db, m.tenant_id, {
      access_token_sealed: sealer.seal(m.tenant_id, 'access', fresh.accessToken),
      ...(fresh.refreshToken ? { refresh_token_sealed: sealer.seal(m.tenant_id, 'refresh', fresh.refreshToken) } : {}),
      access_expires_at: fresh.expiresAt,
      scopes,
    });
    return { token: fresh.accessToken, scopes, fresh: true };
  }

  /**
   * Runs a provider call with the access token; a 401 on a token we thought valid (revoked early, clock
   * skew) is answered by one refresh and one retry. A second 401 means the grant itself no longer works.
   */
  async function withToken<T>(m: MailboxRow, p: MailProvider, fn: (token: string, scopes: string[]) => Promise<T>, force = false): Promise<T> {
    const first = await accessToken(m, p, force);
    try {
      return await fn(first.token, first.scopes);
    } catch (err) {
      if (!(err instanceof ProviderError) || err.kind !== 'unauthorized') throw err;
      if (first.fresh || !m.refresh_token_sealed) throw new ProviderError('revoked', err.message);
      const again = await accessToken(m, p, true);
      try {
        return await fn(again.token, again.scopes);
      } catch (retryErr) {
        if (retryErr instanceof ProviderError && retryErr.kind === 'unauthorized') throw new ProviderError('revoked', retryErr.message);
        throw retryErr;
      }
    }
  }

  /**
   * A valid access token for the worker fetching a polled message's files (inbound files' `MailboxTokens`): the
   * connected mailbox's, refreshed (and stored) as polling refreshes it, only when it is still the mailbox the
   * message was polled from. The job never carries it. Errors say why in words that hold no token.
   */
  async function forFiles(tenantId: string, from: MailboxOfFile, opts: { force: boolean }): Promise<string> {
    const m = await store.getMailbox(db, tenantId);
    if (!m) throw new Error('no mailbox is connected any more');
    if (m.provider !== from.provider || m.email_address.toLowerCase() !== from.address.toLowerCase()) {
      throw new Error('the mailbox the message was polled from is no longer the connected one');
    }
    if (!m.connected) throw new Error('the mailbox is disconnected (its grant no longer works); reconnect it');
    try {
      return (await accessToken(m, providers[m.provider as MailProviderId], opts.force)).token;
    } catch (err) {
      if (err instanceof ProviderError) throw new Error(err.message);
      throw err;
    }
  }

  return { sealed, accessToken, withToken, forFiles };
}

export type MailboxTokens = ReturnType<typeof createMailboxTokens>;
