/**
 * The connected mailbox (issue 6; spec: Mailbox status, get_mailbox, refresh_mailbox,
 * complete_mailprovider_oauth): OAuth start and completion, status, refresh, the scheduled refresh's dedupe,
 * polling through the email ingest ledger and replies sent through the mailbox. Google and Microsoft are the
 * provider double (test/helpers/mail-provider-double.ts), reached over real HTTP on loopback.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Job } from 'bullmq';
import { sql } from 'kysely';
import { createSealer } from '../src/lib/crypto';
import { startTestApp, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { ingest, ticketDetail, type TicketEvent } from './helpers/ingest';
import { startMailProviderDouble, type MailProviderDouble } from './helpers/mail-provider-double';
import { emailPayload } from './helpers/payloads';
import { createTicket } from './helpers/tickets';
import { eventually } from './helpers/wait';

type Provider = 'google' | 'microsoft';
const PROVIDERS: Provider[] = ['google', 'microsoft'];

const REDIRECT = 'https://helpdesk.test/oauth/callback';

/** What each provider grants when the admin approves everything the client asks for. */
const GRANTED: Record<Provider, string[]> = {
  google: ['openid', 'email', 'https://www.googleapis.com/auth/gmail.readonly', 'https://www.googleapis.com/auth/gmail.send'],
  microsoft: ['openid', 'email', 'offline_access', 'User.Read', 'Mail.Read', 'Mail.Send'],
};
const SEND_SCOPE: Record<Provider, string> = { google: 'https://www.googleapis.com/auth/gmail.send', microsoft: 'Mail.Send' };
const READ_SCOPE: Record<Provider, string> = { google: 'https://www.googleapis.com/auth/gmail.readonly', microsoft: 'Mail.Read' };
const WITHOUT_SEND: Record<Provider, string[]> = {
  google: GRANTED.google.filter((s) => s !== SEND_SCOPE.google),
  microsoft: GRANTED.microsoft.filter((s) => s !== SEND_SCOPE.microsoft),
};

const STATUS_FIELDS = ['connected', 'email_address', 'scopes', 'sendable', 'polling', 'inbound_cursor_set', 'connected_at', 'healthy_at', 'last_polled_at', 'sent_today', 'checks'];
const CHECK_NAMES = ['oauth_token', 'scopes', 'send_permission', 'inbound_polling', 'daily_send_quota'];
const DISCONNECTED = {
  connected: false,
  email_address: '',
  scopes: [],
  sendable: false,
  polling: false,
  inbound_cursor_set: false,
  connected_at: '',
  healthy_at: '',
  last_polled_at: '',
  sent_today: 0,
  checks: [],
};

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const SEALED = /^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

interface Check {
  check: string;
  status: 'ok' | 'warning' | 'failing' | 'unknown';
  detail: string;
  remediation: string;
  last_checked_at: string;
}
interface MailboxStatus {
  connected: boolean;
  provider?: Provider;
  email_address: string;
  scopes: string[];
  sendable: boolean;
  polling: boolean;
  inbound_cursor_set: boolean;
  connected_at: string;
  healthy_at: string;
  last_polled_at: string;
  sent_today: number;
  checks: Check[];
}

const tag = () => randomBytes(4).toString('hex');
const stateHash = (state: string) => createHash('sha256').update(state).digest();
const checkOf = (s: MailboxStatus, name: string) => {
  const c = s.checks.find((x) => x.check === name);
  if (!c) throw new Error(`no ${name} check in ${JSON.stringify(s.checks)}`);
  return c;
};
/** A sentence an admin can act on: words, ending with a full stop. */
const SENTENCE = /^[A-Z].{10,}\.$/s;

let double: MailProviderDouble;
beforeAll(async () => {
  double = await startMailProviderDouble();
});
afterAll(async () => {
  await double.close();
});

const providerEnv = (extra: Record<string, string> = {}): Record<string, string> => ({ ...double.env, OAUTH_REDIRECT_URL: REDIRECT, ...extra });

/** A context whose workers run; the scheduled mailbox sweep is removed so no poll or refresh happens unasked. */
async function appWithWorkers(env: Record<string, string>): Promise<TestContext> {
  const ctx = await startTestApp({ env });
  await ctx.startWorkers();
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
  return ctx;
}

