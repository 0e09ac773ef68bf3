/**
 * The connected-mailbox tests' helpers: provider scopes and status shapes, an app with workers (the scheduled
 * sweep removed), request helpers bound to a test context, and the provider double's token calls.
 */
import { createHash, randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { createSealer } from '../../src/lib/crypto';
import { startTestApp, type TestContext } from './context';
import { bearer, type Workspace } from './factories';
import { ticketDetail, type TicketEvent } from './ingest';
import { startMailProviderDouble, type MailProviderDouble } from './mail-provider-double';
import { live, useTestApp } from './use-test-app';
import { eventually } from './wait';

/** The provider double of the test file using these helpers (each file starts it in its beforeAll). */
export const suite = { double: undefined as unknown as MailProviderDouble };

export type Provider = 'google' | 'microsoft';
export const PROVIDERS: Provider[] = ['google', 'microsoft'];

export const REDIRECT = 'https://helpdesk.test/oauth/callback';

/** What each provider grants when the admin approves everything the client asks for. */
export const GRANTED: Record<Provider, string[]> = {
  google: ['openid', 'email', 'https://www.googleapis.com/auth/gmail.readonly', 'https://www.googleapis.com/auth/gmail.send'],
  microsoft: ['openid', 'email', 'offline_access', 'User.Read', 'Mail.Read', 'Mail.Send'],
};
export const SEND_SCOPE: Record<Provider, string> = { google: 'https://www.googleapis.com/auth/gmail.send', microsoft: 'Mail.Send' };
export const READ_SCOPE: Record<Provider, string> = { google: 'https://www.googleapis.com/auth/gmail.readonly', microsoft: 'Mail.Read' };
export const WITHOUT_SEND: Record<Provider, string[]> = {
  google: GRANTED.google.filter((s) => s !== SEND_SCOPE.google),
  microsoft: GRANTED.microsoft.filter((s) => s !== SEND_SCOPE.microsoft),
};

export const STATUS_FIELDS = ['connected', 'email_address', 'scopes', 'sendable', 'polling', 'inbound_cursor_set', 'connected_at', 'healthy_at', 'last_polled_at', 'sent_today', 'checks'];
export const CHECK_NAMES = ['oauth_token', 'scopes', 'send_permission', 'inbound_polling', 'daily_send_quota'];
export const DISCONNECTED = {
  connected: false,
  email_address: '',
  scopes: [],
  sendable: false,
  polling: false,
  inbound_cursor_set: false,
  connected_at: null,
  healthy_at: null,
  last_polled_at: null,
  sent_today: 0,
  checks: [],
};

export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
export const SEALED = /^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export interface Check {
  check: string;
  status: 'ok' | 'warning' | 'failing' | 'unknown';
  detail: string;
  remediation: string;
  last_checked_at: string;
}
export interface MailboxStatus {
  connected: boolean;
  provider?: Provider;
  email_address: string;
  scopes: string[];
  sendable: boolean;
  polling: boolean;
  inbound_cursor_set: boolean;
  connected_at: string | null;
  healthy_at: string | null;
  last_polled_at: string | null;
  sent_today: number;
  checks: Check[];
}

export const tag = () => randomBytes(4).toString('hex');
export const stateHash = (state: string) => createHash('sha256').update(state).digest();
export const checkOf = (s: MailboxStatus, name: string) => {
  const c = s.checks.find((x) => x.check === name);
  if (!c) throw new Error(`no ${name} check in ${JSON.stringify(s.checks)}`);
  return c;
};
/** A sentence an admin can act on: words, ending with a full stop. */
export const SENTENCE = /^[A-Z].{10,}\.$/s;

export const providerEnv = (extra: Record<string, string> = {}): Record<string, string> => ({ ...suite.double.env, OAUTH_REDIRECT_URL: REDIRECT, ...extra });

/** A context whose workers run; the scheduled mailbox sweep is removed so no poll or refresh happens unasked. */
export async function appWithWorkers(env: Record<string, string>): Promise<TestContext> {
  const ctx = await startTestApp({ env });
  await ctx.startWorkers();
  await withoutMailboxSweep(ctx);
  return ctx;
}

/** The mail-provider double for the file (suite.double): started before and closed after the hooks declared after it. */
export function useMailProviderDouble(): MailProviderDouble {
  let double: MailProviderDouble | undefined;
  beforeAll(async () => {
    double = suite.double = await startMailProviderDouble();
  });
  afterAll(async () => {
    await double?.close();
  });
  return live(() => double ?? suite.double);
}

/**
 * The app of a describe block with the double's provider settings (plus `extra`), and helpers bound to it.
 * With workers (the default) the scheduled mailbox sweep is removed, as appWithWorkers does.
 */
export function useMailboxApp(extra: Record<string, string> = {}, { workers = true } = {}) {
  const { ctx } = useTestApp({ env: () => providerEnv(extra), workers, setup: workers ? ({ ctx }) => withoutMailboxSweep(ctx) : undefined });
  return { ctx, h: helpers(() => ctx) };
}

/** Removes the scheduled mailbox sweep and waits for the first one to finish, so no poll or refresh happens unasked. */
async function withoutMailboxSweep(ctx: TestContext): Promise<void> {
  const q = ctx.runtime.queues.queue('mailbox');
  await q.removeJobScheduler('mailbox-sweep');
  await eventually(
    async () => {
      const c = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      return Object.values(c).every((n) => n === 0) ? true : undefined;
    },
    5000,
    'the first mailbox sweep to finish',
  );
}

/** Helpers bound to one test context. */
export function helpers(get: () => TestContext) {
  const h = {
    start: (token: string, provider: string) => get().http.post(`/v1/channels/email/oauth/${provider}/start`).set(bearer(token)).send(),
    complete: (token: string, provider: string, body: Record<string, unknown>) =>
      get().http.post(`/v1/channels/email/oauth/${provider}/complete`).set(bearer(token)).send(body),
    status: (token: string) => get().http.get('/v1/channels/email/mailbox').set(bearer(token)),
    refresh: (token: string) => get().http.post('/v1/channels/email/mailbox/refresh').set(bearer(token)).send(),

    async startOk(ws: Workspace, provider: Provider): Promise<{ authorize_url: string; state: string; expires_at: string }> {
      const res = await h.start(ws.ownerKey, provider);
      if (res.status !== 200) throw new Error(`start ${provider}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    code: (provider: Provider, email: string, scopes: string[] = GRANTED[provider], refreshToken?: string) =>
      suite.double.issueCode(provider, { email, scopes, redirectUri: REDIRECT, ...(refreshToken ? { refreshToken } : {}) }),

    /** Start + complete as the owner; returns the mailbox address and the status the completion answered. */
    async connect(ws: Workspace, provider: Provider, o: { email?: string; scopes?: string[]; refreshToken?: string } = {}) {
      const email = o.email ?? `support-${provider}-${tag()}@acme.test`;
      const { state } = await h.startOk(ws, provider);
      const res = await h.complete(ws.ownerKey, provider, { code: h.code(provider, email, o.scopes, o.refreshToken), state });
      if (res.status !== 200) throw new Error(`complete ${provider}: ${res.status} ${JSON.stringify(res.body)}`);
      return { email, status: res.body as MailboxStatus };
    },
    async statusOk(ws: Workspace): Promise<MailboxStatus> {
      const res = await h.status(ws.ownerKey);
      if (res.status !== 200) throw new Error(`status: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    async refreshOk(ws: Workspace): Promise<MailboxStatus> {
      const res = await h.refresh(ws.ownerKey);
      if (res.status !== 200) throw new Error(`refresh: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    row: (tenantId: string) => get().db.selectFrom('mailboxes').selectAll().where('tenant_id', '=', tenantId).executeTakeFirst(),
    /** Every column of the mailbox row as text, the way a database dump would show it. */
    async rawRow(tenantId: string): Promise<string> {
      const r = await sql<{ t: string }>`select row_to_json(m)::text as t from mailboxes m where tenant_id = ${tenantId}`.execute(get().db);
      return r.rows[0]?.t ?? '';
    },
    /** The stored tokens, opened with the deployment's keys and the workspace-bound context. */
    async tokens(tenantId: string) {
      const row = await h.row(tenantId);
      if (!row) throw new Error('no mailbox row');
      const sealer = createSealer(get().config.ENCRYPTION_KEYS);
      return {
        access: sealer.open(row.access_token_sealed, `mailbox:${tenantId}:access`),
        refresh: row.refresh_token_sealed ? sealer.open(row.refresh_token_sealed, `mailbox:${tenantId}:refresh`) : null,
        row,
      };
    },
    stateRow: (state: string) => get().db.selectFrom('oauth_states').selectAll().where('state_hash', '=', stateHash(state)).executeTakeFirst(),
    async count(table: 'tickets' | 'ingest_deliveries' | 'oauth_states' | 'channel_connections' | 'outbound_messages', tenantId: string): Promise<number> {
      const r = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)} where tenant_id = ${tenantId}`.execute(get().db);
      return r.rows[0]!.n;
    },
    tickets: (tenantId: string) => get().db.selectFrom('tickets').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').execute(),
    outbound: (tenantId: string, eventId: string) =>
      get().db.selectFrom('outbound_messages').selectAll().where('tenant_id', '=', tenantId).where('event_id', '=', eventId).executeTakeFirst(),
    poll: (tenantId: string) => get().workerServices.mailboxPolling.poll(tenantId),
    async reply(ws: Workspace, ticketId: string, body: string): Promise<{ eventId: string; event: TicketEvent }> {
      const res = await get().http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(ws.ownerKey)).send({ body });
      if (res.status !== 201) throw new Error(`reply: ${res.status} ${JSON.stringify(res.body)}`);
      const event = (res.body.new_events as TicketEvent[]).find((e) => e.kind === 'reply' && e.body === body)!;
      return { eventId: event.id, event };
    },
    /** What happened to the ticket's replies after they were queued (the `queued` event each reply writes is left out). */
    deliveries: (ws: Workspace, ticketId: string) =>
      ticketDetail(get(), ws, ticketId).then((t) => t.events.filter((e) => e.kind === 'delivery' && e.meta.state !== 'queued')),
    /** Mailbox connected, cursor set, one customer email polled into a ticket. */
    async emailTicket(ws: Workspace, provider: Provider, mailbox: string, o: { messageId?: string; subject?: string } = {}) {
      const customer = `cust.${tag()}@customer.test`;
      const messageId = o.messageId ?? `${tag()}.${Date.now()}@mail.customer.test`;
      const subject = o.subject ?? `Parcel ${tag()} never arrived`;
      if (!(await h.row(ws.tenantId))?.inbound_cursor) await h.poll(ws.tenantId);
      const providerId = suite.double.deliver(provider, mailbox, { from: customer, fromName: 'Ada Lovelace', subject, text: 'Where is my parcel?', messageId });
      const before = new Set((await h.tickets(ws.tenantId)).map((t) => t.id));
      await h.poll(ws.tenantId);
      const ticket = (await h.tickets(ws.tenantId)).find((t) => !before.has(t.id));
      if (!ticket) throw new Error('the delivered message made no ticket');
      return { ticketId: ticket.id, customer, messageId, subject, providerId };
    },
  };
  return h;
}

export async function tokenWorksAtProvider(provider: Provider, token: string): Promise<boolean> {
  const url = provider === 'google' ? `${suite.double.env.GOOGLE_GMAIL_API_URL}/gmail/v1/users/me/profile` : `${suite.double.env.MICROSOFT_GRAPH_API_URL}/v1.0/me`;
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  return res.status === 200;
}

export const tokenCalls = (since: number, provider: Provider) => suite.double.requests.slice(since).filter((r) => r.provider === provider && r.method === 'POST' && r.path === `/${provider}/token`);

