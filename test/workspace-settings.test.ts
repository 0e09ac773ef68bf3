import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { createSealer } from '../src/lib/crypto';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp();

const PROVIDERS = ['openai', 'anthropic', 'google', 'azure_openai', 'mistral', 'cohere'] as const;
const allUnset = Object.fromEntries(PROVIDERS.map((p) => [p, false]));

const getMe = (ws: Workspace) => ctx.http.get('/v1/tenants/me').set(bearer(ws.ownerKey));
const patchMe = (ws: Workspace, body: unknown) => ctx.http.patch('/v1/tenants/me').set(bearer(ws.ownerKey)).send(body as object);

const rawTenant = async (tenantId: string) =>
  (
    await sql<{ name: string; daily_usd_cap: string | null; monthly_usd_cap: string | null; onboarding: Record<string, unknown>; default_model: string | null }>`
      select name, daily_usd_cap, monthly_usd_cap, onboarding, default_model from tenants where id = ${tenantId}`.execute(ctx.db)
  ).rows[0]!;

const rawKeys = async (tenantId: string) =>
  (await sql<{ provider: string; key_sealed: string }>`select provider, key_sealed from tenant_provider_keys where tenant_id = ${tenantId} order by provider`.execute(ctx.db)).rows;

const secret = (label: string) => `sk-${label}-${randomBytes(16).toString('hex')}`;

describe('GET /v1/tenants/me', () => {
  test('a viewer reads every field of a fresh workspace with its defaults', async () => {
    const ws = await createWorkspace(ctx, 'Fresh Workspace');
    const viewer = await addMember(ctx, ws, 'viewer');
    const res = await ctx.http.get('/v1/tenants/me').set(bearer(viewer.token));
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(
      ['created_at', 'daily_usd_cap', 'default_embedding_model', 'default_model', 'deployment_mode', 'id', 'monthly_usd_cap', 'name', 'onboarding', 'provider_keys_set', 'region', 'retention_days', 'time_zone', 'updated_at'],
    );
    expect(res.body).toMatchObject({
      id: ws.tenantId,
      name: 'Fresh Workspace',
      region: 'us',
      default_model: null,
      default_embedding_model: null,
      daily_usd_cap: null,
      monthly_usd_cap: null,
      deployment_mode: 'shared',
      time_zone: 'UTC',
      retention_days: null,
      onboarding: {},
      provider_keys_set: allUnset,
    });
    expect(new Date(res.body.created_at).toISOString()).toBe(res.body.created_at);
    expect(new Date(res.body.updated_at).toISOString()).toBe(res.body.updated_at);
  });

  test('reads the caller\'s own workspace only', async () => {
    const a = await createWorkspace(ctx);
    const b = await createWorkspace(ctx);
    await patchMe(a, { name: 'Only A' }).expect(200);
    expect((await getMe(b)).body.id).toBe(b.tenantId);
    expect((await getMe(b)).body.name).not.toBe('Only A');
  });

  test('a key without tenants:read gets 403; with it, 200', async () => {
    const ws = await createWorkspace(ctx);
    const wrong = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:read'] });
    const res = await ctx.http.get('/v1/tenants/me').set(bearer(wrong.secret));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_scope');
    const right = await mintKey(ctx, ws.ownerKey, { scopes: ['tenants:read'] });
    expect((await ctx.http.get('/v1/tenants/me').set(bearer(right.secret))).status).toBe(200);
  });
});