/** Helpers bound to one test context. */
function helpers(get: () => TestContext) {
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
      double.issueCode(provider, { email, scopes, redirectUri: REDIRECT, ...(refreshToken ? { refreshToken } : {}) }),

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
    async count(table: 'tickets' | 'ingest_deliveries' | 'oauth_states' | 'channel_connections' | 'outbound_emails', tenantId: string): Promise<number> {
      const r = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)} where tenant_id = ${tenantId}`.execute(get().db);
      return r.rows[0]!.n;
    },
    tickets: (tenantId: string) => get().db.selectFrom('tickets').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').execute(),
    outbound: (tenantId: string, eventId: string) =>
      get().db.selectFrom('outbound_emails').selectAll().where('tenant_id', '=', tenantId).where('event_id', '=', eventId).executeTakeFirst(),
    poll: (tenantId: string) => get().services.mailbox.poll(tenantId),
    async reply(ws: Workspace, ticketId: string, body: string): Promise<{ eventId: string; event: TicketEvent }> {
      const res = await get().http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(ws.ownerKey)).send({ body });
      if (res.status !== 201) throw new Error(`reply: ${res.status} ${JSON.stringify(res.body)}`);
      const events = res.body.events as TicketEvent[];
      const event = [...events].reverse().find((e) => e.kind === 'reply' && e.body === body)!;
      return { eventId: event.id, event };
    },
    deliveries: (ws: Workspace, ticketId: string) =>
      ticketDetail(get(), ws, ticketId).then((t) => t.events.filter((e) => e.kind === 'email_delivery')),
    /** Mailbox connected, cursor set, one customer email polled into a ticket. */
    async emailTicket(ws: Workspace, provider: Provider, mailbox: string, o: { messageId?: string; subject?: string } = {}) {
      const customer = `cust.${tag()}@customer.test`;
      const messageId = o.messageId ?? `${tag()}.${Date.now()}@mail.customer.test`;
      const subject = o.subject ?? `Parcel ${tag()} never arrived`;
      if (!(await h.row(ws.tenantId))?.inbound_cursor) await h.poll(ws.tenantId);
      const providerId = double.deliver(provider, mailbox, { from: customer, fromName: 'Ada Lovelace', subject, text: 'Where is my parcel?', messageId });
      const before = new Set((await h.tickets(ws.tenantId)).map((t) => t.id));
      await h.poll(ws.tenantId);
      const ticket = (await h.tickets(ws.tenantId)).find((t) => !before.has(t.id));
      if (!ticket) throw new Error('the delivered message made no ticket');
      return { ticketId: ticket.id, customer, messageId, subject, providerId };
    },
  };
  return h;
}

async function tokenWorksAtProvider(provider: Provider, token: string): Promise<boolean> {
  const url = provider === 'google' ? `${double.env.GOOGLE_GMAIL_API_URL}/gmail/v1/users/me/profile` : `${double.env.MICROSOFT_GRAPH_API_URL}/v1.0/me`;
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  return res.status === 200;
}

const tokenCalls = (since: number, provider: Provider) => double.requests.slice(since).filter((r) => r.provider === provider && r.method === 'POST' && r.path === `/${provider}/token`);

// =========================================================================================================

describe('Connected mailbox, workers running', () => {
  let ctx: TestContext;
  const h = helpers(() => ctx);
  beforeAll(async () => {
    ctx = await appWithWorkers(providerEnv());
  });
  afterAll(async () => {
    await ctx.close();
  });

  describe('GET /v1/channels/email/mailbox', () => {
    test('with nothing connected: 200, connected false, every field present and empty, zero or false', async () => {
      const ws = await createWorkspace(ctx);
      const res = await h.status(ws.ownerKey);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual([...STATUS_FIELDS].sort());
      expect(res.body).toEqual(DISCONNECTED);
    });

    test('a viewer may read it; a key without channels:read gets 403 insufficient_scope, one with it 200', async () => {
      const ws = await createWorkspace(ctx);
      await h.connect(ws, 'google');
      const viewer = await addMember(ctx, ws, 'viewer');
      const asViewer = await h.status(viewer.token);
      expect(asViewer.status).toBe(200);
      expect(asViewer.body.connected).toBe(true);

      const ticketsOnly = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:read'] });
      const refused = await h.status(ticketsOnly.secret);
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe('insufficient_scope');

      const channelsRead = await mintKey(ctx, ws.ownerKey, { scopes: ['channels:read'] });
      expect((await h.status(channelsRead.secret)).status).toBe(200);
    });

    test.each(PROVIDERS)('%s: reading the status makes no provider call', async (p) => {
      const ws = await createWorkspace(ctx);
      await h.connect(ws, p);
      const mark = double.requests.length;
      for (let i = 0; i < 3; i += 1) expect((await h.status(ws.ownerKey)).status).toBe(200);
      expect(double.requests.slice(mark)).toEqual([]);
    });
  });

  describe('POST /v1/channels/email/oauth/{mailprovider}/start', () => {
    test.each(PROVIDERS)('%s: authorize_url is the configured auth URL with client_id, redirect_uri, scope and state; the state lasts 10 minutes and is bound to workspace and user', async (p) => {
      const ws = await createWorkspace(ctx);
      const before = Date.now();
      const res = await h.start(ws.ownerKey, p);
      const after = Date.now();
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['authorize_url', 'expires_at', 'state']);
      const url = new URL(res.body.authorize_url);
      expect(`${url.origin}${url.pathname}`).toBe(p === 'google' ? double.env.GOOGLE_AUTH_URL : double.env.MICROSOFT_AUTH_URL);
      expect(url.searchParams.get('client_id')).toBe(p === 'google' ? double.env.GOOGLE_CLIENT_ID : double.env.MICROSOFT_CLIENT_ID);
      expect(url.searchParams.get('redirect_uri')).toBe(REDIRECT);
      expect(url.searchParams.get('response_type')).toBe('code');
      expect(url.searchParams.get('state')).toBe(res.body.state);
      expect(url.searchParams.get('scope')!.split(' ')).toEqual(expect.arrayContaining([READ_SCOPE[p], SEND_SCOPE[p]]));
      expect(res.body.state.length).toBeGreaterThanOrEqual(32);

      expect(res.body.expires_at).toMatch(ISO);
      const expires = new Date(res.body.expires_at).getTime();
      expect(expires).toBeGreaterThanOrEqual(before + 600_000 - 1000);
      expect(expires).toBeLessThanOrEqual(after + 600_000 + 1000);

      const row = await h.stateRow(res.body.state);
      expect(row).toMatchObject({ tenant_id: ws.tenantId, user_id: ws.ownerId, provider: p, used_at: null });

      const again = await h.start(ws.ownerKey, p);
      expect(again.body.state).not.toBe(res.body.state);
    });

    test.each(PROVIDERS)('%s: the authorize URL leads through the provider\'s consent to a code and state that complete the connection', async (p) => {
      const ws = await createWorkspace(ctx);
      const email = `consent-${p}-${tag()}@acme.test`;
      const { authorize_url } = await h.startOk(ws, p);
      const consent = new URL(authorize_url);
      consent.searchParams.set('login_hint', email);
      const redirected = await fetch(consent, { redirect: 'manual' });
      expect(redirected.status).toBe(302);
      const back = new URL(redirected.headers.get('location')!);
      expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
      const res = await h.complete(ws.ownerKey, p, { code: back.searchParams.get('code'), state: back.searchParams.get('state') });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ connected: true, email_address: email, sendable: true });
    });

    test('an unknown mailprovider is 404 on start and on complete', async () => {
      const ws = await createWorkspace(ctx);
      const start = await h.start(ws.ownerKey, 'yahoo');
      expect(start.status).toBe(404);
      const complete = await h.complete(ws.ownerKey, 'yahoo', { code: 'c', state: 's' });
      expect(complete.status).toBe(404);
      expect(await h.count('oauth_states', ws.tenantId)).toBe(0);
    });

    test('an editor (below admin) gets 403 insufficient_role and no state is minted; so does a key without channels:write', async () => {
      const ws = await createWorkspace(ctx);
      const editor = await addMember(ctx, ws, 'editor');
      const res = await h.start(editor.token, 'google');
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('insufficient_role');
      const readOnly = await mintKey(ctx, ws.ownerKey, { scopes: ['channels:read'] });
      const byKey = await h.start(readOnly.secret, 'google');
      expect(byKey.status).toBe(403);
      expect(byKey.body.code).toBe('insufficient_scope');
      expect(await h.count('oauth_states', ws.tenantId)).toBe(0);
    });
  });

  describe('POST /v1/channels/email/oauth/{mailprovider}/complete', () => {
    test.each(PROVIDERS)('%s: connects the mailbox: Mailbox status with the provider\'s address and scopes, sendable, ok checks; the email channel is connected', async (p) => {
      const ws = await createWorkspace(ctx);
      const email = `help-${p}-${tag()}@acme.test`;
      const { state } = await h.startOk(ws, p);
      const before = Date.now();
      const res = await h.complete(ws.ownerKey, p, { code: h.code(p, email), state });
      expect(res.status).toBe(200);
      const s = res.body as MailboxStatus;
      expect(Object.keys(s).filter((k) => k !== 'provider').sort()).toEqual([...STATUS_FIELDS].sort());
      expect(s).toMatchObject({
        connected: true,
        email_address: email,
        sendable: true,
        polling: true,
        inbound_cursor_set: false,
        last_polled_at: '',
        sent_today: 0,
      });
      expect(s.scopes).toEqual(GRANTED[p]);
      expect(s.connected_at).toMatch(ISO);
      expect(new Date(s.connected_at).getTime()).toBeGreaterThanOrEqual(before - 1000);
      expect(s.healthy_at).toMatch(ISO);
      expect(s.checks.map((c) => c.check)).toEqual(CHECK_NAMES);
      for (const name of ['oauth_token', 'scopes', 'send_permission', 'daily_send_quota']) expect(checkOf(s, name).status).toBe('ok');
      for (const c of s.checks) {
        expect(c).toEqual({ check: c.check, status: expect.any(String), detail: expect.any(String), remediation: expect.any(String), last_checked_at: expect.stringMatching(ISO) });
        expect(c.detail).not.toBe('');
        expect(c.remediation).not.toBe('');
      }

      // Stored, not computed for the answer: a read gives the same.
      expect(await h.statusOk(ws)).toEqual(s);
      // The state is spent.
      expect((await h.stateRow(state))!.used_at).toBeInstanceOf(Date);
      // Polled mail enters through the email channel, which now exists.
      const channels = await ctx.http.get('/v1/channels').set(bearer(ws.ownerKey));
      expect(channels.status).toBe(200);
      const emailChannel = (channels.body.channels as { channel: string; connected: boolean; connection: { enabled: boolean } | null }[]).find((c) => c.channel === 'email');
      expect(emailChannel).toMatchObject({ connected: true, connection: { enabled: true } });
      const conn = await ctx.db.selectFrom('channel_connections').selectAll().where('tenant_id', '=', ws.tenantId).where('channel', '=', 'email').executeTakeFirst();
      expect(conn).toMatchObject({ enabled: true });
    });

    test.each(PROVIDERS)('%s: tokens are stored sealed (bound to the workspace) and appear in no response, channel read, log line or other column', async (p) => {
      const ws = await createWorkspace(ctx);
      const other = await createWorkspace(ctx);
      const refreshToken = p === 'google' ? `1//0${randomBytes(36).toString('base64url')}` : `M.C5_BAY.0.U.-${randomBytes(48).toString('base64url')}`;
      const { state } = await h.startOk(ws, p);
      const email = `sealed-${p}-${tag()}@acme.test`;
      const completed = await h.complete(ws.ownerKey, p, { code: h.code(p, email, GRANTED[p], refreshToken), state });
      expect(completed.status).toBe(200);

      const { access, refresh, row } = await h.tokens(ws.tenantId);
      expect(refresh).toBe(refreshToken);
      // What we opened is the live access token the provider issued.
      expect(await tokenWorksAtProvider(p, access)).toBe(true);
      expect(row.access_token_sealed).toMatch(SEALED);
      expect(row.refresh_token_sealed).toMatch(SEALED);
      const raw = await h.rawRow(ws.tenantId);
      expect(raw).toContain(row.access_token_sealed);
      expect(raw).not.toContain(access);
      expect(raw).not.toContain(refreshToken);
      // Bound to the workspace: copied to another workspace's row, it does not open.
      const sealer = createSealer(ctx.config.ENCRYPTION_KEYS);
      expect(() => sealer.open(row.access_token_sealed, `mailbox:${other.tenantId}:access`)).toThrow();
      expect(() => sealer.open(row.refresh_token_sealed!, `mailbox:${ws.tenantId}:access`)).toThrow();

      const reads = [
        completed,
        await h.status(ws.ownerKey),
        await h.refresh(ws.ownerKey),
        await ctx.http.get('/v1/channels').set(bearer(ws.ownerKey)),
        await ctx.http.get('/v1/audit-log').set(bearer(ws.ownerKey)),
      ];
      expect(reads[2]!.status).toBe(200);
      for (const r of reads) {
        expect(r.text).not.toContain(access);
        expect(r.text).not.toContain(refreshToken);
      }
      const elsewhere = await sql<{ t: string }>`
        select coalesce(string_agg(x, ' '), '') as t from (
          select row_to_json(a)::text as x from audit_log a where tenant_id = ${ws.tenantId}
          union all select row_to_json(c)::text from channel_connections c where tenant_id = ${ws.tenantId}
          union all select row_to_json(o)::text from oauth_states o where tenant_id = ${ws.tenantId}
        ) s`.execute(ctx.db);
      expect(elsewhere.rows[0]!.t).not.toContain(access);
      expect(elsewhere.rows[0]!.t).not.toContain(refreshToken);

      expect(ctx.logs.lines.length).toBeGreaterThan(0);
      expect(ctx.logs.text).not.toContain(access);
      expect(ctx.logs.text).not.toContain(refreshToken);
    });
  });

  describe('OAuth state rules', () => {
    test.each(PROVIDERS)('%s: a state minted in workspace A and completed by workspace B is 403 oauth_state_mismatch and not consumed; A then completes it', async (p) => {
      const a = await createWorkspace(ctx);
      const b = await createWorkspace(ctx);
      const email = `a-${p}-${tag()}@acme.test`;
      const { state } = await h.startOk(a, p);
      const code = h.code(p, email);
      const mark = double.requests.length;

      const stolen = await h.complete(b.ownerKey, p, { code, state });
      expect(stolen.status).toBe(403);
      expect(stolen.body.code).toBe('oauth_state_mismatch');
      expect((await h.stateRow(state))!.used_at).toBeNull();
      expect(tokenCalls(mark, p)).toEqual([]);
      expect(await h.statusOk(b)).toEqual(DISCONNECTED);
      expect(await h.row(b.tenantId)).toBeUndefined();

      const own = await h.complete(a.ownerKey, p, { code, state });
      expect(own.status).toBe(200);
      expect(own.body).toMatchObject({ connected: true, email_address: email });
      expect(await h.statusOk(b)).toEqual(DISCONNECTED);
    });

    test('a state already used is 400 oauth_state_invalid and connects nothing new', async () => {
      const ws = await createWorkspace(ctx);
      const first = `first-${tag()}@acme.test`;
      const { state } = await h.startOk(ws, 'google');
      expect((await h.complete(ws.ownerKey, 'google', { code: h.code('google', first), state })).status).toBe(200);
      const reused = await h.complete(ws.ownerKey, 'google', { code: h.code('google', `second-${tag()}@acme.test`), state });
      expect(reused.status).toBe(400);
      expect(reused.body.code).toBe('oauth_state_invalid');
      expect((await h.statusOk(ws)).email_address).toBe(first);
    });

    test('an expired state is 400 oauth_state_invalid and the code is not exchanged', async () => {
      const ws = await createWorkspace(ctx);
      const { state } = await h.startOk(ws, 'microsoft');
      await ctx.db.updateTable('oauth_states').set({ expires_at: new Date(Date.now() - 1000) }).where('state_hash', '=', stateHash(state)).execute();
      const mark = double.requests.length;
      const res = await h.complete(ws.ownerKey, 'microsoft', { code: h.code('microsoft', `late-${tag()}@acme.test`), state });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('oauth_state_invalid');
      expect(tokenCalls(mark, 'microsoft')).toEqual([]);
      expect(await h.statusOk(ws)).toEqual(DISCONNECTED);
    });

    test('a state minted for google is 400 oauth_state_invalid on microsoft, and still completes on google', async () => {
      const ws = await createWorkspace(ctx);
      const { state } = await h.startOk(ws, 'google');
      const wrong = await h.complete(ws.ownerKey, 'microsoft', { code: h.code('microsoft', `ms-${tag()}@acme.test`), state });
      expect(wrong.status).toBe(400);
      expect(wrong.body.code).toBe('oauth_state_invalid');
      expect(await h.row(ws.tenantId)).toBeUndefined();
      const email = `g-${tag()}@acme.test`;
      const right = await h.complete(ws.ownerKey, 'google', { code: h.code('google', email), state });
      expect(right.status).toBe(200);
      expect(right.body).toMatchObject({ connected: true, provider: 'google', email_address: email });
    });

    test('a state that was never minted is 400 oauth_state_invalid', async () => {
      const ws = await createWorkspace(ctx);
      for (const state of ['garbage', randomBytes(32).toString('base64url')]) {
        const res = await h.complete(ws.ownerKey, 'google', { code: h.code('google', `x-${tag()}@acme.test`), state });
        expect(res.status).toBe(400);
        expect(res.body.code).toBe('oauth_state_invalid');
      }
      expect(await h.row(ws.tenantId)).toBeUndefined();
    });

    test.each([
      [{ extra: 'field' }, 'an unknown field'],
      [{ code: undefined }, 'no code'],
      [{ state: '' }, 'an empty state'],
    ])('a body with %p (%s) is 400 validation_failed and leaves the state unused', async (override, _why) => {
      const ws = await createWorkspace(ctx);
      const { state } = await h.startOk(ws, 'google');
      const res = await h.complete(ws.ownerKey, 'google', { code: h.code('google', `v-${tag()}@acme.test`), state, ...override });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
      expect((await h.stateRow(state))!.used_at).toBeNull();
      expect(await h.row(ws.tenantId)).toBeUndefined();
    });
  });

  describe('provider errors on complete', () => {
    test.each(PROVIDERS)('%s down: 502 mail_provider_unavailable with Retry-After, nothing connected, and the same completion succeeds once it is back', async (p) => {
      const ws = await createWorkspace(ctx);
      const { state } = await h.startOk(ws, p);
      const code = h.code(p, `down-${p}-${tag()}@acme.test`);
      double.setDown(p, true);
      let res;
      try {
        res = await h.complete(ws.ownerKey, p, { code, state });
      } finally {
        double.setDown(p, false);
      }
      expect(res.status).toBe(502);
      expect(res.body.code).toBe('mail_provider_unavailable');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(await h.statusOk(ws)).toEqual(DISCONNECTED);
      expect(await h.row(ws.tenantId)).toBeUndefined();
      expect(await h.count('channel_connections', ws.tenantId)).toBe(0);
      // Retry-After means it: the state was not consumed by the failed attempt.
      const retried = await h.complete(ws.ownerKey, p, { code, state });
      expect(retried.status).toBe(200);
      expect(retried.body.connected).toBe(true);
    });

    test.each(PROVIDERS)('%s: an unknown code, or one already redeemed, is 400 oauth_code_invalid; nothing connected', async (p) => {
      const ws = await createWorkspace(ctx);
      const unknown = await h.complete(ws.ownerKey, p, { code: 'not-a-code-the-provider-issued', state: (await h.startOk(ws, p)).state });
      expect(unknown.status).toBe(400);
      expect(unknown.body.code).toBe('oauth_code_invalid');

      const other = await createWorkspace(ctx);
      const code = h.code(p, `used-${p}-${tag()}@acme.test`);
      expect((await h.complete(other.ownerKey, p, { code, state: (await h.startOk(other, p)).state })).status).toBe(200);
      const used = await h.complete(ws.ownerKey, p, { code, state: (await h.startOk(ws, p)).state });
      expect(used.status).toBe(400);
      expect(used.body.code).toBe('oauth_code_invalid');

      expect(await h.statusOk(ws)).toEqual(DISCONNECTED);
      expect(await h.row(ws.tenantId)).toBeUndefined();
    });
  });

  describe('POST /v1/channels/email/mailbox/refresh', () => {
    test('with nothing connected: 200 with the empty status; an editor is refused 403', async () => {
      const ws = await createWorkspace(ctx);
      const res = await h.refresh(ws.ownerKey);
      expect(res.status).toBe(200);
      expect(res.body).toEqual(DISCONNECTED);
      const editor = await addMember(ctx, ws, 'editor');
      const refused = await h.refresh(editor.token);
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe('insufficient_role');
    });

    test.each(PROVIDERS)('%s: stores the provider\'s current answer: a grant that lost the send scope reads sendable false, send_permission failing with a remediation', async (p) => {
      const ws = await createWorkspace(ctx);
      const { email } = await h.connect(ws, p);
      double.setScopes(p, email, WITHOUT_SEND[p]);
      const s = await h.refreshOk(ws);
      expect(s.connected).toBe(true);
      expect(s.sendable).toBe(false);
      expect(s.scopes).toEqual(WITHOUT_SEND[p]);
      const send = checkOf(s, 'send_permission');
      expect(send.status).toBe('failing');
      expect(send.remediation).toMatch(SENTENCE);
      expect(checkOf(s, 'oauth_token').status).toBe('ok');
      expect(checkOf(s, 'scopes').status).not.toBe('ok');
      // Stored: the next read, which asks nobody, says the same.
      expect(await h.statusOk(ws)).toEqual(s);
      expect(await h.row(ws.tenantId)).toMatchObject({ sendable: false, scopes: WITHOUT_SEND[p] });
    });

    test.each(PROVIDERS)('%s down: 200 with a failing oauth_token check (not a 500); connected stays; the next refresh with the provider back reads ok', async (p) => {
      const ws = await createWorkspace(ctx);
      const { status: connected } = await h.connect(ws, p);
      double.setDown(p, true);
      let res;
      try {
        res = await h.refresh(ws.ownerKey);
      } finally {
        double.setDown(p, false);
      }
      expect(res.status).toBe(200);
      const s = res.body as MailboxStatus;
      expect(s.connected).toBe(true);
      const token = checkOf(s, 'oauth_token');
      expect(token.status).toBe('failing');
      expect(token.detail).not.toBe('');
      expect(token.remediation).toMatch(SENTENCE);
      expect(s.healthy_at).toBe(connected.healthy_at);
      expect(await h.statusOk(ws)).toEqual(s);

      const back = await h.refreshOk(ws);
      expect(checkOf(back, 'oauth_token').status).toBe('ok');
      expect(back.sendable).toBe(true);
    });

    test.each(PROVIDERS)('%s: a revoked grant reads connected false and sendable false, with a reconnect remediation', async (p) => {
      const ws = await createWorkspace(ctx);
      const { email } = await h.connect(ws, p);
      double.revoke(p, email);
      const s = await h.refreshOk(ws);
      expect(s.connected).toBe(false);
      expect(s.sendable).toBe(false);
      const token = checkOf(s, 'oauth_token');
      expect(token.status).toBe('failing');
      expect(token.remediation).toMatch(/reconnect/i);
      expect(await h.statusOk(ws)).toEqual(s);
      expect(await h.row(ws.tenantId)).toMatchObject({ connected: false, sendable: false });
    });

    test.each(PROVIDERS)('%s: an access token past its stored expiry is refreshed before use and the new one is stored sealed', async (p) => {
      const ws = await createWorkspace(ctx);
      await h.connect(ws, p);
      const old = await h.tokens(ws.tenantId);
      await ctx.db.updateTable('mailboxes').set({ access_expires_at: new Date(Date.now() - 60_000) }).where('tenant_id', '=', ws.tenantId).execute();
      const mark = double.requests.length;
      const s = await h.refreshOk(ws);
      expect(s).toMatchObject({ connected: true, sendable: true });
      expect(checkOf(s, 'oauth_token').status).toBe('ok');
      expect(tokenCalls(mark, p)).toHaveLength(1);

      const now = await h.tokens(ws.tenantId);
      expect(now.access).not.toBe(old.access);
      expect(now.row.access_token_sealed).toMatch(SEALED);
      expect(now.row.access_token_sealed).not.toBe(old.row.access_token_sealed);
      expect(now.row.access_expires_at.getTime()).toBeGreaterThan(Date.now() + 30 * 60_000);
      expect(await tokenWorksAtProvider(p, now.access)).toBe(true);
      const raw = await h.rawRow(ws.tenantId);
      expect(raw).not.toContain(now.access);
      expect(raw).not.toContain(now.refresh!);
      expect(ctx.logs.text).not.toContain(now.access);
    });

    test.each(PROVIDERS)('%s: an access token the provider expired early (401) is refreshed transparently, not taken for a revoked grant', async (p) => {
      const ws = await createWorkspace(ctx);
      const { email } = await h.connect(ws, p);
      const old = await h.tokens(ws.tenantId);
      double.expireAccessTokens(p, email);
      const mark = double.requests.length;
      const s = await h.refreshOk(ws);
      expect(s).toMatchObject({ connected: true, sendable: true });
      expect(checkOf(s, 'oauth_token').status).toBe('ok');
      expect(tokenCalls(mark, p).length).toBeGreaterThanOrEqual(1);
      const now = await h.tokens(ws.tenantId);
      expect(now.access).not.toBe(old.access);
      expect(now.row.access_token_sealed).toMatch(SEALED);
      expect(await tokenWorksAtProvider(p, now.access)).toBe(true);
      expect(await h.rawRow(ws.tenantId)).not.toContain(now.access);
    });
  });

  describe.each(PROVIDERS)('%s polling through the ingest ledger', (p) => {
    let ws: Workspace;
    let mailbox: string;
    const customer = `cust.${p}.${tag()}@customer.test`;
    // A Message-ID as mail clients write them: mixed case, brackets added by the double.
    const firstId = `CAF${tag()}.Xy+Z@Mail.Customer.Test`;
    const firstKey = firstId.toLowerCase();
    const subject = `Parcel ${tag()} never arrived`;
    let ticketId: string;

    beforeAll(async () => {
      ws = await createWorkspace(ctx);
      mailbox = (await h.connect(ws, p)).email;
    });

    test('the first poll only establishes the cursor: inbound_cursor_set true, last_polled_at set, mail already in the inbox not imported', async () => {
      double.deliver(p, mailbox, { from: `old.${tag()}@customer.test`, subject: 'Old mail', text: 'From before the connection', messageId: `${tag()}@old.test` });
      const r = await h.poll(ws.tenantId);
      expect(r).toMatchObject({ fetched: 0 });
      const s = await h.statusOk(ws);
      expect(s.inbound_cursor_set).toBe(true);
      expect(s.last_polled_at).toMatch(ISO);
      expect(await h.count('tickets', ws.tenantId)).toBe(0);
      expect(await h.count('ingest_deliveries', ws.tenantId)).toBe(0);
    });

    test('a delivered message becomes one email ticket with an inbound_email event, in the ledger under its Message-ID (lower-cased, no brackets)', async () => {
      double.deliver(p, mailbox, { from: customer, fromName: 'Ada Lovelace', subject, text: 'My parcel never arrived.', messageId: firstId });
      const r = await h.poll(ws.tenantId);
      expect(r).toMatchObject({ fetched: 1, ingested: 1 });
      const tickets = await h.tickets(ws.tenantId);
      expect(tickets).toHaveLength(1);
      ticketId = tickets[0]!.id;
      const t = await ticketDetail(ctx, ws, ticketId);
      expect(t).toMatchObject({ source: 'email', subject, customer_email: customer });
      expect(t.events.map((e) => e.kind)).toEqual(['inbound_email']);
      expect(t.events[0]).toMatchObject({ actor_type: 'customer', body: 'My parcel never arrived.' });

      const ledger = await ctx.db.selectFrom('ingest_deliveries').selectAll().where('tenant_id', '=', ws.tenantId).execute();
      expect(ledger).toHaveLength(1);
      expect(ledger[0]).toMatchObject({ channel: 'email', provider_message_id: firstKey, ticket_id: ticketId, was_created: true, duplicate_count: 0 });

      const s = await h.statusOk(ws);
      expect(s.last_polled_at).toMatch(ISO);
      expect(checkOf(s, 'inbound_polling').status).toBe('ok');
    });

    test('the same email pushed to POST /v1/ingest/email is a duplicate of the polled one: was_duplicate true, no second ticket', async () => {
      const payload = emailPayload({ from: customer, fromName: 'Ada Lovelace', subject, text: 'My parcel never arrived.', messageId: firstId });
      const res = await ingest(ctx, 'email', payload, ws.tenantId);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ ticket_id: ticketId, was_duplicate: true, was_created: false });
      expect(await h.count('tickets', ws.tenantId)).toBe(1);
      const ledger = await ctx.db.selectFrom('ingest_deliveries').selectAll().where('tenant_id', '=', ws.tenantId).execute();
      expect(ledger).toHaveLength(1);
      expect(ledger[0]!.duplicate_count).toBe(1);
      expect((await ticketDetail(ctx, ws, ticketId)).events.filter((e) => e.kind === 'inbound_email')).toHaveLength(1);
    });

    test('polling again with no new mail ingests nothing', async () => {
      const before = (await h.row(ws.tenantId))!;
      const r = await h.poll(ws.tenantId);
      expect(r).toMatchObject({ fetched: 0 });
      expect(await h.count('tickets', ws.tenantId)).toBe(1);
      expect(await h.count('ingest_deliveries', ws.tenantId)).toBe(1);
      const after = (await h.row(ws.tenantId))!;
      expect(after.inbound_cursor).not.toBeNull();
      expect(after.last_polled_at!.getTime()).toBeGreaterThanOrEqual(before.last_polled_at!.getTime());
    });

    test('a reply delivered with In-Reply-To the first message threads into the same ticket', async () => {
      double.deliver(p, mailbox, { from: customer, subject: `Re: ${subject}`, text: 'Any news?', messageId: `${tag()}@mail.customer.test`, inReplyTo: firstId, references: [firstId] });
      const r = await h.poll(ws.tenantId);
      expect(r).toMatchObject({ fetched: 1, ingested: 1 });
      expect(await h.count('tickets', ws.tenantId)).toBe(1);
      const t = await ticketDetail(ctx, ws, ticketId);
      expect(t.events.filter((e) => e.kind === 'inbound_email').map((e) => e.body)).toEqual(['My parcel never arrived.', 'Any news?']);
    });
  });

  describe.each(PROVIDERS)('%s outbound replies', (p) => {
    let ws: Workspace;
    let mailbox: string;
    let mail: { ticketId: string; customer: string; messageId: string; subject: string; providerId: string };
    let replyEventId: string;
    const replyText = 'We have found your parcel; it ships today.';

    beforeAll(async () => {
      ws = await createWorkspace(ctx);
      mailbox = (await h.connect(ws, p)).email;
      mail = await h.emailTicket(ws, p, mailbox, { messageId: `${tag()}.${Date.now()}@mail.customer.test` });
    });

    test('a reply on the polled ticket reaches the provider with To, Subject "Re: …", In-Reply-To, References and a Message-ID, and is recorded as sent', async () => {
      const { eventId, event } = await h.reply(ws, mail.ticketId, replyText);
      replyEventId = eventId;
      expect(event.meta.email_delivery).toBe('queued');
      const row = await eventually(async () => {
        const o = await h.outbound(ws.tenantId, eventId);
        return o?.state === 'sent' ? o : undefined;
      }, 10_000, 'the reply to be sent');
      expect(row).toMatchObject({ ticket_id: mail.ticketId, attempts: 1, last_error: null });
      expect(row.sent_at).toBeInstanceOf(Date);

      const sent = double.sent(p, mailbox);
      expect(sent).toHaveLength(1);
      const m = sent[0]!;
      expect(m.headers.to).toContain(mail.customer);
      expect(m.headers.from).toContain(mailbox);
      expect(m.headers.subject).toBe(`Re: ${mail.subject}`);
      expect(m.headers['in-reply-to']).toBe(`<${mail.messageId}>`);
      expect(m.headers.references?.split(/\s+/)).toContain(`<${mail.messageId}>`);
      expect(m.headers['message-id']).toMatch(/^<[^<>\s@]+@[^<>\s@]+>$/);
      expect(m.headers['message-id']).toBe(`<${row.message_id}>`);
      expect(m.text).toContain(replyText);

      const deliveries = await h.deliveries(ws, mail.ticketId);
      expect(deliveries).toHaveLength(1);
      expect(deliveries[0]!.meta).toMatchObject({ state: 'sent', reply_event_id: eventId, message_id: row.message_id });

      const s = await h.statusOk(ws);
      expect(s.sent_today).toBe(1);
      expect(checkOf(s, 'daily_send_quota').status).toBe('ok');
    });

    test('running the send job again for the same reply sends nothing more', async () => {
      expect(replyEventId).toBeDefined();
      const again = await ctx.services.mailbox.send(ws.tenantId, replyEventId, 1);
      expect(again).toEqual({ state: 'sent' });
      expect(double.sent(p, mailbox)).toHaveLength(1);
      expect(await h.deliveries(ws, mail.ticketId)).toHaveLength(1);
      expect((await h.statusOk(ws)).sent_today).toBe(1);
    });

    test('the customer\'s answer to the reply threads back into the ticket by the reply\'s Message-ID', async () => {
      const ours = double.sent(p, mailbox)[0]!.headers['message-id']!;
      double.deliver(p, mailbox, { from: mail.customer, subject: `Re: ${mail.subject}`, text: 'Thanks!', messageId: `${tag()}@mail.customer.test`, inReplyTo: ours, references: [ours] });
      expect(await h.poll(ws.tenantId)).toMatchObject({ fetched: 1, ingested: 1 });
      expect(await h.count('tickets', ws.tenantId)).toBe(1);
      const t = await ticketDetail(ctx, ws, mail.ticketId);
      expect(t.events.filter((e) => e.kind === 'inbound_email').map((e) => e.body)).toEqual(['Where is my parcel?', 'Thanks!']);
    });

    test('In-Reply-To and References carry the customer\'s Message-ID exactly as written (its case kept)', async () => {
      const messageId = `CAJ${tag()}+Qx=Ab@Mail.Gmail.Com`;
      const t = await h.emailTicket(ws, p, mailbox, { messageId });
      const before = double.sent(p, mailbox).length;
      const { eventId } = await h.reply(ws, t.ticketId, 'Looking into it.');
      await eventually(async () => ((await h.outbound(ws.tenantId, eventId))?.state === 'sent' ? true : undefined), 10_000, 'the reply to be sent');
      const m = double.sent(p, mailbox)[before]!;
      expect(m.headers['in-reply-to']).toBe(`<${messageId}>`);
      expect(m.headers.references?.split(/\s+/)).toContain(`<${messageId}>`);
    });
  });

  describe('what the workers did, seen from outside', () => {
    test.each(PROVIDERS)('%s: five scheduled sweeps at once and an admin\'s refresh ask the provider once; every check it makes carries that one check\'s time', async (p) => {
      const ws = await createWorkspace(ctx);
      await h.connect(ws, p);
      const stale = new Date(Date.now() - 2 * ctx.config.MAILBOX_REFRESH_SECONDS * 1000);
      await ctx.db.updateTable('mailboxes').set({ last_checked_at: stale }).where('tenant_id', '=', ws.tenantId).execute();
      const mark = double.requests.length;
      const [refreshed] = await Promise.all([h.refreshOk(ws), ...Array.from({ length: 5 }, () => ctx.services.mailbox.sweep())]);
      expect(refreshed.connected).toBe(true);
      const q = ctx.runtime.queues.queue('mailbox');
      await eventually(async () => {
        const c = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        return Object.values(c).every((n) => n === 0) ? true : undefined;
      }, 10_000, 'the mailbox queue to drain');
      // Each check refreshes the token first (that is where the provider says which scopes it grants now).
      expect(tokenCalls(mark, p)).toHaveLength(1);
      const s = await h.statusOk(ws);
      // inbound_polling is the last poll's own result, kept by a refresh; every other check is the refresh's.
      const times = new Set(s.checks.filter((c) => c.check !== 'inbound_polling').map((c) => c.last_checked_at));
      expect(times.size).toBe(1);
      expect(new Date([...times][0]!).getTime()).toBeGreaterThan(stale.getTime());
      // A sweep right after finds nothing due and asks nothing.
      await ctx.services.mailbox.sweep();
      await new Promise((r) => setTimeout(r, 300));
      expect(tokenCalls(mark, p)).toHaveLength(1);
    });

    test.each(PROVIDERS)('%s: a reply sent while the provider is down is retried with backoff by the worker, and the ticket says so before it is sent', async (p) => {
      const ws = await createWorkspace(ctx);
      const { email: mailbox } = await h.connect(ws, p);
      const mail = await h.emailTicket(ws, p, mailbox);
      double.setDown(p, true);
      let eventId: string;
      try {
        ({ eventId } = await h.reply(ws, mail.ticketId, 'Sent once the provider is back.'));
        await eventually(async () => ((await h.deliveries(ws, mail.ticketId)).some((d) => d.meta.state === 'retrying') ? true : undefined), 10_000, 'a retrying delivery event');
        expect(double.sent(p, mailbox)).toEqual([]);
      } finally {
        double.setDown(p, false);
      }
      const row = await eventually(async () => {
        const o = await h.outbound(ws.tenantId, eventId);
        return o?.state === 'sent' ? o : undefined;
      }, 20_000, 'the retried reply to be sent');
      expect(row.attempts).toBeGreaterThanOrEqual(2);
      const states = (await h.deliveries(ws, mail.ticketId)).map((d) => d.meta.state);
      expect(states.at(-1)).toBe('sent');
      expect(states.slice(0, -1).every((st) => st === 'retrying')).toBe(true);
      expect(double.sent(p, mailbox)).toHaveLength(1);
    });
  });

  describe.each(PROVIDERS)('%s replies join the customer\'s conversation in the mailbox', (p) => {
    let ws: Workspace;
    let mailbox: string;
    beforeAll(async () => {
      ws = await createWorkspace(ctx);
      mailbox = (await h.connect(ws, p)).email;
    });
    const sentReply = async (ticketId: string, body: string) => {
      const before = double.sent(p, mailbox).length;
      const { eventId } = await h.reply(ws, ticketId, body);
      await eventually(async () => ((await h.outbound(ws.tenantId, eventId))?.state === 'sent' ? true : undefined), 10_000, 'the reply to be sent');
      const all = double.sent(p, mailbox);
      expect(all).toHaveLength(before + 1);
      return { eventId, sent: all[before]! };
    };

    test(p === 'google'
      ? 'the reply names the polled message\'s Gmail threadId and is filed in the customer\'s thread; the delivery event says which thread'
      : 'the reply goes through the polled message\'s reply endpoint and is filed in its conversation; the delivery event says which conversation', async () => {
      const mail = await h.emailTicket(ws, p, mailbox);
      const thread = double.threadOf(p, mailbox, mail.providerId)!;
      expect(thread).toEqual(expect.any(String));
      const { sent } = await sentReply(mail.ticketId, 'Found it, shipping today.');
      if (p === 'google') {
        expect(sent.threadId).toBe(thread);
      } else {
        expect(sent.repliedTo).toBe(mail.providerId);
        expect(sent.conversationId).toBe(thread);
      }
      expect(sent.headers['in-reply-to']).toBe(`<${mail.messageId}>`);
      const deliveries = await h.deliveries(ws, mail.ticketId);
      expect(deliveries.at(-1)!.meta).toMatchObject({ state: 'sent', provider_thread_id: thread });
    });

    test('the reply answers the customer\'s latest message under the customer\'s own subject, even when the ticket\'s subject differs', async () => {
      const mail = await h.emailTicket(ws, p, mailbox);
      await ctx.db.updateTable('tickets').set({ subject: 'Renamed by the team' }).where('tenant_id', '=', ws.tenantId).where('id', '=', mail.ticketId).execute();
      const followUpId = `${tag()}@mail.customer.test`;
      const followUp = double.deliver(p, mailbox, { from: mail.customer, subject: `Re: ${mail.subject}`, text: 'Any news?', messageId: followUpId, inReplyTo: mail.messageId, references: [mail.messageId] });
      expect(await h.poll(ws.tenantId)).toMatchObject({ ingested: 1 });
      const { sent } = await sentReply(mail.ticketId, 'Still looking.');
      expect(sent.headers.subject).toBe(`Re: ${mail.subject}`);
      expect(sent.headers['in-reply-to']).toBe(`<${followUpId}>`);
      if (p === 'google') expect(sent.threadId).toBe(double.threadOf(p, mailbox, mail.providerId));
      else expect(sent.repliedTo).toBe(followUp);
    });

    test('a ticket whose email was pushed to the ingest route (never polled) is answered by headers alone, as a new message', async () => {
      if (!(await h.row(ws.tenantId))?.inbound_cursor) await h.poll(ws.tenantId);
      const messageId = `${tag()}@mail.customer.test`;
      const res = await ingest(ctx, 'email', emailPayload({ from: `pushed.${tag()}@customer.test`, subject: 'Pushed, not polled', text: 'Hello?', messageId }), ws.tenantId);
      expect(res.status).toBe(200);
      const { sent } = await sentReply(res.body.ticket_id, 'Hello back.');
      expect(sent.headers['in-reply-to']).toBe(`<${messageId}>`);
      if (p === 'google') expect(double.threadOf(p, mailbox, sent.threadId!)).toBe(sent.threadId);
      else expect(sent.repliedTo).toBeUndefined();
    });

    test('when the customer\'s message was deleted from the mailbox after polling, the reply still goes out, threaded by its headers', async () => {
      const mail = await h.emailTicket(ws, p, mailbox);
      double.remove(p, mailbox, mail.providerId);
      const { eventId, sent } = await sentReply(mail.ticketId, 'Replying anyway.');
      expect(sent.headers['in-reply-to']).toBe(`<${mail.messageId}>`);
      if (p === 'microsoft') expect(sent.repliedTo).toBeUndefined();
      expect(await h.outbound(ws.tenantId, eventId)).toMatchObject({ state: 'sent', attempts: 1 });
    });
  });
});

