import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { MailboxCheck, MailboxRow } from '../../db/types';
import { iso } from '../../lib/time';
import type { EventSink } from '../events/types';
import { ProviderError, type MailProvider, type MailProviderId } from './providers';
import * as store from './store';
import type { MailboxTokens } from './tokens';

/**
 * The mailbox's health (issue 35, split out of the mailbox service): the checks that say what works and what an
 * admin should do about what does not, the status read, and `mailbox.health_changed`. Reads come from stored
 * state only; only a check (the `mailbox.refresh` job, on demand or on schedule) asks the provider.
 */

/** What a read shows with nothing connected: every field present, empty, zero or false; timestamps null. */
const DISCONNECTED = {
  connected: false,
  email_address: '',
  scopes: [] as string[],
  sendable: false,
  polling: false,
  inbound_cursor_set: false,
  connected_at: null as string | null,
  healthy_at: null as string | null,
  last_polled_at: null as string | null,
  sent_today: 0,
  checks: [] as MailboxCheck[],
};

export type MailboxStatus = typeof DISCONNECTED & { provider?: MailProviderId };

const CHECK_ORDER: MailboxCheck['check'][] = ['oauth_token', 'scopes', 'send_permission', 'inbound_polling', 'daily_send_quota'];

const present = (m: MailboxRow | undefined, sentToday = 0): MailboxStatus =>
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
        healthy_at: m.healthy_at ? iso(m.healthy_at) : null,
        last_polled_at: m.last_polled_at ? iso(m.last_polled_at) : null,
        sent_today: sentToday,
        checks: [...m.checks].sort((a, b) => CHECK_ORDER.indexOf(a.check) - CHECK_ORDER.indexOf(b.check)),
      }
    : { ...DISCONNECTED };

const at = () => new Date().toISOString();

/** One check's result, checked now. Polling and sending record theirs with it too (inbound_polling, daily_send_quota). */
export const checkOf = (c: MailboxCheck['check'], status: MailboxCheck['status'], detail: string, remediation: string): MailboxCheck => ({ check: c, status, detail, remediation, last_checked_at: at() });

/** The daily send quota's check, for `sent` replies today against MAILBOX_DAILY_SEND_LIMIT (`limit`). */
export function quotaCheck(sent: number, limit: number): MailboxCheck {
  if (sent >= limit) return checkOf('daily_send_quota', 'failing', `${sent} of ${limit} replies sent today (UTC): the daily quota is used up, further replies wait.`, 'Wait for midnight UTC, or raise MAILBOX_DAILY_SEND_LIMIT if the provider allows more.');
  if (sent >= limit * 0.8) return checkOf('daily_send_quota', 'warning', `${sent} of ${limit} replies sent today (UTC).`, 'Expect sends to stop at the quota; raise MAILBOX_DAILY_SEND_LIMIT if the provider allows more.');
  return checkOf('daily_send_quota', 'ok', `${sent} of ${limit} replies sent today (UTC).`, 'None.');
}

/** What a mailbox's health is: connected, able to send, and each check's status. */
const healthOf = (m: Pick<MailboxRow, 'connected' | 'sendable' | 'checks'>) =>
  JSON.stringify([m.connected, m.sendable, [...m.checks].map((c) => `${c.check}:${c.status}`).sort()]);