describe('PATCH /v1/tenants/me: access', () => {
  test('an editor gets 403 insufficient_role and nothing changes', async () => {
    const ws = await createWorkspace(ctx, 'Unchanged');
    const editor = await addMember(ctx, ws, 'editor');
    const res = await ctx.http.patch('/v1/tenants/me').set(bearer(editor.token)).send({ name: 'Editor was here' });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect((await getMe(ws)).body.name).toBe('Unchanged');
  });

  test('an admin may; a key needs tenants:write (tenants:read alone is 403 insufficient_scope)', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    const res = await ctx.http.patch('/v1/tenants/me').set(bearer(admin.token)).send({ name: 'By admin' });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe('By admin');
    const reader = await mintKey(ctx, ws.ownerKey, { scopes: ['tenants:read'] });
    const denied = await ctx.http.patch('/v1/tenants/me').set(bearer(reader.secret)).send({ name: 'By reader' });
    expect(denied.status).toBe(403);
    expect(denied.body.code).toBe('insufficient_scope');
    const writer = await mintKey(ctx, ws.ownerKey, { scopes: ['tenants:write'] });
    expect((await ctx.http.patch('/v1/tenants/me').set(bearer(writer.secret)).send({ name: 'By writer' })).status).toBe(200);
    expect((await getMe(ws)).body.name).toBe('By writer');
  });
});

describe('PATCH /v1/tenants/me: each field', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
  });

  test.each([
    ['name', 'Renamed Co'],
    ['name', 'x'.repeat(120)],
    ['region', 'eu'],
    ['region', 'ap'],
    ['region', 'us'],
    ['default_model', 'gpt-4o-mini'],
    ['default_model', 'm'.repeat(200)],
    ['default_embedding_model', 'text-embedding-3-small'],
    ['deployment_mode', 'dedicated'],
    ['deployment_mode', 'self_hosted'],
    ['deployment_mode', 'shared'],
    ['time_zone', 'Europe/Berlin'],
    ['time_zone', 'UTC'],
  ])('%s = %p is written, returned and read back', async (field, value) => {
    const res = await patchMe(ws, { [field]: value });
    expect(res.status).toBe(200);
    expect(res.body[field]).toBe(value);
    expect((await getMe(ws)).body[field]).toBe(value);
  });

  test('the response is the whole workspace as it now stands, and updated_at moves', async () => {
    const before = (await getMe(ws)).body;
    await new Promise((r) => setTimeout(r, 5));
    const res = await patchMe(ws, { default_embedding_model: 'embed-v9' });
    expect(res.body).toEqual({ ...before, default_embedding_model: 'embed-v9', updated_at: res.body.updated_at });
    expect(Date.parse(res.body.updated_at)).toBeGreaterThan(Date.parse(before.updated_at));
  });

  test.each([
    ['empty body', {}],
    ['unknown field', { name: 'Should not stick', bogus: 1 }],
    ['name empty', { name: '' }],
    ['name blank', { name: '   ' }],
    ['name 121 chars', { name: 'y'.repeat(121) }],
    ['name not a string', { name: 42 }],
    ['region xx', { region: 'xx' }],
    ['region null', { region: null }],
    ['deployment_mode unknown', { deployment_mode: 'cloud' }],
    ['default_model empty', { default_model: '' }],
    ['default_model 201 chars', { default_model: 'm'.repeat(201) }],
    ['default_embedding_model 201 chars', { default_embedding_model: 'e'.repeat(201) }],
    ['onboarding not an object', { onboarding: ['step'] }],
    ['onboarding a string', { onboarding: 'done' }],
    ['unknown provider', { provider_keys: { openrouter: 'sk-x' } }],
    ['provider key not a string', { provider_keys: { openai: 123 } }],
    ['provider_keys not an object', { provider_keys: 'sk-x' }],
  ])('%s → 400 validation_failed and nothing changes', async (_label, body) => {
    const before = (await getMe(ws)).body;
    const res = await patchMe(ws, body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect((await getMe(ws)).body).toEqual(before);
  });
});