// =========================================================================================================

describe('Connected mailbox, no worker running', () => {
  let ctx: TestContext;
  const h = helpers(() => ctx);
  beforeAll(async () => {
    ctx = await startTestApp({ env: providerEnv({ JOB_WAIT_MS: '300', OUTBOUND_ATTEMPTS: '7' }) });
  });
  afterAll(async () => {
    await ctx.close();
  });

  const waitingJobs = async (queue: 'mailbox' | 'outbound', name: string): Promise<Job[]> => {
    const jobs = await ctx.runtime.queues.queue(queue).getJobs(['waiting', 'active', 'delayed', 'prioritized']);
    return jobs.filter((j): j is Job => j !== undefined && j !== null && j.name === name);
  };
  const forTenant = (jobs: Job[], tenantId: string) => jobs.filter((j) => (j.data as { tenant_id?: string }).tenant_id === tenantId);

  test('the scheduled sweep, run five times at once, leaves exactly one mailbox.refresh job per mailbox that is due; an on-demand refresh joins it', async () => {
    const due = await createWorkspace(ctx);
    const dueToo = await createWorkspace(ctx);
    const fresh = await createWorkspace(ctx);
    await h.connect(due, 'google');
    await h.connect(dueToo, 'microsoft');
    await h.connect(fresh, 'google');
    await ctx.db
      .updateTable('mailboxes')
      .set({ last_checked_at: new Date(Date.now() - 2 * ctx.config.MAILBOX_REFRESH_SECONDS * 1000) })
      .where('tenant_id', 'in', [due.tenantId, dueToo.tenantId])
      .execute();

    await Promise.all(Array.from({ length: 5 }, () => ctx.services.mailbox.sweep()));

    const refreshes = await waitingJobs('mailbox', 'mailbox.refresh');
    expect(forTenant(refreshes, due.tenantId)).toHaveLength(1);
    expect(forTenant(refreshes, dueToo.tenantId)).toHaveLength(1);
    expect(forTenant(refreshes, fresh.tenantId)).toHaveLength(0);
    const polls = await waitingJobs('mailbox', 'mailbox.poll');
    for (const ws of [due, dueToo, fresh]) expect(forTenant(polls, ws.tenantId)).toHaveLength(1);

    // An admin's refresh while the scheduled one waits is the same job, not a second one.
    const res = await h.refresh(due.ownerKey);
    expect(res.status).toBe(200);
    expect(res.body.connected).toBe(true);
    expect(forTenant(await waitingJobs('mailbox', 'mailbox.refresh'), due.tenantId)).toHaveLength(1);
  });

  test.each(PROVIDERS)('%s: with the provider down, an early attempt fails for a retry and the last attempt (OUTBOUND_ATTEMPTS) records the reply as failed; nothing is sent', async (p) => {
    const ws = await createWorkspace(ctx);
    const { email: mailbox } = await h.connect(ws, p);
    const mail = await h.emailTicket(ws, p, mailbox);
    const { eventId } = await h.reply(ws, mail.ticketId, 'This will not get through.');
    const job = await ctx.runtime.queues.queue('outbound').getJob(`send-${eventId}`);
    expect(job?.data).toEqual({ tenant_id: ws.tenantId, event_id: eventId });
    expect(await h.outbound(ws.tenantId, eventId)).toMatchObject({ state: 'queued', attempts: 0 });

    const last = ctx.config.OUTBOUND_ATTEMPTS;
    double.setDown(p, true);
    try {
      await expect(ctx.services.mailbox.send(ws.tenantId, eventId, 1)).rejects.toThrow();
      expect(await h.outbound(ws.tenantId, eventId)).toMatchObject({ state: 'queued', attempts: 1 });
      // The early failure is on the ticket, committed even though the job failed for its retry.
      const early = await h.deliveries(ws, mail.ticketId);
      expect(early).toHaveLength(1);
      expect(early[0]!.meta).toMatchObject({ state: 'retrying', reply_event_id: eventId, attempts: 1 });
      expect(early[0]!.body).toMatch(new RegExp(`Attempt 1 of ${last}; retrying`));

      expect(await ctx.services.mailbox.send(ws.tenantId, eventId, last)).toEqual({ state: 'failed' });
    } finally {
      double.setDown(p, false);
    }
    const row = await h.outbound(ws.tenantId, eventId);
    expect(row).toMatchObject({ state: 'failed', attempts: last, sent_at: null });
    expect(row!.last_error).toEqual(expect.any(String));
    const deliveries = await h.deliveries(ws, mail.ticketId);
    expect(deliveries.map((d) => d.meta.state)).toEqual(['retrying', 'failed']);
    expect(deliveries[1]!.meta).toMatchObject({ state: 'failed', reply_event_id: eventId, attempts: last });
    expect(deliveries[1]!.body).not.toBe('');

    // Once failed it stays failed: a late run with the provider back sends nothing.
    expect(await ctx.services.mailbox.send(ws.tenantId, eventId, last)).toEqual({ state: 'failed' });
    expect(double.sent(p, mailbox)).toEqual([]);
    expect((await h.statusOk(ws)).sent_today).toBe(0);
  });

  test('the OAuth state lives OAUTH_STATE_TTL_SECONDS: ten minutes unless configured', async () => {
    const ws = await createWorkspace(ctx);
    const before = Date.now();
    const { expires_at } = await h.startOk(ws, 'google');
    expect(ctx.config.OAUTH_STATE_TTL_SECONDS).toBe(600);
    expect(new Date(expires_at).getTime()).toBeGreaterThanOrEqual(before + 600_000 - 1000);
    expect(new Date(expires_at).getTime()).toBeLessThanOrEqual(Date.now() + 600_000 + 1000);
  });

  test('the outbound.send job is queued with OUTBOUND_ATTEMPTS attempts, so the last attempt (the one that records a failure) actually runs', async () => {
    const ws = await createWorkspace(ctx);
    const { email: mailbox } = await h.connect(ws, 'google');
    const mail = await h.emailTicket(ws, 'google', mailbox);
    const { eventId } = await h.reply(ws, mail.ticketId, 'Counting attempts.');
    const job = await ctx.runtime.queues.queue('outbound').getJob(`send-${eventId}`);
    expect(ctx.config.OUTBOUND_ATTEMPTS).toBe(7);
    expect(job?.opts.attempts).toBe(ctx.config.OUTBOUND_ATTEMPTS);
  });

  test('a reply on a ticket that did not come by email queues nothing', async () => {
    const ws = await createWorkspace(ctx);
    await h.connect(ws, 'google');
    const t = await createTicket(ctx, ws);
    expect(t.source).not.toBe('email');
    const { eventId, event } = await h.reply(ws, t.id, 'Replying in the app.');
    expect(event.meta).not.toHaveProperty('email_delivery');
    expect(await h.outbound(ws.tenantId, eventId)).toBeUndefined();
    expect(await h.count('outbound_emails', ws.tenantId)).toBe(0);
    expect(await ctx.runtime.queues.queue('outbound').getJob(`send-${eventId}`)).toBeUndefined();
    expect(forTenant(await waitingJobs('outbound', 'outbound.send'), ws.tenantId)).toEqual([]);
  });
});

