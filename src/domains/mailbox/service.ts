import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../../config';
import type { Db } from '../../db';
import type { MailboxCheck, MailboxRow } from '../../db/types';
import { AppError, forbidden, notFound } from '../../http/errors';
import type { Principal } from '../../http/principal';
import { createSealer } from '../../lib/crypto';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import { createMailProviders, MAIL_PROVIDERS, ProviderError, type MailProvider, type MailProviderId, type TokenSet } from './providers';
import * as store from './store';

const STATE_TTL_MS = 10 * 60 * 1000;
// An access token this close to expiry is refreshed before use rather than failing mid-call.
const REFRESH_MARGIN_MS = 60 * 1000;

const stateHash = (state: string) => createHash('sha256').update(state).digest();
const invalidState = () => new AppError(400, 'oauth_state_invalid', 'Bad request', 'The state is unknown, expired or already used; start the connection again.');

/** What a read shows with nothing connected: every field present, empty, zero or false. */
const DISCONNECTED = {
  connected: false,
  email_address: '',
  scopes: [] as string[],
  sendable: false,
  polling: false,
  inbound_cursor_set: false,
  connected_at: '',
  healthy_at: '',
  last_polled_at: '',
  sent_today: 0,
  checks: [] as MailboxCheck[],
};

export type MailboxStatus = typeof DISCONNECTED & { provider?: MailProviderId };

const present = (m: MailboxRow | undefined): MailboxStatus =>
  m
    ? {
        connected: m.connected,
        provider: m.provider as MailProviderId,
        email_address: m.email_address,
        scopes: m.scopes,
        sendable: m.connected && m.sendable,
        polling: m.polling,
        inbound_cursor_set: m.inbound_cursor !== null,
        connected_at: iso(m.connected_at),
        healthy_at: m.healthy_at ? iso(m.healthy_at) : '',
        last_polled_at: m.last_polled_at ? iso(m.last_polled_at) : '',
        sent_today: 0,
        checks: m.checks,
      }
    : { ...DISCONNECTED };

/**
 * The connected mailbox: OAuth with Google or Microsoft, tokens sealed at rest, and health checks that say
 * what works and what an admin should do about what does not. Reads come from stored state only; only a
 * refresh (the `mailbox.refresh` job, on demand or on schedule) asks the provider.
 */
