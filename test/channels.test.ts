/**
 * Channel connections: PUT /v1/channels/{channel}, GET /v1/channels and the inbound token (spec: Channel
 * connection resource; Channels and mailbox).
 */
import { sql } from 'kysely';
import { addMember, bearer, createWorkspace, mintKey, type Member } from './helpers/factories';
import { countRows, ingest, REGISTERED_CHANNELS } from './helpers/ingest';
import { smsPayload, webChatPayload } from './helpers/payloads';
import { useTestApp } from './helpers/use-test-app';

let editor: Member;
let viewer: Member;
let admin: Member;

const { ctx, ws } = useTestApp({ workers: true, workspaces: 1 });
beforeAll(async () => {
  [editor, viewer, admin] = await Promise.all([addMember(ctx, ws, 'editor'), addMember(ctx, ws, 'viewer'), addMember(ctx, ws, 'admin')]);
});

const put = (channel: string, body: unknown, token = editor.token) => ctx.http.put(`/v1/channels/${channel}`).set(bearer(token)).send(body as object);
const list = (token = viewer.token) => ctx.http.get('/v1/channels').set(bearer(token));
const rotate = (channel: string, token = admin.token) => ctx.http.post(`/v1/channels/${channel}/inbound-token/rotate`).set(bearer(token));

async function rawRow(tenantId: string, channel: string) {
  return ctx.db.selectFrom('channel_connections').selectAll().where('tenant_id', '=', tenantId).where('channel', '=', channel).executeTakeFirst();
}

type ListItem = { channel: string; connected: boolean; adapter_available: boolean; connection: Record<string, unknown> | null; [k: string]: unknown };
const itemOf = (body: { channels: ListItem[] }, channel: string) => body.channels.find((c) => c.channel === channel)!;

const OAUTH_ROUTE = 'POST /v1/channels/email/oauth/{mailprovider}/complete';
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

const CONNECTION_FIELDS = [
  'channel',
  'display_name',
  'adapter_available',
  'ticket_source',
  'handle_kind',
  'outbound_supported',
  'sendable',
  'sendable_reason',
  'inbound_path',
  'details',
  'connected',
  'enabled',
  'config',
  'created_at',
  'updated_at',
].sort();