// =========================================================================================================

describe('Connected mailbox with a daily send limit of 1', () => {
  let ctx: TestContext;
  const h = helpers(() => ctx);
  beforeAll(async () => {
    ctx = await appWithWorkers(providerEnv({ MAILBOX_DAILY_SEND_LIMIT: '1' }));
  });
  afterAll(async () => {
    await ctx.close();
  });

  test.each(PROVIDERS)('%s: the second reply of the day is blocked with a clear email_delivery event and a failing daily_send_quota check', async (p) => {
    const ws = await createWorkspace(ctx);
    const { email: mailbox } = await h.connect(ws, p);
    const mail = await h.emailTicket(ws, p, mailbox);
    const first = await h.reply(ws, mail.ticketId, 'First reply.');
    await eventually(async () => ((await h.outbound(ws.tenantId, first.eventId))?.state === 'sent' ? true : undefined), 10_000, 'the first reply to be sent');

    const second = await h.reply(ws, mail.ticketId, 'Second reply.');
    const row = await eventually(async () => {
      const o = await h.outbound(ws.tenantId, second.eventId);
      return o && o.state !== 'queued' ? o : undefined;
    }, 10_000, 'the second reply to be settled');
    expect(row).toMatchObject({ state: 'blocked', sent_at: null });
    expect(double.sent(p, mailbox)).toHaveLength(1);

    const deliveries = await h.deliveries(ws, mail.ticketId);
    expect(deliveries.map((d) => d.meta.state)).toEqual(['sent', 'blocked']);
    const blocked = deliveries[1]!;
    expect(blocked.meta.reply_event_id).toBe(second.eventId);
    expect(blocked.body).toMatch(/quota/i);

    const s = await h.statusOk(ws);
    expect(s.sent_today).toBe(1);
    const quota = checkOf(s, 'daily_send_quota');
    expect(quota.status).toBe('failing');
    expect(quota.remediation).toMatch(SENTENCE);
  });
});

