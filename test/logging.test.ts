import { bearer } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

const requestLines = () => ctx.logs.parsed().filter((l) => l.msg === 'request completed' || l.msg === 'request errored');

test('logs exactly one line per request with request id, operation id, tenant id, status and duration', async () => {
  ctx.logs.clear();
  const res = await ctx.http.get('/v1/members').set(bearer(ws.ownerKey)).set('X-Request-Id', 'req-abc-123');
  expect(res.headers['x-request-id']).toBe('req-abc-123');
  const lines = requestLines();
  expect(lines).toHaveLength(1);
  const line = lines[0]!;
  expect(line.req).toMatchObject({ id: 'req-abc-123', method: 'GET', path: '/v1/members' });
  expect(line.operation_id).toBe('list_members');
  expect(line.tenant_id).toBe(ws.tenantId);
  expect(line.res).toEqual({ status: 200 });
  expect(typeof line.responseTime).toBe('number');
});

test('a refused request is logged with its status and without the credential or any header', async () => {
  ctx.logs.clear();
  await ctx.http.get('/v1/members').set(bearer('sk_zr_not-a-real-key-0000000000000000000')).expect(401);
  const [line] = requestLines();
  expect(line!.res).toEqual({ status: 401 });
  expect(ctx.logs.text).not.toContain('not-a-real-key');
  expect(ctx.logs.text).not.toMatch(/authorization/i);
});

test('a generated request id is returned when none is supplied', async () => {
  const res = await ctx.http.get('/healthz');
  expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
});