describe('PATCH /v1/tenants/me: caps', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
  });
  beforeEach(async () => {
    await patchMe(ws, { daily_usd_cap: null, monthly_usd_cap: null }).expect(200);
  });

  // JSON has no 1e3 literal distinct from 1000: as a number it is 1000, as a string "1e3" is not a decimal.
  test.each([
    [10, 10],
    [10.5, 10.5],
    ['10.50', 10.5],
    ['7', 7],
    [0, 0],
    ['0.01', 0.01],
    [1e3, 1000],
    [999_999_999_999.99, 999_999_999_999.99],
  ])('monthly_usd_cap %p is accepted and reads back as %p (stored exactly)', async (value, expected) => {
    const res = await patchMe(ws, { monthly_usd_cap: value });
    expect(res.status).toBe(200);
    expect(res.body.monthly_usd_cap).toBe(expected);
    expect((await getMe(ws)).body.monthly_usd_cap).toBe(expected);
    expect(Number((await rawTenant(ws.tenantId)).monthly_usd_cap)).toBe(expected);
  });

  test.each([-1, '-1', 1.234, '1.234', 'abc', '1e3', '', ' 5', true, {}, [], 1e21, 1_000_000_000_000])(
    'a cap of %p is refused with 400 and nothing is stored',
    async (value) => {
      await patchMe(ws, { daily_usd_cap: 3, monthly_usd_cap: 4 }).expect(200);
      for (const field of ['daily_usd_cap', 'monthly_usd_cap']) {
        const res = await patchMe(ws, { [field]: value });
        expect(res.status).toBe(400);
        expect(res.body.code).toBe('validation_failed');
      }
      const now = (await getMe(ws)).body;
      expect([now.daily_usd_cap, now.monthly_usd_cap]).toEqual([3, 4]);
    },
  );

  test('daily_usd_cap is written like monthly; null clears either cap', async () => {
    expect((await patchMe(ws, { daily_usd_cap: '2.25', monthly_usd_cap: 50 })).body).toMatchObject({ daily_usd_cap: 2.25, monthly_usd_cap: 50 });
    const cleared = await patchMe(ws, { daily_usd_cap: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ daily_usd_cap: null, monthly_usd_cap: 50 });
    expect((await patchMe(ws, { monthly_usd_cap: null })).body.monthly_usd_cap).toBeNull();
    expect(await rawTenant(ws.tenantId)).toMatchObject({ daily_usd_cap: null, monthly_usd_cap: null });
  });

  test('daily equal to monthly is allowed; one cap without the other is allowed', async () => {
    expect((await patchMe(ws, { daily_usd_cap: 500 })).status).toBe(200);
    expect((await patchMe(ws, { monthly_usd_cap: 500 })).status).toBe(200);
  });

  test('daily > monthly in one PATCH → 422 cap_order, nothing stored', async () => {
    const res = await patchMe(ws, { daily_usd_cap: 20, monthly_usd_cap: 10 });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('cap_order');
    expect((await getMe(ws)).body).toMatchObject({ daily_usd_cap: null, monthly_usd_cap: null });
  });

  test('daily above the stored monthly, or monthly below the stored daily → 422 cap_order', async () => {
    await patchMe(ws, { daily_usd_cap: 5, monthly_usd_cap: 10 }).expect(200);
    const up = await patchMe(ws, { daily_usd_cap: '10.01' });
    expect(up.status).toBe(422);
    expect(up.body.code).toBe('cap_order');
    const down = await patchMe(ws, { monthly_usd_cap: 4.99 });
    expect(down.status).toBe(422);
    expect(down.body.code).toBe('cap_order');
    expect((await getMe(ws)).body).toMatchObject({ daily_usd_cap: 5, monthly_usd_cap: 10 });
  });

  test('a refused cap_order PATCH stores none of the other settings it carried, and audits nothing', async () => {
    await patchMe(ws, { name: 'Before', onboarding: { kept: 1 }, monthly_usd_cap: 10 }).expect(200);
    const before = (await getMe(ws)).body;
    const auditBefore = (await ctx.http.get('/v1/audit-log?limit=500').set(bearer(ws.ownerKey))).body.audit_entries.length;
    const res = await patchMe(ws, {
      name: 'After',
      region: 'eu',
      default_model: 'never-stored',
      deployment_mode: 'dedicated',
      onboarding: { added: true, kept: null },
      provider_keys: { openai: secret('refused') },
      daily_usd_cap: 20,
    });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('cap_order');
    expect((await getMe(ws)).body).toEqual(before);
    expect(await rawKeys(ws.tenantId)).toEqual([]);
    expect((await ctx.http.get('/v1/audit-log?limit=500').set(bearer(ws.ownerKey))).body.audit_entries).toHaveLength(auditBefore);
  });
});

