import type { Redis } from 'ioredis';
import { problemOf } from '../src/http/errors';
import { DomainError } from '../src/lib/errors';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

/** Any well-formed API key: sk_zr_ followed by 43 base62 characters. */
const SOME_API_KEY = `sk_zr_${'A1b2C3d4E5'.repeat(5).slice(0, 43)}`;

const expectRetryAfter = (value: string | undefined) => {
  expect(value).toMatch(/^\d+$/);
  expect(Number(value)).toBeGreaterThan(0);
};

describe('when PostgreSQL and Redis answer', () => {
  const { ctx } = useTestApp();

  test('GET /healthz answers 200 {status: "ok"}', async () => {
    const res = await ctx.http.get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  test('GET /readyz answers 200 with postgres and redis checks ok', async () => {
    const res = await ctx.http.get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body.checks).toEqual({ postgres: 'ok', redis: 'ok' });
  });
});

describe('when PostgreSQL is unreachable', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await startTestApp({
      database: false,
      env: { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', PG_CONNECT_TIMEOUT_MS: '500' },
    });
  });
  afterAll(async () => {
    await ctx.close();
  });

  test('GET /readyz answers 503 dependency_unavailable with an integer Retry-After', async () => {
    const res = await ctx.http.get('/readyz');
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('dependency_unavailable');
    expect(res.body.checks).toEqual({ postgres: 'unreachable', redis: 'ok' });
    expectRetryAfter(res.headers['retry-after']);
  });

  test('an authenticated request answers 503 dependency_unavailable quickly, never 500 or a hang', async () => {
    const started = Date.now();
    const res = await ctx.http.get('/v1/api-keys').set(bearer(SOME_API_KEY)).timeout(5000);
    const elapsed = Date.now() - started;
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('dependency_unavailable');
    expectRetryAfter(res.headers['retry-after']);
    expect(elapsed).toBeLessThan(2500);
  });
});

describe('when Redis is unreachable', () => {
  let ctx: TestContext;
  let closing: Promise<void> | null = null;
  // Every Redis client derived from the runtime's one (the queue hub's and BullMQ's duplicates), so that
  // afterAll can still stop them if closing the runtime hangs (see the last test of this block).
  const derived: Redis[] = [];
  beforeAll(async () => {
    ctx = await startTestApp({ env: { REDIS_URL: 'redis://127.0.0.1:1' } });
    trackDuplicates(ctx.runtime.redis as Redis, derived);
  });
  afterAll(async () => {
    closing ??= ctx.close();
    if (!(await settlesWithin(closing, 5000))) {
      // Containment only: closing hung, so stop the reconnect loops and the pool it never reached.
      for (const client of derived) client.disconnect();
      ctx.runtime.redis.disconnect();
      await ctx.runtime.db.close();
    }
    // ioredis arms a 2 s timer when it disconnects a socket that never connected; let it run out so the
    // jest worker exits on its own instead of being force-exited.
    await new Promise((r) => setTimeout(r, 2100));
  });

  test('GET /readyz answers 503 naming redis unreachable and postgres ok', async () => {
    const res = await ctx.http.get('/readyz');
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('dependency_unavailable');
    expect(res.body.checks).toEqual({ postgres: 'ok', redis: 'unreachable' });
    expectRetryAfter(res.headers['retry-after']);
  });

  test('enqueueAndAwait rejects with a 503 refusal instead of hanging', async () => {
    const attempt = ctx.runtime.queues.enqueueAndAwait('audit.prune', {}, { waitMs: 500 });
    await expect(attempt).rejects.toBeInstanceOf(DomainError);
    await expect(attempt).rejects.toMatchObject({ code: 'dependency_unavailable' });
    expect(problemOf(await attempt.catch((e: unknown) => e))?.status).toBe(503);
  });

  test('after a job could not be enqueued, shutting the runtime down still finishes promptly', async () => {
    closing = ctx.close();
    expect(await settlesWithin(closing, 5000)).toBe(true);
  });
});

/** Records every client duplicated from `client`, transitively. */
function trackDuplicates(client: Redis, into: Redis[]): void {
  const original = client.duplicate.bind(client);
  client.duplicate = ((...args: Parameters<Redis['duplicate']>) => {
    const copy = original(...args);
    into.push(copy);
    trackDuplicates(copy, into);
    return copy;
  }) as Redis['duplicate'];
}

async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = p.then(
    () => true,
    () => true,
  );
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}