describe('PUT /v1/channels/{channel}', () => {
  test('an editor connects a channel: 200 with every Channel connection field, config redacted, token shown once', async () => {
    const w = await createWorkspace(ctx);
    const ed = await addMember(ctx, w, 'editor');
    const res = await put('sms', { display_name: 'Support line', config: { phone_number: '+15550001111', auth_token: 'twilio-secret-1' } }, ed.token);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(CONNECTION_FIELDS);
    expect(res.body).toMatchObject({
      channel: 'sms',
      display_name: 'Support line',
      adapter_available: true,
      ticket_source: 'sms',
      handle_kind: 'phone',
      outbound_supported: true,
      inbound_path: '/v1/ingest/sms',
      connected: true,
      enabled: true,
      config: { phone_number: '+15550001111', auth_token: '***' },
    });
    expect(res.body.created_at).toMatch(ISO);
    expect(res.body.updated_at).toMatch(ISO);
    expect(typeof res.body.details.inbound_token).toBe('string');
    // Unguessable: a long random value, not derived from anything the caller sent.
    expect(res.body.details.inbound_token.length).toBeGreaterThanOrEqual(32);
    expect(res.text).not.toContain('twilio-secret-1');

    const row = await rawRow(w.tenantId, 'sms');
    expect(row).toMatchObject({ display_name: 'Support line', enabled: true, config: { phone_number: '+15550001111' } });
    expect(JSON.stringify(row)).not.toContain('twilio-secret-1');
  });

  test('display_name defaults to the registry name and enabled to true', async () => {
    const w = await createWorkspace(ctx);
    const res = await ctx.http.put('/v1/channels/telegram').set(bearer(w.ownerKey)).send({ config: { bot_username: 'acme_bot' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ display_name: 'Telegram', enabled: true, config: { bot_username: 'acme_bot' } });
  });

  test('a viewer is refused with 403 insufficient_role and nothing is stored', async () => {
    const w = await createWorkspace(ctx);
    const v = await addMember(ctx, w, 'viewer');
    const res = await put('email', { config: { inbound_address: 'help@acme.test' } }, v.token);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect(await rawRow(w.tenantId, 'email')).toBeUndefined();
  });

  test('a key without channels:write is refused; one with it is accepted', async () => {
    const w = await createWorkspace(ctx);
    const readOnly = await mintKey(ctx, w.ownerKey, { scopes: ['channels:read'] });
    const refused = await ctx.http.put('/v1/channels/email').set(bearer(readOnly.secret)).send({ config: {} });
    expect(refused.status).toBe(403);
    expect(await rawRow(w.tenantId, 'email')).toBeUndefined();
    const writer = await mintKey(ctx, w.ownerKey, { scopes: ['channels:write'] });
    expect((await ctx.http.put('/v1/channels/email').set(bearer(writer.secret)).send({ config: {} })).status).toBe(200);
  });

  test('every config value at any depth reads back as ***, except the channel\'s operator descriptors', async () => {
    const w = await createWorkspace(ctx);
    const config = {
      label: 'Main site',
      widget_color: '#00aa88',
      greeting: 'Hi there!',
      allowed_origins: ['https://acme.test', 'https://shop.acme.test'],
      signing_secret: 'wc-signing-secret-9f8e7d',
      retries: 3,
      strict: true,
      nothing: null,
      empty: '',
      nested: { api_key: 'nested-key-123', deeper: { password: 'deep-pass-456', list: ['one', 2, { token_like: 'x' }] } },
      keys: ['key-a-789', 'key-b-012'],
      // A descriptor's name below the top level is not a descriptor.
      webhook: { label: 'inner label', url: 'https://hooks.acme.test/secret-path' },
    };
    const expected = {
      label: 'Main site',
      widget_color: '#00aa88',
      greeting: 'Hi there!',
      allowed_origins: ['https://acme.test', 'https://shop.acme.test'],
      signing_secret: '***',
      retries: '***',
      strict: '***',
      nothing: '***',
      empty: '***',
      nested: { api_key: '***', deeper: { password: '***', list: ['***', '***', { token_like: '***' }] } },
      keys: ['***', '***'],
      webhook: { label: '***', url: '***' },
    };
    const res = await ctx.http.put('/v1/channels/web_chat').set(bearer(w.ownerKey)).send({ config });
    expect(res.status).toBe(200);
    expect(res.body.config).toEqual(expected);

    const listed = await ctx.http.get('/v1/channels').set(bearer(w.ownerKey));
    expect(listed.status).toBe(200);
    expect(itemOf(listed.body, 'web_chat').connection!.config).toEqual(expected);
    for (const secret of ['wc-signing-secret-9f8e7d', 'nested-key-123', 'deep-pass-456', 'key-a-789', 'key-b-012', 'secret-path', 'inner label']) {
      expect(res.text).not.toContain(secret);
      expect(listed.text).not.toContain(secret);
    }
    // Stored as written.
    expect((await rawRow(w.tenantId, 'web_chat'))!.config).toEqual(config);
  });

  test('descriptors are per channel: a key that is a descriptor elsewhere is redacted here', async () => {
    const w = await createWorkspace(ctx);
    // phone_number is an sms descriptor, not an email one; inbound_address is an email descriptor.
    const res = await ctx.http
      .put('/v1/channels/email')
      .set(bearer(w.ownerKey))
      .send({ config: { inbound_address: 'help@acme.test', from_name: 'Acme Help', phone_number: '+15550001111', smtp_password: 'pw-1' } });
    expect(res.body.config).toEqual({ inbound_address: 'help@acme.test', from_name: 'Acme Help', phone_number: '***', smtp_password: '***' });
  });

  test('replace semantics: a second PUT without a key deletes it', async () => {
    const w = await createWorkspace(ctx);
    const first = await ctx.http
      .put('/v1/channels/whatsapp')
      .set(bearer(w.ownerKey))
      .send({ display_name: 'WA one', config: { phone_number_id: '106540352242922', app_secret: 'wa-secret-1', verify_token: 'vt-1' } });
    expect(first.status).toBe(200);
    const second = await ctx.http
      .put('/v1/channels/whatsapp')
      .set(bearer(w.ownerKey))
      .send({ display_name: 'WA two', enabled: false, config: { phone_number_id: '106540352242922', app_secret: 'wa-secret-2' } });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ display_name: 'WA two', enabled: false, config: { phone_number_id: '106540352242922', app_secret: '***' } });
    expect(second.body.config).not.toHaveProperty('verify_token');
    expect(second.body.created_at).toBe(first.body.created_at);
    expect(Date.parse(second.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(first.body.updated_at));

    const row = await rawRow(w.tenantId, 'whatsapp');
    // Credentials are sealed apart from the config (secrets_sealed), and replaced like the rest.
    expect(row!.config).toEqual({ phone_number_id: '106540352242922' });
    expect(await ctx.services.channels.credentials(w.tenantId, 'whatsapp')).toMatchObject({ values: { phone_number_id: '106540352242922', app_secret: 'wa-secret-2' } });
    expect((await ctx.services.channels.credentials(w.tenantId, 'whatsapp'))!.values).not.toHaveProperty('verify_token');
    expect(row).toMatchObject({ display_name: 'WA two', enabled: false });

    // An empty config clears everything.
    await ctx.http.put('/v1/channels/whatsapp').set(bearer(w.ownerKey)).send({ config: {} }).expect(200);
    expect((await rawRow(w.tenantId, 'whatsapp'))!.config).toEqual({});
  });

  test('"***" written back is stored literally, except a credential, which keeps the stored one', async () => {
    const w = await createWorkspace(ctx);
    await ctx.http
      .put('/v1/channels/sms')
      .set(bearer(w.ownerKey))
      .send({ config: { phone_number: '+15550002222', auth_token: 'real-twilio-token', extra: { sid: 'real-sid' } } })
      .expect(200);
    const readBack = itemOf((await ctx.http.get('/v1/channels').set(bearer(w.ownerKey))).body, 'sms').connection!.config as Record<string, unknown>;
    expect(readBack).toEqual({ phone_number: '+15550002222', auth_token: '***', extra: { sid: '***' } });

    const res = await ctx.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send({ config: readBack });
    expect(res.status).toBe(200);
    const row = await rawRow(w.tenantId, 'sms');
    expect(row!.config).toEqual({ phone_number: '+15550002222', extra: { sid: '***' } });
    expect(JSON.stringify(row)).not.toContain('real-twilio-token');
    expect((await ctx.services.channels.credentials(w.tenantId, 'sms'))!.values).toMatchObject({ auth_token: 'real-twilio-token', extra: { sid: '***' } });
  });

  describe('an OAuth token anywhere in config is 400 channel_credential_misplaced, naming the OAuth route, nothing stored', () => {
    const jwt =
      'eyJhbGciOiJSUzI1NiIsImtpZCI6IjFlOWdkazcifQ.eyJpc3MiOiJodHRwczovL2FjY291bnRzLmdvb2dsZS5jb20iLCJzdWIiOiIxMTAxNjk0ODQ0NzQzODYyNzY3MzQiLCJhdWQiOiJhY21lIn0.c2lnbmF0dXJlLWJ5dGVzLWhlcmU';
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['access_token at the top level', { access_token: 'opaque-access-1' }, 'opaque-access-1'],
      ['refresh_token nested', { gmail: { oauth: { refresh_token: 'opaque-refresh-2' } } }, 'opaque-refresh-2'],
      ['id_token inside an array', { accounts: [{ name: 'x' }, { id_token: 'opaque-id-3' }] }, 'opaque-id-3'],
      ['oauth_token nested', { imap: { oauth_token: 'opaque-oauth-4' } }, 'opaque-oauth-4'],
      ['an upper-case, dashed key', { imap: { 'Access-Token': 'opaque-access-5' } }, 'opaque-access-5'],
      ['a token key whose value is not a string', { tokens: { refresh_token: { value: 'opaque-refresh-6' } } }, 'opaque-refresh-6'],
      ['camelCase accessToken (MSAL and many JS clients)', { outlook: { accessToken: 'opaque-access-7' } }, 'opaque-access-7'],
      ['camelCase refreshToken', { refreshToken: 'opaque-refresh-8' }, 'opaque-refresh-8'],
      ['a "Bearer …" value', { smtp: { auth: 'Bearer abcdefghijklmnop0123' } }, 'abcdefghijklmnop0123'],
      ['a lower-case "bearer …" value in an array', { headers: ['x', 'bearer qrstuvwxyz987654'] }, 'qrstuvwxyz987654'],
      ['a JWT value', { imap_password: jwt }, jwt],
      ['a Google access token (ya29.)', { credentials: { password: 'ya29.a0AfH6SMBx3kLqP9zR_TyU7wQe-8vN2mJc' } }, 'ya29.a0AfH6SMBx3kLqP9zR_TyU7wQe-8vN2mJc'],
      ['a Google refresh token (1//)', { secret: '1//0gLxYz8Qw3ErTy5UiOp7AsDfGh9JkLzXcVbNm' }, '1//0gLxYz8Qw3ErTy5UiOp7AsDfGh9JkLzXcVbNm'],
    ];

    test.each(cases)('%s', async (_name, config, secret) => {
      const w = await createWorkspace(ctx);
      const res = await ctx.http.put('/v1/channels/email').set(bearer(w.ownerKey)).send({ config: { inbound_address: 'help@acme.test', ...config } });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('channel_credential_misplaced');
      expect(res.body.detail).toContain(OAUTH_ROUTE);
      expect(res.text).not.toContain(secret);
      expect(await rawRow(w.tenantId, 'email')).toBeUndefined();
    });

    test('refused on any channel, and an existing connection is left exactly as it was', async () => {
      const w = await createWorkspace(ctx);
      const before = await ctx.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send({ config: { phone_number: '+15550003333', auth_token: 'keep-me' } });
      expect(before.status).toBe(200);
      const rowBefore = await rawRow(w.tenantId, 'sms');
      const res = await ctx.http
        .put('/v1/channels/sms')
        .set(bearer(w.ownerKey))
        .send({ enabled: false, config: { phone_number: '+15550003333', oauth: { access_token: 'ya29.sneaky-token-value-123' } } });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('channel_credential_misplaced');
      expect(res.body.detail).toContain(OAUTH_ROUTE);
      expect(await rawRow(w.tenantId, 'sms')).toEqual(rowBefore);
    });

    test('ordinary secrets and look-alikes are not mistaken for OAuth tokens', async () => {
      const w = await createWorkspace(ctx);
      const res = await ctx.http
        .put('/v1/channels/email')
        .set(bearer(w.ownerKey))
        .send({
          config: {
            smtp_password: 'correct horse battery staple',
            api_key: 'sk_live_51Habc',
            token_url: 'https://oauth2.googleapis.com/token',
            note: 'Bearer',
            greeting: 'eyJ is how base64 JSON starts',
            access_token_ttl: 3600,
          },
        });
      expect(res.status).toBe(200);
    });
  });

  test('an unknown channel is 404, nothing stored', async () => {
    const w = await createWorkspace(ctx);
    for (const channel of ['myspace', 'EMAIL', 'web-chat', 'api', 'web']) {
      const res = await ctx.http.put(`/v1/channels/${channel}`).set(bearer(w.ownerKey)).send({ config: {} });
      expect(res.status).toBe(404);
    }
    expect(await ctx.db.selectFrom('channel_connections').selectAll().where('tenant_id', '=', w.tenantId).execute()).toEqual([]);
  });

  test('a channel id that names an Object.prototype member is an unknown channel (404), not a 500', async () => {
    const w = await createWorkspace(ctx);
    for (const channel of ['constructor', 'toString', 'hasOwnProperty', '__proto__']) {
      const secret = `proto-secret-${channel}`;
      const res = await ctx.http.put(`/v1/channels/${channel}`).set(bearer(w.ownerKey)).send({ config: { api_key: secret } });
      // Today: 500, and the database error logged with it quotes the failing row, config secrets included.
      expect({ channel, status: res.status, secretLogged: ctx.logs.text.includes(secret) }).toEqual({ channel, status: 404, secretLogged: false });
    }
    expect(await ctx.db.selectFrom('channel_connections').selectAll().where('tenant_id', '=', w.tenantId).execute()).toEqual([]);
  });

  test('a channel without an adapter (facebook) can hold a connection; adapter_available is false', async () => {
    const w = await createWorkspace(ctx);
    const res = await ctx.http
      .put('/v1/channels/facebook')
      .set(bearer(w.ownerKey))
      .send({ config: { page_id: '1234567890', page_name: 'Acme', app_secret: 'fb-secret' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      channel: 'facebook',
      adapter_available: false,
      connected: true,
      outbound_supported: false,
      inbound_path: '/v1/ingest/facebook',
      config: { page_id: '1234567890', page_name: 'Acme', app_secret: '***' },
    });
    const item = itemOf((await ctx.http.get('/v1/channels').set(bearer(w.ownerKey))).body, 'facebook');
    expect(item).toMatchObject({ adapter_available: false, connected: true });
    expect(item.connection).toMatchObject({ channel: 'facebook', adapter_available: false, config: { app_secret: '***' } });
  });

  test('body validation: config is required and must be an object; unknown fields are refused', async () => {
    const w = await createWorkspace(ctx);
    for (const body of [{}, { config: 'x' }, { config: ['a'] }, { config: {}, secret: 1 }, { config: {}, enabled: 'yes' }]) {
      const res = await ctx.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send(body);
      expect(res.status).toBe(400);
    }
    expect(await rawRow(w.tenantId, 'sms')).toBeUndefined();
  });
});