// =========================================================================================================

describe('A deployment with only Google configured', () => {
  let ctx: TestContext;
  const h = helpers(() => ctx);
  beforeAll(async () => {
    const { MICROSOFT_CLIENT_ID: _id, MICROSOFT_CLIENT_SECRET: _secret, ...rest } = providerEnv();
    ctx = await startTestApp({ env: rest });
  });
  afterAll(async () => {
    await ctx.close();
  });

  test('microsoft start and complete are 409 mail_provider_not_configured; google still starts', async () => {
    const ws = await createWorkspace(ctx);
    const start = await h.start(ws.ownerKey, 'microsoft');
    expect(start.status).toBe(409);
    expect(start.body.code).toBe('mail_provider_not_configured');
    const complete = await h.complete(ws.ownerKey, 'microsoft', { code: 'c', state: 's' });
    expect(complete.status).toBe(409);
    expect(complete.body.code).toBe('mail_provider_not_configured');
    expect(await h.count('oauth_states', ws.tenantId)).toBe(0);
    expect((await h.start(ws.ownerKey, 'google')).status).toBe(200);
  });
});

// =========================================================================================================

describe('A deployment with OAUTH_STATE_TTL_SECONDS=2', () => {
  let ctx: TestContext;
  const h = helpers(() => ctx);
  beforeAll(async () => {
    ctx = await startTestApp({ env: providerEnv({ OAUTH_STATE_TTL_SECONDS: '2' }) });
  });
  afterAll(async () => {
    await ctx.close();
  });

  test('a state completes within its two seconds; one completed after them is 400 oauth_state_invalid and its code is not exchanged', async () => {
    const ws = await createWorkspace(ctx);
    const before = Date.now();
    const early = await h.startOk(ws, 'google');
    expect(new Date(early.expires_at).getTime()).toBeLessThanOrEqual(Date.now() + 2000 + 1000);
    expect(new Date(early.expires_at).getTime()).toBeGreaterThanOrEqual(before + 2000 - 1000);
    const late = await h.startOk(ws, 'microsoft');
    const ok = await h.complete(ws.ownerKey, 'google', { code: h.code('google', `early-${tag()}@acme.test`), state: early.state });
    expect(ok.status).toBe(200);

    await new Promise((r) => setTimeout(r, Math.max(0, new Date(late.expires_at).getTime() - Date.now()) + 100));
    const mark = double.requests.length;
    const res = await h.complete(ws.ownerKey, 'microsoft', { code: h.code('microsoft', `late-${tag()}@acme.test`), state: late.state });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('oauth_state_invalid');
    expect(tokenCalls(mark, 'microsoft')).toEqual([]);
    expect((await h.statusOk(ws)).provider).toBe('google');
  });
});
