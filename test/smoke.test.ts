import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace } from './helpers/factories';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

test('a bootstrapped owner key lists its own key', async () => {
  const ws = await createWorkspace(ctx);
  const res = await ctx.http.get('/v1/api-keys').set(bearer(ws.ownerKey));
  expect(res.status).toBe(200);
  expect(res.body.api_keys).toHaveLength(1);
});
