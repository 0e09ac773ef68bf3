/**
 * The contract exact for generated clients and their tools (issue 35, item 10): absent timestamps are null,
 * array filters in either query form, nosniff everywhere and no-store on secrets, path enums, the intake
 * answers documented apart, and the provider signature headers. Also the development conveniences: `.env`
 * loaded in development, pretty logs on a terminal.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { buildOperationTable } from '../src/operations';
import { loadDotEnv } from '../src/lib/env-file';
import { prettyLogs } from '../src/lib/logger';
import { startTestApp, type TestContext } from './helpers/context';
import { inlineShared } from './helpers/openapi-doc';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { createTicket, setStatus } from './helpers/tickets';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let ctx: TestContext;
let ws: Workspace;
let doc: Json;

beforeAll(async () => {
  ctx = await startTestApp({ env: { OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true' } });
  ws = await createWorkspace(ctx);
  doc = inlineShared((await ctx.http.get('/v1/openapi.json').expect(200)).body) as Json;
});
afterAll(async () => {
  await ctx?.close();
});

const op = (path: string, method: string): Json => doc.paths[path][method];
const param = (o: Json, name: string, where = 'query'): Json => o.parameters.find((p: Json) => p.name === name && p.in === where);
const ref = (s: Json): Json => (s.$ref ? doc.components.schemas[String(s.$ref).split('/').pop()!] : s);

describe('absent timestamps are null, never ""', () => {
  test('a workspace with no mailbox reads connected_at, healthy_at and last_polled_at as null', async () => {
    const w = await createWorkspace(ctx);
    const res = await ctx.http.get('/v1/channels/email/mailbox').set(bearer(w.ownerKey)).expect(200);
    expect(res.body).toMatchObject({ connected: false, connected_at: null, healthy_at: null, last_polled_at: null });
  });

  test('the document types the three as nullable date-times', () => {
    const status = doc.components.schemas.MailboxStatus as Json;
    for (const field of ['connected_at', 'healthy_at', 'last_polled_at']) {
      const prop = status.properties[field] as Json;
      // zod writes a nullable string as `type: [string, null]` (or as anyOf alternatives): either says the same.
      const types = prop.anyOf ? (prop.anyOf as Json[]).map((a) => a.type) : ([] as unknown[]).concat(prop.type);
      expect(types).toEqual(expect.arrayContaining(['string', 'null']));
      expect(prop.format ?? (prop.anyOf as Json[]).find((a) => a.type === 'string')!.format).toBe('date-time');
      expect(status.required).toContain(field);
    }
  });

  test('every date-time example in the document is a date (null where the field may be absent), never ""', () => {
    // A date-time example that is "" (or any non-date) would be what a validating proxy refuses.
    const bad: string[] = [];
    const walk = (node: unknown, at: string): void => {
      if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${at}[${i}]`));
      if (node === null || typeof node !== 'object') return;
      const s = node as Json;
      if (s.format === 'date-time') for (const e of [...(s.examples ?? []), ...(s.example !== undefined ? [s.example] : [])]) if (e !== null && (typeof e !== 'string' || Number.isNaN(Date.parse(e)))) bad.push(at);
      for (const [k, v] of Object.entries(s)) walk(v, `${at}.${k}`);
    };
    walk(doc.components.schemas, 'components.schemas');
    expect(bad).toEqual([]);
  });
});

describe('array query parameters: repeated keys and comma lists', () => {
  test('GET /v1/tickets?status=a&status=b (openapi-fetch, explode) filters as status=a,b does', async () => {
    const w = await createWorkspace(ctx);
    const open = (await createTicket(ctx, w, { subject: 'open one' })) as { id: string };
    const pending = (await createTicket(ctx, w, { subject: 'pending one' })) as { id: string };
    const solved = (await createTicket(ctx, w, { subject: 'solved one' })) as { id: string };
    await setStatus(ctx, w, pending.id, 'pending');
    await setStatus(ctx, w, solved.id, 'solved');
    const ids = (res: { body: { tickets: { id: string }[] } }) => res.body.tickets.map((t) => t.id).sort();
    const want = [open.id, pending.id].sort();
    const repeated = await ctx.http.get('/v1/tickets?status=open&status=pending').set(bearer(w.ownerKey)).expect(200);
    expect(ids(repeated)).toEqual(want);
    const comma = await ctx.http.get('/v1/tickets?status=open,pending').set(bearer(w.ownerKey)).expect(200);
    expect(ids(comma)).toEqual(want);
    // Both at once, and a duplicate folded.
    const mixed = await ctx.http.get('/v1/tickets?status=open,pending&status=open').set(bearer(w.ownerKey)).expect(200);
    expect(ids(mixed)).toEqual(want);
    // supertest's own serialisation of an array is the repeated key.
    const viaQuery = await ctx.http.get('/v1/tickets').query({ status: ['open', 'pending'] }).set(bearer(w.ownerKey)).expect(200);
    expect(ids(viaQuery)).toEqual(want);
  });

  test('the repeated form meets the comma form\'s limits: a bad value is named, too many values are refused', async () => {
    const bad = await ctx.http.get('/v1/tickets?status=open&status=exploded').set(bearer(ws.ownerKey));
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual([expect.objectContaining({ path: 'query.status', message: expect.stringContaining('value 2') })]);
    const many = Array.from({ length: 101 }, () => `team_id=${crypto.randomUUID()}`).join('&');
    const tooMany = await ctx.http.get(`/v1/tickets?${many}`).set(bearer(ws.ownerKey));
    expect(tooMany.status).toBe(400);
    expect(JSON.stringify(tooMany.body.errors)).toContain('query.team_id');
  });

  test('GET /v1/events?types=a&types=b lists both types, as types=a,b does', async () => {
    const w = await createWorkspace(ctx);
    const t = (await createTicket(ctx, w, { subject: 'evented' })) as { id: string };
    await ctx.http.post(`/v1/tickets/${t.id}/notes`).set(bearer(w.ownerKey)).send({ body: 'a note' }).expect(201);
    await setStatus(ctx, w, t.id, 'pending');
    const types = async (q: string) => ((await ctx.http.get(`/v1/events?${q}`).set(bearer(w.ownerKey)).expect(200)).body.events as { type: string }[]).map((e) => e.type);
    const repeated = await types('types=ticket.created&types=message.created');
    expect(repeated).toEqual(['ticket.created', 'message.created']);
    expect(await types('types=ticket.created,message.created')).toEqual(repeated);
    const bad = await ctx.http.get('/v1/events?types=ticket.created&types=ticket.exploded').set(bearer(w.ownerKey));
    expect(bad.status).toBe(400);
  });

  test('the document declares the repeated form (style form, explode true) and says the comma form is accepted too', () => {
    for (const [path, name] of [['/v1/tickets', 'status'], ['/v1/tickets', 'team_id'], ['/v1/events', 'types']] as const) {
      const p = param(op(path, 'get'), name);
      expect(p).toMatchObject({ style: 'form', explode: true, schema: { type: 'array' } });
      expect(Array.isArray(p.example)).toBe(true);
      expect(p.description).toMatch(new RegExp(`${name}=[^&\`]+&${name}=`));
      expect(p.description).toMatch(/comma-separated/);
    }
  });
});

describe('nosniff on every answer, no-store on answers carrying a secret', () => {
  test('a sample of answers carries X-Content-Type-Options: nosniff: success, refusals, 404, 405, the document, the docs, probes', async () => {
    const answers = await Promise.all([
      ctx.http.get('/v1/customers').set(bearer(ws.ownerKey)),
      ctx.http.get('/v1/customers'),
      ctx.http.get('/v1/no-such-route'),
      ctx.http.delete('/v1/customers'),
      ctx.http.get('/v1/tickets?status=exploded').set(bearer(ws.ownerKey)),
      ctx.http.post('/v1/ingest/no_such_channel').send({}),
      ctx.http.get('/v1/openapi.json'),
      ctx.http.get('/docs'),
      ctx.http.get('/healthz'),
    ]);
    expect(answers.map((a) => a.status)).toEqual([200, 401, 404, 405, 400, 400, 200, 200, 200]);
    for (const a of answers) expect(a.headers['x-content-type-options']).toBe('nosniff');
    // Ordinary answers are not marked no-store.
    expect(answers[0]!.headers['cache-control']).toBeUndefined();
  });

  /** Operations whose answer shows a secret: checked against the table so a new one cannot go unflagged. */
  const SECRET_OPERATIONS = [
    'create_api_key',
    'create_webhook_endpoint',
    'rotate_webhook_endpoint_secret',
    'create_integration',
    'list_integrations',
    'set_integration_signing_secret',
    'rotate_channel_inbound_token',
    'upload_file',
    'upload_web_chat_file',
    'create_web_chat_session',
    'start_mailprovider_oauth',
    // Issue 38: a done export's answer carries its signed download link (a bearer credential for the document).
    'get_customer_export',
  ];

  test('exactly the operations that answer a secret declare secretInAnswer, and the document shows Cache-Control on their answer', () => {
    const table = buildOperationTable();
    expect(table.filter((o) => o.secretInAnswer).map((o) => o.id).sort()).toEqual([...SECRET_OPERATIONS].sort());
    // Any answer field named like a secret or token belongs to one of them.
    const SECRET_FIELD = /(^|_)(secret|token)$/;
    const leaking = (node: unknown, seen = new Set<string>()): boolean => {
      if (Array.isArray(node)) return node.some((n) => leaking(n, seen));
      if (node === null || typeof node !== 'object') return false;
      const s = node as Json;
      if (typeof s.$ref === 'string') {
        const name = String(s.$ref).split('/').pop()!;
        if (seen.has(name)) return false;
        seen.add(name);
        return leaking(doc.components.schemas[name], seen);
      }
      return Object.keys(s.properties ?? {}).some((k) => SECRET_FIELD.test(k)) || Object.values(s).some((v) => leaking(v, seen));
    };
    for (const [path, methods] of Object.entries(doc.paths as Json)) {
      for (const [method, o] of Object.entries(methods as Json)) {
        const [status, success] = Object.entries(o.responses as Json).find(([s]) => s.startsWith('2'))!;
        const flagged = SECRET_OPERATIONS.includes(o.operationId);
        if (leaking(success.content?.['application/json']?.schema)) expect(`${o.operationId} ${flagged}`).toBe(`${o.operationId} true`);
        if (flagged) expect(success.headers?.['Cache-Control']?.schema).toEqual({ type: 'string', enum: ['no-store'] });
        else expect(`${method} ${path} ${status} ${success.headers?.['Cache-Control'] ? 'no-store' : ''}`).toBe(`${method} ${path} ${status} `);
      }
    }
  });

  test('every one of those operations answers with Cache-Control: no-store, refusals included', async () => {
    const table = buildOperationTable().filter((o) => o.secretInAnswer);
    const sample: Record<string, string> = { channel: 'web_chat', mailprovider: 'google' };
    for (const o of table) {
      const path = o.path.replace(/\{([^}]+)\}/g, (_m, name: string) => sample[name] ?? '00000000-0000-4000-8000-000000000000');
      const res = await ctx.http[o.method](path).set('Content-Type', 'application/json').send('{}');
      expect(res.status).toBeGreaterThanOrEqual(200);
      expect(`${o.id} ${res.headers['cache-control']}`).toBe(`${o.id} no-store`);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  test('their successful answers, and the replay of one, carry no-store', async () => {
    const w = await createWorkspace(ctx);
    const key = await ctx.http.post('/v1/api-keys').set(bearer(w.ownerKey)).set('Idempotency-Key', 'k-secret-1').send({ name: 'ci', scopes: ['tickets:read'] });
    expect(key.status).toBe(201);
    expect(key.body.secret).toMatch(/^sk_zr_/);
    expect(key.headers['cache-control']).toBe('no-store');
    const replay = await ctx.http.post('/v1/api-keys').set(bearer(w.ownerKey)).set('Idempotency-Key', 'k-secret-1').send({ name: 'ci', scopes: ['tickets:read'] });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['cache-control']).toBe('no-store');

    const endpoint = await ctx.http.post('/v1/webhook-endpoints').set(bearer(w.ownerKey)).send({ url: 'http://127.0.0.1:9/hook', event_types: ['ticket.created'] });
    expect(endpoint.status).toBe(201);
    expect(endpoint.headers['cache-control']).toBe('no-store');
    const rotated = await ctx.http.post(`/v1/webhook-endpoints/${endpoint.body.id}/rotate-secret`).set(bearer(w.ownerKey)).send({});
    expect(rotated.status).toBe(200);
    expect(rotated.headers['cache-control']).toBe('no-store');

    const integration = await ctx.http.post('/v1/integrations').set(bearer(w.ownerKey)).send({ provider: 'zendesk', name: 'Zendesk' });
    expect(integration.status).toBe(201);
    expect(integration.headers['cache-control']).toBe('no-store');
    const list = await ctx.http.get('/v1/integrations').set(bearer(w.ownerKey)).expect(200);
    expect(list.headers['cache-control']).toBe('no-store');

    const upload = await ctx.http.post('/v1/uploads').set(bearer(w.ownerKey)).attach('file', Buffer.from('hello'), { filename: 'a.txt', contentType: 'text/plain' });
    expect(upload.status).toBe(201);
    expect(upload.body.upload_token).toBeDefined();
    expect(upload.headers['cache-control']).toBe('no-store');
  });
});

