/**
 * A coalesced intake batch answers callers who are still waiting: its results on success, and 503 with
 * Retry-After when its last attempt lost PostgreSQL or Redis (nothing was written), so they retry instead of
 * being told 202 for a job that will not run again by itself.
 */
import IORedis from 'ioredis';
import { jobOptions, runOf } from '../src/queue/jobs';
import { toProblem } from '../src/http/errors';
import { answerBatch, refusalOf, type ItemResult } from '../src/queue/results';

const lostBackend = () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
const jobAt = (attemptsMade: number, attempts: number) => runOf({ attemptsMade, opts: { attempts } });

describe('answerBatch', () => {
  let pub: IORedis;
  let sub: IORedis;
  const channel = `answer-batch-test-${process.pid}-${Date.now()}`;
  const received: ItemResult[][] = [];
  beforeAll(async () => {
    pub = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    sub = pub.duplicate();
    sub.on('smessage', (_c: string, raw: string) => received.push(JSON.parse(raw) as ItemResult[]));
    await sub.ssubscribe(channel);
  });
  afterAll(async () => {
    await sub.quit();
    await pub.quit();
  });
  beforeEach(() => {
    received.length = 0;
  });
  const settle = () => new Promise((r) => setTimeout(r, 100));

  test('on the last attempt, a lost PostgreSQL backend answers every item 503 and the job still fails (kept for retry)', async () => {
    await expect(answerBatch(pub, channel, [{ id: 'a' }, { id: 'b' }], jobAt(11, 12), () => Promise.reject(lostBackend()))).rejects.toThrow(/administrator command/);
    await settle();
    expect(received).toEqual([[expect.objectContaining({ id: 'a', ok: false, error: expect.objectContaining({ code: 'dependency_unavailable' }) }), expect.objectContaining({ id: 'b', ok: false })]]);
    const refusal = toProblem(refusalOf(received[0]![0]!));
    expect(refusal.status).toBe(503);
    expect(refusal.extra.headers?.['Retry-After']).toMatch(/^\d+$/);
  });

  test('with attempts left, a lost backend answers nobody: the retry will', async () => {
    await expect(answerBatch(pub, channel, [{ id: 'a' }], jobAt(3, 12), () => Promise.reject(lostBackend()))).rejects.toThrow();
    await settle();
    expect(received).toEqual([]);
  });

  test('a bug (not a lost dependency) on the last attempt publishes nothing it cannot vouch for', async () => {
    await expect(answerBatch(pub, channel, [{ id: 'a' }], jobAt(11, 12), () => Promise.reject(new TypeError('boom')))).rejects.toThrow('boom');
    await settle();
    expect(received).toEqual([]);
  });

  test('a batch that succeeds publishes its results in one message', async () => {
    const results: ItemResult[] = [{ id: 'a', ok: true, value: { n: 1 } }, { id: 'b', ok: true, value: { n: 2 } }];
    await expect(answerBatch(pub, channel, [{ id: 'a' }, { id: 'b' }], jobAt(0, 12), async () => results)).resolves.toEqual({ items: 2 });
    await settle();
    expect(received).toEqual([results]);
  });

  test('intake batches retry for minutes, not seconds, before giving a 202 caller up', () => {
    for (const name of ['ingest.batch', 'webhooks.batch'] as const) {
      const opts = jobOptions(name);
      const delay = (opts.backoff as { delay: number }).delay;
      const totalMs = Array.from({ length: opts.attempts! - 1 }, (_, i) => delay * 2 ** i).reduce((a, b) => a + b, 0);
      expect(totalMs).toBeGreaterThan(5 * 60_000);
    }
  });

  test('finished intake batches stay briefly visible on the dashboard, bounded, because they hold message bodies', () => {
    for (const name of ['ingest.batch', 'webhooks.batch'] as const) {
      expect(jobOptions(name).removeOnComplete).toEqual({ age: 300, count: 500 });
    }
  });
});
