import { createHash, randomBytes } from 'node:crypto';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { DomainError, notFound, refuse } from '../../lib/errors';
import { iso } from '../../lib/time';
import type { ChannelService } from '../channels/service';
import type { Principal } from '../identity/principal';
import type { MailboxHealth } from './health';
import { MAIL_PROVIDERS, ProviderError, type MailProvider, type MailProviderId, type TokenSet } from './providers';
import * as store from './store';
import type { MailboxTokens } from './tokens';

/**
 * Connecting a mailbox (issue 35, split out of the mailbox service): the OAuth start (a state bound to the
 * workspace and user) and its completion (the code exchanged, the tokens sealed, the mailbox stored and checked).
 */

const stateHash = (state: string) => createHash('sha256').update(state).digest();
const invalidState = () => refuse('oauth_state_invalid', 'The state is unknown, expired or already used; start the connection again.');

const providerFailed = (err: ProviderError) =>
  err.kind === 'unavailable'
    ? new DomainError('mail_provider_unavailable', `${err.message}; the state is still valid, retry the same completion shortly.`, { retryAfterSeconds: 30 })
    : refuse('oauth_code_invalid', `${err.message}; the code may be expired or already used — start the connection again.`);

export function createMailboxOAuth(deps: {
  db: Db;
  config: Pick<ConfigSection<'mailbox' | 'http'>, 'OAUTH_REDIRECT_URL' | 'OAUTH_STATE_TTL_SECONDS' | 'PUBLIC_BASE_URL' | 'PORT'>;
  providers: Record<MailProviderId, MailProvider>;
  tokens: MailboxTokens;
  channels: Pick<ChannelService, 'ensure'>;
  /** A completed connection is checked at once, and answered with the status as it then reads. */
  health: MailboxHealth;
}) {
  const { db, config, providers, tokens, channels, health } = deps;

  const providerFor = (id: string): MailProvider => {
    if (!MAIL_PROVIDERS.includes(id as MailProviderId)) throw notFound('mail provider');
    const p = providers[id as MailProviderId];
    if (!p.configured) {
      throw refuse('mail_provider_not_configured', `This deployment has no ${id} OAuth client configured; an operator must set its client id and secret.`);
    }
    return p;
  };
  const redirectUri = (id: string) => config.OAUTH_REDIRECT_URL ?? `${config.PUBLIC_BASE_URL ?? `http://localhost:${config.PORT}`}/oauth/${id}/callback`;

  return {
    async start(actor: Principal, providerId: string) {
      const p = providerFor(providerId);
      const state = randomBytes(32).toString('base64url');
      const expiresAt = new Date(Date.now() + config.OAUTH_STATE_TTL_SECONDS * 1000);
      await db.transaction().execute((tx) => store.insertState(tx, actor.tenantId, { hash: stateHash(state), userId: actor.userId, provider: p.id, expiresAt }));
      return { authorize_url: p.authorizeUrl(state, redirectUri(p.id)), state, expires_at: iso(expiresAt) };
    },

    async complete(actor: Principal, providerId: string, input: { code: string; state: string }) {
      const p = providerFor(providerId);
      const hash = stateHash(input.state);
      // The state row stays locked while the code is exchanged and is consumed only with the mailbox it
      // yields, in one transaction: a concurrent completion of the same state waits and then finds it used,
      // and a provider that is down leaves the state usable for a retry within its lifetime (OAUTH_STATE_TTL_SECONDS). A state of
      // another workspace is refused and left as it was.
      await db.transaction().execute(async (tx) => {
        const row = await store.crossTenantLockOAuthState(tx, hash);
        if (!row || row.used_at !== null || row.expires_at.getTime() <= Date.now() || row.provider !== p.id) throw invalidState();
        if (row.tenant_id !== actor.tenantId) {
          throw refuse('oauth_state_mismatch', 'This state was minted for another workspace; complete the connection from the workspace that started it.');
        }
        let granted: TokenSet;
        let address: string;
        try {
          granted = await p.exchangeCode(input.code, redirectUri(p.id));
          address = await p.emailAddress(granted.accessToken);
        } catch (err) {
          if (err instanceof ProviderError) throw providerFailed(err);
          throw err;
        }
        await store.consumeState(tx, actor.tenantId, hash);
        await store.upsertMailbox(tx, actor.tenantId, { provider: p.id, email_address: address, ...tokens.sealed(actor.tenantId, granted) });
      });
      // Polled mail enters through the email channel's ingest path, so the channel must be connected.
      await channels.ensure(actor.tenantId, 'email');
      await health.check(actor.tenantId, true);
      return health.read(actor.tenantId);
    },
  };
}