describe('GET /v1/channels', () => {
  test('returns {channels} with every registered channel, adapter_available, connected flags and connections', async () => {
    const w = await createWorkspace(ctx);
    const v = await addMember(ctx, w, 'viewer');
    const empty = await list(v.token);
    expect(empty.status).toBe(200);
    expect(Object.keys(empty.body)).toEqual(['channels']);
    expect(empty.body.channels.map((c: ListItem) => c.channel)).toEqual([...REGISTERED_CHANNELS]);
    for (const c of empty.body.channels as ListItem[]) {
      expect(c).toMatchObject({ connected: false, connection: null, inbound_path: `/v1/ingest/${c.channel}` });
      expect(c.adapter_available).toBe(['email', 'sms', 'whatsapp', 'telegram', 'web_chat'].includes(c.channel));
    }

    await ctx.http.put('/v1/channels/email').set(bearer(w.ownerKey)).send({ config: { inbound_address: 'help@acme.test', imap_password: 'imap-pw' } }).expect(200);
    await ctx.http.put('/v1/channels/line').set(bearer(w.ownerKey)).send({ enabled: false, config: { channel_id: 'L1', channel_secret: 'line-secret' } }).expect(200);

    const res = await list(v.token);
    expect(res.status).toBe(200);
    expect(res.body.channels).toHaveLength(9);
    const connected = (res.body.channels as ListItem[]).filter((c) => c.connected).map((c) => c.channel);
    expect(connected).toEqual(['email', 'line']);
    const email = itemOf(res.body, 'email');
    expect(Object.keys(email.connection!).sort()).toEqual(CONNECTION_FIELDS);
    expect(email.connection).toMatchObject({ channel: 'email', connected: true, enabled: true, config: { inbound_address: 'help@acme.test', imap_password: '***' } });
    expect(email.connection!.details).toEqual({ inbound_token_set: true });
    expect(itemOf(res.body, 'line')).toMatchObject({ adapter_available: false, connected: true, connection: { enabled: false, config: { channel_id: 'L1', channel_secret: '***' } } });
    expect(res.text).not.toContain('imap-pw');
    expect(res.text).not.toContain('line-secret');
  });

  test('lists only the calling workspace\'s connections', async () => {
    const a = await createWorkspace(ctx);
    const b = await createWorkspace(ctx);
    await ctx.http.put('/v1/channels/viber').set(bearer(a.ownerKey)).send({ config: { bot_name: 'a-bot' } }).expect(200);
    const res = await ctx.http.get('/v1/channels').set(bearer(b.ownerKey));
    expect(itemOf(res.body, 'viber')).toMatchObject({ connected: false, connection: null });
  });

  test('needs a credential', async () => {
    expect((await ctx.http.get('/v1/channels')).status).toBe(401);
  });
});