describe('PATCH /v1/tenants/me: onboarding and provider keys', () => {
  test('onboarding is merged: existing keys kept, sent keys set, a key sent as null removed', async () => {
    const ws = await createWorkspace(ctx);
    expect((await patchMe(ws, { onboarding: { a: 1, b: { nested: true }, c: 'x' } })).body.onboarding).toEqual({ a: 1, b: { nested: true }, c: 'x' });
    const res = await patchMe(ws, { onboarding: { a: 2, c: null, d: [1, 2], missing: null } });
    expect(res.status).toBe(200);
    expect(res.body.onboarding).toEqual({ a: 2, b: { nested: true }, d: [1, 2] });
    expect((await getMe(ws)).body.onboarding).toEqual({ a: 2, b: { nested: true }, d: [1, 2] });
    expect((await patchMe(ws, { onboarding: {} })).body.onboarding).toEqual({ a: 2, b: { nested: true }, d: [1, 2] });
  });

  test('a non-empty provider key sets provider_keys_set; "" deletes it; others untouched; never returned', async () => {
    const ws = await createWorkspace(ctx);
    const openai = secret('openai');
    const cohere = secret('cohere');
    const res = await patchMe(ws, { provider_keys: { openai, cohere } });
    expect(res.status).toBe(200);
    expect(res.body.provider_keys_set).toEqual({ ...allUnset, openai: true, cohere: true });
    expect(res.body).not.toHaveProperty('provider_keys');
    expect(JSON.stringify(res.body)).not.toContain(openai);
    expect(JSON.stringify(res.body)).not.toContain(cohere);
    expect((await getMe(ws)).body.provider_keys_set).toEqual({ ...allUnset, openai: true, cohere: true });

    const del = await patchMe(ws, { provider_keys: { openai: '' } });
    expect(del.status).toBe(200);
    expect(del.body.provider_keys_set).toEqual({ ...allUnset, cohere: true });
    expect((await rawKeys(ws.tenantId)).map((r) => r.provider)).toEqual(['cohere']);
    // deleting a key that is not set is fine and changes nothing
    expect((await patchMe(ws, { provider_keys: { mistral: '' } })).body.provider_keys_set).toEqual({ ...allUnset, cohere: true });
  });

  test('every one of the six providers can be set', async () => {
    const ws = await createWorkspace(ctx);
    const body = Object.fromEntries(PROVIDERS.map((p) => [p, secret(p)]));
    const res = await patchMe(ws, { provider_keys: body });
    expect(res.body.provider_keys_set).toEqual(Object.fromEntries(PROVIDERS.map((p) => [p, true])));
    for (const p of PROVIDERS) expect(JSON.stringify(res.body)).not.toContain(body[p]);
  });

  test('replacing a provider key re-seals the new value', async () => {
    const ws = await createWorkspace(ctx);
    await patchMe(ws, { provider_keys: { anthropic: 'sk-ant-first' } }).expect(200);
    await patchMe(ws, { provider_keys: { anthropic: 'sk-ant-second' } }).expect(200);
    const [row] = await rawKeys(ws.tenantId);
    expect(createSealer(ctx.config.ENCRYPTION_KEYS).open(row!.key_sealed, `provider_key:${ws.tenantId}:anthropic`)).toBe('sk-ant-second');
  });
});