export function createMailboxService(deps: { db: Db; config: Config; queues: QueueHub; logger: Logger }) {
  const { db, config, queues, logger } = deps;
  const providers = createMailProviders(config);
  const sealer = createSealer(config.ENCRYPTION_KEYS);
  // The associated data binds a sealed token to its workspace and field: copied elsewhere, it will not open.
  const ctx = (tenantId: string, field: 'access' | 'refresh') => `mailbox:${tenantId}:${field}`;

  const providerFor = (id: string): MailProvider => {
    if (!MAIL_PROVIDERS.includes(id as MailProviderId)) throw notFound('mail provider');
    const p = providers[id as MailProviderId];
    if (!p.configured) {
      throw new AppError(409, 'mail_provider_not_configured', 'Conflict', `This deployment has no ${id} OAuth client configured; an operator must set its client id and secret.`);
    }
    return p;
  };
  const redirectUri = (id: string) => config.OAUTH_REDIRECT_URL ?? `${config.PUBLIC_BASE_URL ?? `http://localhost:${config.PORT}`}/oauth/${id}/callback`;

  const providerFailed = (err: ProviderError) =>
    err.kind === 'unavailable'
      ? new AppError(502, 'mail_provider_unavailable', 'Bad gateway', `${err.message}; try again shortly.`, { headers: { 'Retry-After': '30' } })
      : new AppError(400, 'oauth_code_invalid', 'Bad request', `${err.message}; the code may be expired or already used — start the connection again.`);

  function checksFor(p: MailProvider, scopes: string[], outcome: { ok: true } | { ok: false; err: ProviderError }, polling: boolean): MailboxCheck[] {
    const at = new Date().toISOString();
    const check = (c: MailboxCheck['check'], status: MailboxCheck['status'], detail: string, remediation: string): MailboxCheck => ({ check: c, status, detail, remediation, last_checked_at: at });
    if (!outcome.ok) {
      const revoked = outcome.err.kind === 'revoked';
      const token = revoked
        ? check('oauth_token', 'failing', `The ${p.id} grant no longer works (${outcome.err.message}).`, 'Reconnect the mailbox: start the OAuth connection again and approve every requested permission.')
        : check('oauth_token', 'failing', `${outcome.err.message}.`, `Nothing to change on our side; the next refresh retries. If it persists, check ${p.id}'s service status.`);
      const unknown = (c: MailboxCheck['check']) => check(c, 'unknown', 'Not checked: the provider could not be asked.', 'Resolve the OAuth token check first.');
      return [token, unknown('scopes'), unknown('send_permission'), unknown('inbound_polling'), unknown('daily_send_quota')];
    }
    const read = p.canRead(scopes);
    const send = p.canSend(scopes);
    const missing = [...(read ? [] : ['read mail']), ...(send ? [] : ['send mail'])];
    return [
      check('oauth_token', 'ok', `The ${p.id} grant works.`, 'None.'),
      missing.length === 0
        ? check('scopes', 'ok', `Granted: ${scopes.join(' ')}.`, 'None.')
        : check('scopes', 'warning', `The grant lacks permission to ${missing.join(' and ')}.`, 'Reconnect the mailbox and approve every requested permission.'),
      send
        ? check('send_permission', 'ok', 'Replies can be sent through this mailbox.', 'None.')
        : check('send_permission', 'failing', 'The grant does not allow sending mail.', 'Reconnect the mailbox and approve the send permission.'),
      !polling
        ? check('inbound_polling', 'warning', 'Polling is off: new mail arrives only if the provider pushes it to the ingest route.', 'Turn polling on, or forward mail to the email ingest route.')
        : read
          ? check('inbound_polling', 'unknown', 'Polling has not run yet.', 'None; the first poll records its result here.')
          : check('inbound_polling', 'failing', 'The grant does not allow reading mail, so new mail cannot be polled.', 'Reconnect the mailbox and approve the read permission.'),
      check('daily_send_quota', 'unknown', 'No reply has been sent through this mailbox today.', 'None; sends record their result here.'),
    ];
  }

  /** A working access token, refreshed (and stored) when close to expiry. */
  async function accessToken(m: MailboxRow, p: MailProvider): Promise<{ token: string; scopes: string[] }> {
    if (m.access_expires_at.getTime() - Date.now() > REFRESH_MARGIN_MS) {
      return { token: sealer.open(m.access_token_sealed, ctx(m.tenant_id, 'access')), scopes: m.scopes };
    }
    if (!m.refresh_token_sealed) throw new ProviderError('revoked', `the ${p.id} access token expired and no refresh token was granted`);
    const fresh = await p.refresh(sealer.open(m.refresh_token_sealed, ctx(m.tenant_id, 'refresh')));
    const scopes = fresh.scopes.length > 0 ? fresh.scopes : m.scopes;
    await store.updateTokens(db, m.tenant_id, {
      access_token_sealed: sealer.seal(fresh.accessToken, ctx(m.tenant_id, 'access')),
      ...(fresh.refreshToken ? { refresh_token_sealed: sealer.seal(fresh.refreshToken, ctx(m.tenant_id, 'refresh')) } : {}),
      access_expires_at: fresh.expiresAt,
      scopes,
    });
    return { token: fresh.accessToken, scopes };
  }

  /** Asks the provider what the grant allows now and stores the answer as checks. Never throws for the provider. */
  async function check(tenantId: string): Promise<void> {
    const m = await store.getMailbox(db, tenantId);
    if (!m) return;
    const p = providers[m.provider as MailProviderId];
    try {
      const { token, scopes } = await accessToken(m, p);
      const address = await p.emailAddress(token);
      const checks = checksFor(p, scopes, { ok: true }, m.polling);
      await store.recordChecks(db, tenantId, {
        connected: true,
        sendable: p.canSend(scopes),
        checks,
        healthy: checks.every((c) => c.status === 'ok' || c.status === 'unknown'),
        email_address: address,
      });
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      logger.warn({ tenant_id: tenantId, provider: p.id, kind: err.kind }, 'mailbox check failed');
      const revoked = err.kind === 'revoked';
      await store.recordChecks(db, tenantId, {
        connected: !revoked && m.connected,
        sendable: !revoked && m.sendable,
        checks: checksFor(p, m.scopes, { ok: false, err }, m.polling),
        healthy: false,
      });
    }
  }

  return {
    async start(actor: Principal, providerId: string) {
      const p = providerFor(providerId);
      const state = randomBytes(32).toString('base64url');
      const expiresAt = new Date(Date.now() + STATE_TTL_MS);
      await store.insertState(db, actor.tenantId, { hash: stateHash(state), userId: actor.userId, provider: p.id, expiresAt });
      return { authorize_url: p.authorizeUrl(state, redirectUri(p.id)), state, expires_at: iso(expiresAt) };
    },

    async complete(actor: Principal, providerId: string, input: { code: string; state: string }) {
      const p = providerFor(providerId);
      const hash = stateHash(input.state);
      // The state is consumed before the code is exchanged (codes are single-use too): a replay of the
      // same completion cannot connect twice. A state of another workspace is refused and left as it was.
      await db.transaction().execute(async (tx) => {
        const row = await store.lockState(tx, hash);
        if (!row || row.used_at !== null || row.expires_at.getTime() <= Date.now() || row.provider !== p.id) throw invalidState();
        if (row.tenant_id !== actor.tenantId) {
          throw forbidden('oauth_state_mismatch', 'This state was minted for another workspace; complete the connection from the workspace that started it.');
        }
        await store.consumeState(tx, actor.tenantId, hash);
      });
      let tokens: TokenSet;
      let address: string;
      try {
        tokens = await p.exchangeCode(input.code, redirectUri(p.id));
        address = await p.emailAddress(tokens.accessToken);
      } catch (err) {
        if (err instanceof ProviderError) throw providerFailed(err);
        throw err;
      }
      await store.upsertMailbox(db, actor.tenantId, {
        provider: p.id,
        email_address: address,
        scopes: tokens.scopes,
        access_token_sealed: sealer.seal(tokens.accessToken, ctx(actor.tenantId, 'access')),
        refresh_token_sealed: tokens.refreshToken ? sealer.seal(tokens.refreshToken, ctx(actor.tenantId, 'refresh')) : null,
        access_expires_at: tokens.expiresAt,
      });
      await check(actor.tenantId);
      return present(await store.getMailbox(db, actor.tenantId));
    },

    status: async (actor: Principal) => present(await store.getMailbox(db, actor.tenantId)),

    /** Runs the check on the worker and waits for it; on a slow provider the stored status is returned. */
    async refresh(actor: Principal) {
      if (await store.getMailbox(db, actor.tenantId)) {
        await queues.enqueueAndAwait('mailbox.refresh', { tenant_id: actor.tenantId }, { waitMs: config.JOB_WAIT_MS, jobId: `refresh-${actor.tenantId}` });
      }
      return present(await store.getMailbox(db, actor.tenantId));
    },

    /** The `mailbox.refresh` job. */
    check,

    /** The scheduled sweep: one refresh per mailbox due, deduplicated by job id so none is queued twice. */
    async sweep() {
      await store.pruneStates(db, new Date(Date.now() - 24 * 3600 * 1000));
      const due = await store.dueForRefresh(db, config.MAILBOX_REFRESH_SECONDS);
      for (const tenantId of due) await queues.enqueue('mailbox.refresh', { tenant_id: tenantId }, { jobId: `refresh-${tenantId}` });
      return { queued: due.length };
    },
  };
}

export type MailboxService = ReturnType<typeof createMailboxService>;