describe('inbound token', () => {
  test('is in details only on creation: never in GET, never on later PUTs; only its hash is stored', async () => {
    const w = await createWorkspace(ctx);
    const created = await ctx.http.put('/v1/channels/web_chat').set(bearer(w.ownerKey)).send({ config: { greeting: 'Hi' } });
    expect(created.status).toBe(200);
    const token: string = created.body.details.inbound_token;
    expect(token).toEqual(expect.any(String));
    expect(created.body.details.inbound_token_set).toBe(true);

    const again = await ctx.http.put('/v1/channels/web_chat').set(bearer(w.ownerKey)).send({ config: { greeting: 'Hello' } });
    expect(again.status).toBe(200);
    expect(again.body.details).not.toHaveProperty('inbound_token');
    expect(again.text).not.toContain(token);

    const listed = await ctx.http.get('/v1/channels').set(bearer(w.ownerKey));
    expect(itemOf(listed.body, 'web_chat').connection!.details).not.toHaveProperty('inbound_token');
    expect(listed.text).not.toContain(token);

    const row = await rawRow(w.tenantId, 'web_chat');
    expect(Buffer.isBuffer(row!.inbound_token_hash)).toBe(true);
    expect(row!.inbound_token_hash.toString('utf8')).not.toContain(token);
    expect(JSON.stringify(row!.config)).not.toContain(token);

    // The token still works after the later PUT: it was kept, not replaced.
    const res = await ingest(ctx, 'web_chat', webChatPayload({ visitorId: 'v_keep_token' }), { token });
    expect(res.status).toBe(200);
  });

  test('each connection gets its own token', async () => {
    const w = await createWorkspace(ctx);
    const tokens = new Set<string>();
    for (const channel of ['email', 'sms', 'whatsapp', 'telegram', 'web_chat', 'facebook']) {
      const res = await ctx.http.put(`/v1/channels/${channel}`).set(bearer(w.ownerKey)).send({ config: {} });
      tokens.add(res.body.details.inbound_token);
    }
    const other = await createWorkspace(ctx);
    tokens.add((await ctx.http.put('/v1/channels/email').set(bearer(other.ownerKey)).send({ config: {} })).body.details.inbound_token);
    expect(tokens.size).toBe(7);
  });

  test('rotate (admin): a new token; the old one is 404 on ingest at once and the new one works', async () => {
    const w = await createWorkspace(ctx);
    const adm = await addMember(ctx, w, 'admin');
    const ed = await addMember(ctx, w, 'editor');
    const created = await ctx.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send({ config: { phone_number: '+15550004444' } });
    const oldToken: string = created.body.details.inbound_token;
    expect((await ingest(ctx, 'sms', smsPayload({ from: '+15550100001' }), { token: oldToken })).status).toBe(200);

    const refused = await rotate('sms', ed.token);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('insufficient_role');
    expect((await ingest(ctx, 'sms', smsPayload({ from: '+15550100002' }), { token: oldToken })).status).toBe(200);

    const rotated = await rotate('sms', adm.token);
    expect(rotated.status).toBe(200);
    expect(rotated.body).toEqual({ channel: 'sms', inbound_token: expect.any(String) });
    const newToken: string = rotated.body.inbound_token;
    expect(newToken).not.toBe(oldToken);

    const before = await countRows(ctx, w.tenantId);
    const old = await ingest(ctx, 'sms', smsPayload({ from: '+15550100003' }), { token: oldToken });
    expect(old.status).toBe(404);
    expect(await countRows(ctx, w.tenantId)).toEqual(before);

    const fresh = await ingest(ctx, 'sms', smsPayload({ from: '+15550100003' }), { token: newToken });
    expect(fresh.status).toBe(200);
    expect(fresh.body).toMatchObject({ channel: 'sms', was_created: true, was_duplicate: false });
    const ticket = await ctx.db.selectFrom('tickets').select('tenant_id').where('id', '=', fresh.body.ticket_id).executeTakeFirstOrThrow();
    expect(ticket.tenant_id).toBe(w.tenantId);

    // Never shown again afterwards.
    const listed = await ctx.http.get('/v1/channels').set(bearer(w.ownerKey));
    expect(listed.text).not.toContain(newToken);
  });

  test('rotate: an unconnected or unknown channel is 404', async () => {
    const w = await createWorkspace(ctx);
    const adm = await addMember(ctx, w, 'admin');
    expect((await rotate('telegram', adm.token)).status).toBe(404);
    expect((await rotate('myspace', adm.token)).status).toBe(404);
    expect((await rotate('constructor', adm.token)).status).toBe(404);
  });
});