describe('each setting is written on its own (concurrency)', () => {
  test('two concurrent PATCHes of different settings both persist, round after round', async () => {
    const ws = await createWorkspace(ctx);
    for (let n = 0; n < 40; n++) {
      const [a, b] = await Promise.all([
        patchMe(ws, { name: `Round ${n}` }),
        patchMe(ws, { default_model: `model-${n}`, onboarding: { round: n }, provider_keys: n % 2 ? { google: `g-${n}` } : { google: '' } }),
      ]);
      expect([a.status, b.status]).toEqual([200, 200]);
      const now = (await getMe(ws)).body;
      expect({ name: now.name, default_model: now.default_model, round: now.onboarding.round, google: now.provider_keys_set.google }).toEqual({
        name: `Round ${n}`,
        default_model: `model-${n}`,
        round: n,
        google: n % 2 === 1,
      });
    }
  });

  test('two concurrent onboarding merges of different keys both persist', async () => {
    const ws = await createWorkspace(ctx);
    for (let n = 0; n < 40; n++) {
      await Promise.all([patchMe(ws, { onboarding: { a: n } }).expect(200), patchMe(ws, { onboarding: { b: n } }).expect(200)]);
      expect((await rawTenant(ws.tenantId)).onboarding).toEqual({ a: n, b: n });
    }
  });

  test('concurrent daily and monthly cap changes can never leave daily > monthly; exactly the refused one gets 422', async () => {
    const ws = await createWorkspace(ctx);
    const outcomes = { daily: 0, monthly: 0 };
    for (let n = 0; n < 40; n++) {
      await patchMe(ws, { daily_usd_cap: 5, monthly_usd_cap: 10 }).expect(200);
      const [d, m] = await Promise.all([patchMe(ws, { daily_usd_cap: 8 }), patchMe(ws, { monthly_usd_cap: 6 })]);
      const row = await rawTenant(ws.tenantId);
      const daily = Number(row.daily_usd_cap);
      const monthly = Number(row.monthly_usd_cap);
      expect(daily).toBeLessThanOrEqual(monthly);
      expect([d.status, m.status].sort()).toEqual([200, 422]);
      const refused = d.status === 422 ? d : m;
      expect(refused.body.code).toBe('cap_order');
      if (d.status === 200) {
        outcomes.daily++;
        expect([daily, monthly]).toEqual([8, 10]);
        expect(d.body).toMatchObject({ daily_usd_cap: 8, monthly_usd_cap: 10 });
      } else {
        outcomes.monthly++;
        expect([daily, monthly]).toEqual([5, 6]);
        expect(m.body).toMatchObject({ daily_usd_cap: 5, monthly_usd_cap: 6 });
      }
    }
    expect(outcomes.daily + outcomes.monthly).toBe(40);
  });
});

