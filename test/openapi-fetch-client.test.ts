/**
 * A typed openapi-fetch client built from the served document (issue 35, item 10): openapi-typescript generates
 * the types, the client below type-checks against them, and then runs against the real app. Its array filters
 * go on the wire as openapi-fetch serialises them by default, the repeated key (`status=open&status=pending`,
 * OpenAPI's `style: form, explode: true`), and the service answers them as the comma form.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { startTestApp, type TestContext } from './helpers/context';
import { typeCheckClient } from './helpers/typecheck-client';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';

const run = promisify(execFile);
let ctx: TestContext;
let ws: Workspace;
let dir: string;
let api = '';

beforeAll(async () => {
  ctx = await startTestApp();
  ws = await createWorkspace(ctx);
  dir = await mkdtemp(join(tmpdir(), 'openapi-fetch-'));
  const doc = await ctx.http.get('/v1/openapi.json').expect(200);
  await writeFile(join(dir, 'openapi.json'), JSON.stringify(doc.body));
  // openapi-typescript is an ES module: generated in a process of its own, from this project's node_modules.
  const generate = `import { readFile, writeFile } from 'node:fs/promises';
import openapiTS, { astToString } from 'openapi-typescript';
const ast = await openapiTS(JSON.parse(await readFile(process.argv[1], 'utf8')));
await writeFile(process.argv[2], astToString(ast));`;
  await run(process.execPath, ['--input-type=module', '-e', generate, join(dir, 'openapi.json'), join(dir, 'api.ts')], { cwd: resolve(__dirname, '..'), timeout: 50_000 });
  api = (await import('node:fs')).readFileSync(join(dir, 'api.ts'), 'utf8');
}, 60_000);

afterAll(async () => {
  await ctx?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/**
 * The client, as an integrator writes it: typed by the generated `paths`, no hand-written types. It returns what
 * it saw, and every URL it sent, so the test can check the wire form.
 */
const CLIENT = `
import createClient from 'openapi-fetch';
import type { components, paths } from './api';

type TicketSummary = components['schemas']['TicketSummary'];

export async function scenario(baseUrl: string, secret: string) {
  const sent: string[] = [];
  const client = createClient<paths>({
    baseUrl,
    headers: { Authorization: \`Bearer \${secret}\` },
    fetch: (request: Request) => {
      sent.push(request.url);
      return fetch(request);
    },
  });
  const created: string[] = [];
  for (const subject of ['Invoice charged twice', 'Login fails', 'Export is empty']) {
    const r = await client.POST('/v1/tickets', { body: { subject, description: 'Please help.', customer_email: 'maya@fischer.example' } });
    if (r.error) throw new Error(\`create: \${r.error.status} \${r.error.code}\`);
    created.push(r.data.id);
  }
  const [open, pending, solved] = created as [string, string, string];
  for (const [id, status] of [[pending, 'pending'], [solved, 'solved']] as const) {
    const r = await client.PATCH('/v1/tickets/{ticket_id}', { params: { path: { ticket_id: id } }, body: { status } });
    if (r.error) throw new Error(\`patch: \${r.error.status} \${r.error.code}\`);
  }
  // Every page of the open or pending tickets, one per page, following next_cursor.
  const listed: TicketSummary[] = [];
  let after: string | undefined;
  do {
    const page = await client.GET('/v1/tickets', { params: { query: { status: ['open', 'pending'], sort: 'created_at', limit: 1, after } } });
    if (page.error) throw new Error(\`list: \${page.error.status} \${page.error.code} \${page.error.detail ?? ''}\`);
    listed.push(...page.data.tickets);
    after = page.data.next_cursor ?? undefined;
  } while (after);
  const high = await client.GET('/v1/tickets', { params: { query: { priority: ['urgent', 'high'], status: ['solved'] } } });
  if (high.error) throw new Error(\`list: \${high.error.status} \${high.error.code}\`);
  const events = await client.GET('/v1/events', { params: { query: { types: ['ticket.created', 'ticket.status_changed'] } } });
  if (events.error) throw new Error(\`events: \${events.error.status} \${events.error.code} \${events.error.detail ?? ''}\`);
  // A refusal comes back typed as the Problem.
  const refused = await client.GET('/v1/tickets', { params: { query: { status: ['open'], limit: 0 } } });
  return {
    created: { open, pending, solved },
    listed: listed.map((t) => ({ id: t.id, status: t.status })),
    solvedHigh: high.data.tickets.length,
    events: events.data.events.length,
    refused: refused.error ? { status: refused.response.status, code: refused.error.code } : null,
    sent,
  };
}
`;

test('the generated types name the schemas, and the client type-checks against them (strict)', async () => {
  expect(api).toMatch(/\bTicketSummary: \{/);
  const diagnostics = await typeCheckClient(dir, CLIENT, {
    // openapi-fetch from this project's node_modules, as a consumer's would be.
    baseUrl: resolve(__dirname, '..'),
    paths: { 'openapi-fetch': ['node_modules/openapi-fetch'] },
  });
  expect(diagnostics).toEqual([]);
}, 30_000);

test('the typed client runs against the real app: array filters go as repeated keys and filter as documented', async () => {
  // The same source, run: transpiled to CommonJS, its imports resolved from this project.
  const { outputText } = ts.transpileModule(CLIENT, { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 } });
  const mod = { exports: {} as { scenario: (baseUrl: string, secret: string) => Promise<Record<string, any>> } }; // eslint-disable-line @typescript-eslint/no-explicit-any
  new Function('require', 'module', 'exports', outputText)(require, mod, mod.exports);
  const { port } = ctx.server.address() as AddressInfo;
  const result = await mod.exports.scenario(`http://127.0.0.1:${port}`, ws.ownerKey);

  const list = result.sent.filter((u: string) => new URL(u).pathname === '/v1/tickets' && u.includes('?'));
  expect(list[0]).toMatch(/[?&]status=open&status=pending(&|$)/);
  expect(result.sent.find((u: string) => u.includes('/v1/events?'))).toMatch(/types=ticket\.created&types=ticket\.status_changed/);
  // One ticket a page, the open one and the pending one, the solved one left out.
  expect(result.listed).toEqual([
    { id: result.created.open, status: 'open' },
    { id: result.created.pending, status: 'pending' },
  ]);
  expect(result.solvedHigh).toBe(0);
  expect(result.refused).toEqual({ status: 400, code: 'validation_failed' });
  // The comma form means the same.
  const comma = await ctx.http.get('/v1/tickets?status=open,pending&sort=created_at').set(bearer(ws.ownerKey)).expect(200);
  expect(comma.body.tickets.map((t: { id: string }) => t.id)).toEqual([result.created.open, result.created.pending]);
}, 30_000);