test('config secrets and inbound tokens never appear in any response or log line', async () => {
  const w = await createWorkspace(ctx);
  const adm = await addMember(ctx, w, 'admin');
  const secrets = ['zz-twilio-auth-4f1d', 'zz-nested-pass-77aa', 'zz-array-secret-0c0c'];
  const texts: string[] = [];
  const record = <R extends { text: string }>(r: R): R => {
    texts.push(r.text);
    return r;
  };
  const created = record(
    await ctx.http
      .put('/v1/channels/sms')
      .set(bearer(w.ownerKey))
      .send({ config: { phone_number: '+15550005555', auth_token: secrets[0], relay: { basic_auth: { password: secrets[1] } }, fallbacks: [secrets[2]] } }),
  );
  expect(created.status).toBe(200);
  const tokens: string[] = [created.body.details.inbound_token];
  record(await ctx.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send({ config: { phone_number: '+15550005555', auth_token: secrets[0], relay: { basic_auth: { password: secrets[1] } }, fallbacks: [secrets[2]] } }));
  record(await ctx.http.get('/v1/channels').set(bearer(w.ownerKey)));
  // A refused write carrying the same secrets and an OAuth token.
  record(await ctx.http.put('/v1/channels/sms').set(bearer(w.ownerKey)).send({ config: { auth_token: secrets[0], access_token: secrets[1] } }));
  const rotated = record(await rotate('sms', adm.token));
  tokens.push(rotated.body.inbound_token);
  record(await ingest(ctx, 'sms', smsPayload({ from: '+15550100009' }), { token: tokens[0]! }));
  record(await ingest(ctx, 'sms', smsPayload({ from: '+15550100009' }), { token: tokens[1]! }));

  const logs = ctx.logs.text;
  expect(logs.length).toBeGreaterThan(0);
  for (const s of secrets) {
    for (const t of texts) expect(t).not.toContain(s);
    expect(logs).not.toContain(s);
  }
  // Tokens: shown once in their own response, never in a log line (the query string is not logged).
  for (const t of tokens) expect(logs).not.toContain(t);
});