describe('provider keys are encrypted at rest', () => {
  test('the raw column holds no plaintext, has the v1.<key id>. form and opens under provider_key:<tenant>:<provider>', async () => {
    const ws = await createWorkspace(ctx);
    const keys = { openai: secret('raw-openai'), mistral: secret('raw-mistral') };
    await patchMe(ws, { provider_keys: keys }).expect(200);
    const rows = await rawKeys(ws.tenantId);
    expect(rows.map((r) => r.provider)).toEqual(['mistral', 'openai']);
    const sealer = createSealer(ctx.config.ENCRYPTION_KEYS);
    const currentId = ctx.config.ENCRYPTION_KEYS[ctx.config.ENCRYPTION_KEYS.length - 1]!.id;
    const dump = JSON.stringify(
      (await sql`select * from tenant_provider_keys where tenant_id = ${ws.tenantId}`.execute(ctx.db)).rows,
    );
    for (const row of rows) {
      const plain = keys[row.provider as keyof typeof keys];
      const body = plain.slice(3); // the random part without the sk- prefix
      for (const form of [plain, body, Buffer.from(plain).toString('base64'), Buffer.from(plain).toString('base64url'), Buffer.from(plain).toString('hex'), Buffer.from(body).toString('hex')]) {
        expect(row.key_sealed).not.toContain(form);
        expect(dump).not.toContain(form);
      }
      expect(row.key_sealed.startsWith(`v1.${currentId}.`)).toBe(true);
      expect(row.key_sealed).toMatch(/^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
      expect(sealer.open(row.key_sealed, `provider_key:${ws.tenantId}:${row.provider}`)).toBe(plain);
      // bound to workspace and provider: copied elsewhere it does not open
      const other = row.provider === 'openai' ? 'mistral' : 'openai';
      expect(() => sealer.open(row.key_sealed, `provider_key:${ws.tenantId}:${other}`)).toThrow();
      expect(() => sealer.open(row.key_sealed, `provider_key:00000000-0000-0000-0000-000000000000:${row.provider}`)).toThrow();
    }
  });

  test('rotation: a value sealed with [k1] opens with [k1, k2]; new values are sealed with k2', () => {
    const k1 = { id: 'k1', key: randomBytes(32) };
    const k2 = { id: 'k2', key: randomBytes(32) };
    const context = 'provider_key:t:openai';
    const old = createSealer([k1]).seal('sk-before-rotation', context);
    const rotated = createSealer([k1, k2]);
    expect(rotated.open(old, context)).toBe('sk-before-rotation');
    expect(rotated.isStale(old)).toBe(true);
    const fresh = rotated.seal('sk-after-rotation', context);
    expect(fresh.startsWith('v1.k2.')).toBe(true);
    expect(() => createSealer([k2]).open(old, context)).toThrow();
  });
});

describe('a provider key never leaks', () => {
  test('not in any response body or header, any log line, nor the audit log, which names the settings changed', async () => {
    const ws = await createWorkspace(ctx);
    const plain = secret('leakcheck');
    const seen: string[] = [];
    const record = <R extends { status: number; text: string; headers: object }>(res: R): R => {
      seen.push(res.text, JSON.stringify(res.headers));
      return res;
    };
    ctx.logs.clear();

    const ok = record(await patchMe(ws, { name: 'Leak Co', provider_keys: { azure_openai: plain } }));
    expect(ok.status).toBe(200);
    record(await getMe(ws));
    // refused requests carrying the key: validation error (another field bad), validation error of the key itself, cap_order
    expect(record(await patchMe(ws, { region: 'xx', provider_keys: { openai: plain } })).status).toBe(400);
    expect(record(await patchMe(ws, { provider_keys: { openai: plain, nope: plain } })).status).toBe(400);
    expect(record(await patchMe(ws, { provider_keys: { openai: `${plain}${'x'.repeat(4096)}` } })).status).toBe(400);
    expect(record(await patchMe(ws, { daily_usd_cap: 2, monthly_usd_cap: 1, provider_keys: { openai: plain } })).status).toBe(422);
    const editor = await addMember(ctx, ws, 'editor');
    expect(record(await ctx.http.patch('/v1/tenants/me').set(bearer(editor.token)).send({ provider_keys: { openai: plain } })).status).toBe(403);
    const audit = record(await ctx.http.get('/v1/audit-log?limit=500').set(bearer(ws.ownerKey)));

    for (const text of [...seen, ctx.logs.text]) {
      expect(text).not.toContain(plain);
      expect(text).not.toContain(plain.slice(3));
    }
    expect(ctx.logs.lines.length).toBeGreaterThanOrEqual(8);

    const entries = audit.body.audit_entries.filter((e: { action: string; target_id: string }) => e.action === 'tenant.updated' && e.target_id === ws.tenantId);
    expect(entries).toHaveLength(1);
    expect(entries[0].details.settings).toEqual(expect.arrayContaining(['name']));
    expect(entries[0].details.provider_keys).toEqual({ azure_openai: 'set' });
    expect(entries[0].actor_api_key_id).toBe(ws.ownerKeyId);

    await patchMe(ws, { provider_keys: { azure_openai: '' } }).expect(200);
    const after = (await ctx.http.get('/v1/audit-log?limit=500').set(bearer(ws.ownerKey))).body.audit_entries.filter(
      (e: { action: string; target_id: string }) => e.action === 'tenant.updated' && e.target_id === ws.tenantId,
    );
    expect(after.map((e: { details: { provider_keys: unknown } }) => e.details.provider_keys)).toEqual(
      expect.arrayContaining([{ azure_openai: 'deleted' }, { azure_openai: 'set' }]),
    );
  });
});
