/**
 * The connected mailbox (issue 6; spec: Mailbox status, get_mailbox, refresh_mailbox,
 * complete_mailprovider_oauth): status, OAuth start and completion, state rules, provider errors, refresh.
 * Polling, replies and what the workers did: mailbox-flows.test.ts; other deployments: mailbox-deployments.test.ts.
 * Google and Microsoft are the provider double (test/helpers/mail-provider-double.ts) over real HTTP on loopback.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { createSealer } from '../src/lib/crypto';
import { addMember, bearer, createWorkspace, mintKey } from './helpers/factories';
import { CHECK_NAMES, DISCONNECTED, GRANTED, ISO, PROVIDERS, READ_SCOPE, REDIRECT, SEALED, SEND_SCOPE, SENTENCE, STATUS_FIELDS, WITHOUT_SEND, checkOf, stateHash, tag, tokenCalls, tokenWorksAtProvider, type MailboxStatus, useMailProviderDouble, useMailboxApp } from './helpers/mailbox';

const double = useMailProviderDouble();

describe('Connected mailbox, workers running', () => {
  const { ctx, h } = useMailboxApp();

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
        last_polled_at: null,
        sent_today: 0,
      });
      expect(s.scopes).toEqual(GRANTED[p]);
      expect(s.connected_at).toMatch(ISO);
      expect(new Date(s.connected_at!).getTime()).toBeGreaterThanOrEqual(before - 1000);
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

});