test('a channel credential is stored sealed, never in clear: not in the config column, not in the sealed column, and it opens only for its own workspace and channel', async () => {
  const w = await createWorkspace(ctx);
  await ctx.http.put('/v1/channels/telegram').set(bearer(w.ownerKey)).send({ config: { bot_username: 'acme_bot', bot_token: '123456:ABC-secret' } }).expect(200);
  const raw = await sql<{ config: Record<string, unknown>; secrets_sealed: string }>`select config, secrets_sealed from channel_connections where tenant_id = ${w.tenantId} and channel = 'telegram'`.execute(ctx.db);
  expect(raw.rows[0]!.config).toEqual({ bot_username: 'acme_bot' });
  expect(raw.rows[0]!.secrets_sealed).toMatch(/^v1\./);
  expect(raw.rows[0]!.secrets_sealed).not.toContain('ABC-secret');
  expect((await ctx.services.channels.credentials(w.tenantId, 'telegram'))!.values).toEqual({ bot_username: 'acme_bot', bot_token: '123456:ABC-secret' });
  // Copied onto another workspace's row, the sealed value does not open.
  const other = await createWorkspace(ctx);
  await ctx.http.put('/v1/channels/telegram').set(bearer(other.ownerKey)).send({ config: { bot_username: 'other_bot' } }).expect(200);
  await sql`update channel_connections set secrets_sealed = ${raw.rows[0]!.secrets_sealed} where tenant_id = ${other.tenantId} and channel = 'telegram'`.execute(ctx.db);
  await expect(ctx.services.channels.credentials(other.tenantId, 'telegram')).rejects.toThrow();
});