describe('path enums, intake answers and provider signature headers in the document', () => {
  test('channel, provider and mailprovider list their known values; an unknown value is still 404', async () => {
    const enumOf = (path: string, method: string, name: string) => param(op(path, method), name, 'path').schema.enum as string[];
    expect(enumOf('/v1/ingest/{channel}', 'post', 'channel')).toEqual(['email', 'sms', 'whatsapp', 'telegram', 'web_chat']);
    expect(enumOf('/v1/hooks/{channel}/{inbound_token}', 'post', 'channel')).toEqual(['sms', 'whatsapp', 'telegram', 'email']);
    expect(enumOf('/v1/hooks/{channel}/{inbound_token}', 'get', 'channel')).toEqual(['sms', 'whatsapp', 'telegram', 'email']);
    expect(enumOf('/v1/webhooks/{provider}/{integration_id}', 'post', 'provider')).toEqual(['zendesk', 'front', 'helpscout']);
    expect(enumOf('/v1/channels/email/oauth/{mailprovider}/complete', 'post', 'mailprovider')).toEqual(['google', 'microsoft']);

    expect((await ctx.http.post('/v1/ingest/pigeon').send({ tenant_id: ws.tenantId, payload: {} })).status).toBe(404);
    expect((await ctx.http.post(`/v1/webhooks/pigeon/${crypto.randomUUID()}`).set('Content-Type', 'application/json').send('{}')).status).toBe(404);
    expect((await ctx.http.post('/v1/channels/email/oauth/pigeon/complete').set(bearer(ws.ownerKey)).send({ code: 'c', state: 's' })).status).toBe(404);
  });

  test('POST /v1/ingest/{channel}: 200 is oneOf the written and the ignored result, 202 the queued one', () => {
    const responses = op('/v1/ingest/{channel}', 'post').responses as Json;
    const ok = responses['200'].content['application/json'].schema as Json;
    expect(ok.oneOf).toEqual([{ $ref: '#/components/schemas/IngestIgnored' }, { $ref: '#/components/schemas/IngestResult' }]);
    expect(responses['202'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/IngestQueued' });
    expect(ref(ok.oneOf[1]).required).toEqual(expect.arrayContaining(['channel', 'ticket_id', 'customer_id', 'was_created', 'was_duplicate']));
    expect(ref({ $ref: '#/components/schemas/IngestQueued' }).required).toEqual(expect.arrayContaining(['status', 'channel', 'job_id', 'provider_message_ids']));
    expect(ref({ $ref: '#/components/schemas/IngestIgnored' }).properties.ignored).toMatchObject({ const: true });
  });

  test('the provider signature headers are header parameters of their operations; Postmark\'s basic authentication a security option', () => {
    const headers = (o: Json) => (o.parameters as Json[]).filter((p) => p.in === 'header').map((p) => p.name);
    const hook = op('/v1/hooks/{channel}/{inbound_token}', 'post');
    expect(headers(hook)).toEqual(expect.arrayContaining(['X-Twilio-Signature', 'X-Hub-Signature-256', 'X-Telegram-Bot-Api-Secret-Token']));
    expect(hook.security).toEqual([{}, { providerBasic: [] }]);
    expect(doc.components.securitySchemes.providerBasic).toMatchObject({ type: 'http', scheme: 'basic' });
    expect(headers(op('/v1/webhooks/{provider}/{integration_id}', 'post'))).toEqual(
      expect.arrayContaining(['X-Zendesk-Webhook-Signature', 'X-Zendesk-Webhook-Signature-Timestamp', 'X-Front-Signature', 'X-Front-Request-Timestamp', 'X-HelpScout-Signature']),
    );
    expect(op('/v1/ingest/{channel}', 'post').security).toEqual([]);
  });
});

describe('.env in development', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dotenv-'));
    await writeFile(join(dir, '.env'), '# a comment\nLOG_LEVEL=debug\nPORT=9191\nQUOTED="a b"\n');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('a value in .env reaches the environment; a variable already set wins', () => {
    const env: NodeJS.ProcessEnv = { PORT: '8080' };
    expect(loadDotEnv({ dir, env })).toBe(join(dir, '.env'));
    expect(env).toEqual({ PORT: '8080', LOG_LEVEL: 'debug', QUOTED: 'a b' });
    const dev: NodeJS.ProcessEnv = { NODE_ENV: 'development' };
    loadDotEnv({ dir, env: dev });
    expect(dev.LOG_LEVEL).toBe('debug');
  });

  test('nothing is read under NODE_ENV test or production, or without a file', () => {
    for (const mode of ['test', 'production']) {
      const env: NodeJS.ProcessEnv = { NODE_ENV: mode };
      expect(loadDotEnv({ dir, env })).toBeNull();
      expect(env).toEqual({ NODE_ENV: mode });
    }
    const env: NodeJS.ProcessEnv = {};
    expect(loadDotEnv({ dir: tmpdir(), env })).toBeNull();
  });

  test('a spawned process started in that directory sees the value, as the server and workers do', async () => {
    const script = join(dir, 'probe.ts');
    await writeFile(script, `import { loadDotEnv } from ${JSON.stringify(resolve(__dirname, '../src/lib/env-file'))};\nloadDotEnv();\nprocess.stdout.write(JSON.stringify({ level: process.env.LOG_LEVEL ?? null, port: process.env.PORT ?? null }));\n`);
    const env = { ...process.env };
    delete env.NODE_ENV;
    delete env.LOG_LEVEL;
    delete env.PORT;
    const tsx = resolve(__dirname, '../node_modules/.bin/tsx');
    const { stdout } = await promisify(execFile)(tsx, [script], { cwd: dir, env, timeout: 30_000 });
    expect(JSON.parse(stdout)).toEqual({ level: 'debug', port: '9191' });
  }, 40_000);
});

describe('pretty logs on a terminal', () => {
  test('pretty when stdout is a terminal outside production; JSON when piped or in production; an override wins', () => {
    expect(prettyLogs({ isTTY: true }, 'development')).toBe(true);
    expect(prettyLogs({ isTTY: true }, undefined)).toBe(true);
    expect(prettyLogs({ isTTY: true }, 'test')).toBe(true);
    expect(prettyLogs({ isTTY: true }, 'production')).toBe(false);
    expect(prettyLogs({ isTTY: false }, 'development')).toBe(false);
    expect(prettyLogs({}, 'development')).toBe(false);
    expect(prettyLogs({ isTTY: true }, 'development', false)).toBe(false);
    expect(prettyLogs({ isTTY: false }, 'production', true)).toBe(true);
  });
});