export function createMailboxHealth(deps: {
  db: Db;
  config: Pick<ConfigSection<'mailbox'>, 'MAILBOX_DAILY_SEND_LIMIT'>;
  logger: Logger;
  providers: Record<MailProviderId, MailProvider>;
  tokens: MailboxTokens;
  /** Where mailbox.health_changed goes (issue 19). */
  events?: EventSink | undefined;
}) {
  const { db, config, logger, providers, tokens } = deps;

  function checksFor(p: MailProvider, scopes: string[], outcome: { ok: true } | { ok: false; err: ProviderError }, polling: boolean, kept: { polling?: MailboxCheck; sent: number }): MailboxCheck[] {
    // One check, one time: every row it writes carries the same moment.
    const when = at();
    const stamped = (c: MailboxCheck): MailboxCheck => ({ ...c, last_checked_at: when });
    if (!outcome.ok) {
      const revoked = outcome.err.kind === 'revoked';
      const token = revoked
        ? checkOf('oauth_token', 'failing', `The ${p.id} grant no longer works (${outcome.err.message}).`, 'Reconnect the mailbox: start the OAuth connection again and approve every requested permission.')
        : checkOf('oauth_token', 'failing', `${outcome.err.message}.`, `Nothing to change on our side; the next refresh retries. If it persists, check ${p.id}'s service status.`);
      const unknown = (c: MailboxCheck['check']) => checkOf(c, 'unknown', 'Not checked: the provider could not be asked.', 'Resolve the OAuth token check first.');
      return [token, unknown('scopes'), unknown('send_permission'), unknown('inbound_polling'), unknown('daily_send_quota')].map(stamped);
    }
    const read = p.canRead(scopes);
    const send = p.canSend(scopes);
    const missing = [...(read ? [] : ['read mail']), ...(send ? [] : ['send mail'])];
    return [
      checkOf('oauth_token', 'ok', `The ${p.id} grant works.`, 'None.'),
      missing.length === 0
        ? checkOf('scopes', 'ok', `Granted: ${scopes.join(' ')}.`, 'None.')
        : checkOf('scopes', 'warning', `The grant lacks permission to ${missing.join(' and ')}.`, 'Reconnect the mailbox and approve every requested permission.'),
      send
        ? checkOf('send_permission', 'ok', 'Replies can be sent through this mailbox.', 'None.')
        : checkOf('send_permission', 'failing', 'The grant does not allow sending mail.', 'Reconnect the mailbox and approve the send permission.'),
      !polling
        ? checkOf('inbound_polling', 'warning', 'Polling is off: new mail arrives only if the provider pushes it to the ingest route.', 'Turn polling on, or forward mail to the email ingest route.')
        : !read
          ? checkOf('inbound_polling', 'failing', 'The grant does not allow reading mail, so new mail cannot be polled.', 'Reconnect the mailbox and approve the read permission.')
          : (kept.polling ?? checkOf('inbound_polling', 'unknown', 'Polling has not run yet.', 'None; the first poll records its result here.')),
      quotaCheck(kept.sent, config.MAILBOX_DAILY_SEND_LIMIT),
    ].map((c) => (c === kept.polling ? c : stamped(c)));
  }

  /**
   * Stores a check's result, and when the mailbox's health changed, `mailbox.health_changed` with the
   * status as GET /v1/channels/email/mailbox shows it, in the same transaction (the row is locked, so two
   * racing checks announce one change once).
   */
  async function recordChecks(tenantId: string, r: Parameters<typeof store.recordChecks>[2]) {
    await db.transaction().execute(async (tx) => {
      const before = await store.lockMailbox(tx, tenantId);
      await store.recordChecks(tx, tenantId, r);
      if (!deps.events || !before || healthOf(before) === healthOf({ ...r, checks: r.checks })) return;
      const after = await store.getMailbox(tx, tenantId);
      await deps.events.emit(tx, tenantId, [{ type: 'mailbox.health_changed', data: { ...present(after, await store.sentToday(tx, tenantId)) } }]);
    });
  }

  /**
   * Asks the provider what the grant allows now and stores the answer as checks. Never throws for the
   * provider. `fresh` skips the token refresh when the tokens were just issued (OAuth completion).
   */
  async function check(tenantId: string, fresh = false, requestedAt?: Date): Promise<{ checked: boolean }> {
    const m = await store.getMailbox(db, tenantId);
    if (!m) return { checked: false };
    // A check that finished after this one was asked for already answered it: sweeps on several worker
    // processes, or an admin's refresh, racing with a refresh that just completed, do not ask the provider twice.
    if (requestedAt && m.last_checked_at && m.last_checked_at.getTime() >= requestedAt.getTime()) return { checked: false };
    const p = providers[m.provider as MailProviderId];
    try {
      // A refresh is forced: the token response is where the provider says which scopes it grants now.
      const { address, scopes } = await tokens.withToken(m, p, async (token, scopes) => ({ address: await p.emailAddress(token), scopes }), !fresh && Boolean(m.refresh_token_sealed));
      const checks = checksFor(p, scopes, { ok: true }, m.polling, { polling: m.checks.find((c) => c.check === 'inbound_polling'), sent: await store.sentToday(db, tenantId) });
      await recordChecks(tenantId, {
        connected: true,
        sendable: p.canSend(scopes),
        checks,
        healthy: checks.every((c) => c.status === 'ok' || c.status === 'unknown'),
        email_address: address,
      });
      return { checked: true };
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      logger.warn({ tenant_id: tenantId, provider: p.id, kind: err.kind }, 'mailbox check failed');
      const revoked = err.kind === 'revoked';
      await recordChecks(tenantId, {
        connected: !revoked && m.connected,
        sendable: !revoked && m.sendable,
        checks: checksFor(p, m.scopes, { ok: false, err }, m.polling, { sent: 0 }),
        healthy: false,
      });
      return { checked: true };
    }
  }

  /** The status as GET /v1/channels/email/mailbox shows it, from stored state only. */
  const read = async (tenantId: string) => {
    const m = await store.getMailbox(db, tenantId);
    return present(m, m ? await store.sentToday(db, tenantId) : 0);
  };

  return { check, read };
}

export type MailboxHealth = ReturnType<typeof createMailboxHealth>;