test('a connection says whether replies can be sent, and what it lacks when they cannot', async () => {
  const w = await createWorkspace(ctx);
  const put = (channel: string, config: Record<string, unknown>) => ctx.http.put(`/v1/channels/${channel}`).set(bearer(w.ownerKey)).send({ config });
  const sms = await put('sms', { phone_number: '+15550001111' });
  expect(sms.body).toMatchObject({ outbound_supported: true, sendable: false });
  expect(sms.body.sendable_reason).toMatch(/account_sid, auth_token/);
  expect((await put('sms', { phone_number: '+15550001111', account_sid: 'AC1', auth_token: 't' })).body).toMatchObject({ sendable: true, sendable_reason: null });
  expect((await put('sms', { messaging_service_sid: 'MG1', account_sid: 'AC1', auth_token: 't' })).body).toMatchObject({ sendable: true });
  expect((await put('telegram', {})).body.sendable_reason).toMatch(/bot_token/);
  expect((await put('whatsapp', { phone_number_id: '1', api_key: 'k' })).body).toMatchObject({ sendable: true });
  const email = await put('email', { from_address: 'help@acme.test' });
  expect(email.body).toMatchObject({ sendable: false });
  expect(email.body.sendable_reason).toMatch(/server_token.*or connect a mailbox/);
  expect((await put('web_chat', {})).body).toMatchObject({ sendable: true });
  const line = await put('line', { channel_id: 'L1' });
  expect(line.body).toMatchObject({ outbound_supported: false, sendable: false });
  expect(line.body.sendable_reason).toMatch(/No sender exists/);
});
