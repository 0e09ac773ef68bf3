/**
 * The limits room (issue 35), on its own: the one technique (src/limits/budget.ts) and the intake refund rule
 * every intake follows (src/limits/intake.ts), against the local Redis. The routes' behaviour is in
 * throttles.test.ts, api-limits.test.ts, ingest.test.ts and webhooks-operations.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { DomainError } from '../src/lib/errors';
import { createBudget, retryAfterSeconds } from '../src/limits/budget';
import { createIntakeBudget } from '../src/limits/intake';

let redis: Redis;
beforeAll(() => {
  redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
});
afterAll(() => redis.disconnect());

const intake = (points = 5) => createIntakeBudget({ redis, keyPrefix: `hd-test:limits:${randomUUID()}`, points, windowSeconds: 60, what: 'channel' });
const refusal = (p: Promise<unknown>) => p.then(() => null, (err: unknown) => err as DomainError);

test('retryAfterSeconds is whole seconds, at least 1, from ms or a limiter answer', () => {
  expect(retryAfterSeconds(0)).toBe(1);
  expect(retryAfterSeconds(1001)).toBe(2);
  expect(retryAfterSeconds({ msBeforeNext: 59_000 })).toBe(59);
});

test('a budget takes, says over with the wait, gives back, and reads what was spent', async () => {
  const b = createBudget({ redis, keyPrefix: `hd-test:limits:${randomUUID()}`, points: 2, windowSeconds: 60 });
  expect(await b.take('k')).toEqual({ over: false });
  expect(await b.take('k')).toEqual({ over: false });
  const over = await b.take('k');
  expect(over.over).toBe(true);
  expect(over.over === true && over.msLeft).toBeGreaterThan(0);
  expect(await b.spent('k')).toBe(3);
  await b.giveBack('k', 2);
  expect(await b.spent('k')).toBe(1);
  expect(await b.spent('other')).toBe(0);
});

test('the refund rule: refused items and duplicates go back, written ones stay', async () => {
  const budget = intake(5);
  const charge = await budget.take('w:sms', 3);
  await charge.settle({ accepted: false, results: [{ ok: true, value: { was_duplicate: false } }, { ok: true, value: { was_duplicate: true } }, { ok: false }] });
  // One written: four points left, no more.
  await budget.take('w:sms', 4);
  const err = await refusal(budget.take('w:sms', 1));
  expect(err?.code).toBe('throttled');
  expect(err?.extra.retryAfterSeconds).toBeGreaterThanOrEqual(1);
});

test('an accepted (202) answer keeps its points; refundAll gives every one back; a request refused 429 costs nothing', async () => {
  const budget = intake(3);
  await (await budget.take('k', 2)).settle({ accepted: true });
  expect((await refusal(budget.take('k', 2)))?.code).toBe('throttled');
  const all = await budget.take('k', 1);
  await all.refundAll();
  // The refused request of two and the refunded one left exactly one point.
  await budget.take('k', 1);
  expect((await refusal(budget.take('k', 1)))?.code).toBe('throttled');
});

test('Redis unreachable: an intake budget answers dependency_unavailable', async () => {
  const down = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  try {
    const budget = createIntakeBudget({ redis: down, keyPrefix: 'hd-test:limits:down', points: 5, windowSeconds: 60, what: 'channel' });
    expect((await refusal(budget.take('k', 1)))?.code).toBe('dependency_unavailable');
  } finally {
    down.disconnect();
  }
});
