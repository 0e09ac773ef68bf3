import { randomUUID } from 'node:crypto';
import { duplicateRedis, type RedisClient } from './connection';
import { asDependencyError, dependencyUnavailable, DomainError, type ErrorCode } from '../lib/errors';
import type { JobRun } from './jobs';

/**
 * A lean reply channel for enqueue-and-await: each API process subscribes to one pub/sub channel of its own,
 * jobs carry that channel's name, and the worker publishes every result of a batch in one message. This
 * replaces a QueueEvents stream read per awaited job (dozens of Redis commands per request) with one
 * command per batch. The channel is sharded (SSUBSCRIBE/SPUBLISH, Redis 7): on a cluster a message goes to
 * the one node that owns the channel's slot, where classic PUBLISH is broadcast to every node; on a single
 * server the two behave the same.
 */
export interface ItemResult {
  id: string;
  ok: boolean;
  value?: unknown;
  /** A refusal, by its domain code; the HTTP tier gives it its status. */
  error?: { code: ErrorCode; detail: string };
}

export const TIMED_OUT = Symbol('timed out');

export interface ResultBus {
  readonly channel: string;
  newId(): string;
  /** Resolves once this process listens on its channel; call before enqueueing anything that replies. */
  ready(): Promise<void>;
  /** Registers interest synchronously, so a result published right after the enqueue is never missed. */
  expect(id: string, timeoutMs: number): Promise<ItemResult | typeof TIMED_OUT>;
  close(): Promise<void>;
}

export function createResultBus(connection: RedisClient, prefix: string): ResultBus {
  const channel = `${prefix}:results:${randomUUID()}`;
  const waiting = new Map<string, (r: ItemResult) => void>();
  let subscriber: RedisClient | null = null;
  let ready: Promise<void> | null = null;
  let seq = 0;

  const ensureSubscribed = () => {
    if (!ready) {
      subscriber = duplicateRedis(connection, { maxRetriesPerRequest: null, enableOfflineQueue: true });
      subscriber.on('smessage', (_ch: string, raw: string) => {
        for (const r of JSON.parse(raw) as ItemResult[]) {
          const resolve = waiting.get(r.id);
          if (resolve) {
            waiting.delete(r.id);
            resolve(r);
          }
        }
      });
      ready = subscriber.ssubscribe(channel).then(() => undefined);
      ready.catch(() => {
        ready = null;
      });
    }
    return ready;
  };

  return {
    channel,
    newId: () => `${channel.slice(-12)}-${(seq += 1)}`,
    ready: () => ensureSubscribed(),
    expect(id, timeoutMs) {
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          resolve(TIMED_OUT);
        }, timeoutMs);
        waiting.set(id, (r) => {
          clearTimeout(timer);
          resolve(r);
        });
      });
    },
    async close() {
      for (const resolve of waiting.values()) resolve({ id: '', ok: false, error: { code: 'dependency_unavailable', detail: 'shutting down' } });
      waiting.clear();
      const sub = subscriber;
      if (sub) await sub.quit().catch(() => sub.disconnect());
    },
  };
}

export async function publishResults(redis: RedisClient, channel: string, results: ItemResult[]): Promise<void> {
  if (results.length > 0) await redis.spublish(channel, JSON.stringify(results));
}

/**
 * Runs a batch and publishes its answers. When the batch's last attempt fails because PostgreSQL or Redis
 * was lost, its transaction wrote nothing, so every waiting caller is told 503 with Retry-After at once and
 * retries (the ledger makes the retry safe) instead of timing out into a 202 for a job that will not run
 * again by itself. The failed job stays in the queue's failed set for an operator's retry.
 */
export async function answerBatch(
  redis: RedisClient,
  replyTo: string,
  items: { id: string }[],
  try_: JobRun,
  run: () => Promise<ItemResult[]>,
): Promise<{ items: number }> {
  let results: ItemResult[];
  try {
    results = await run();
  } catch (err) {
    const lost = asDependencyError(err);
    if (try_.last && lost) {
      const refusal = { code: lost.code, detail: lost.detail };
      await publishResults(redis, replyTo, items.map((i) => ({ id: i.id, ok: false, error: refusal }))).catch(() => {});
    }
    throw err;
  }
  await publishResults(redis, replyTo, results);
  return { items: results.length };
}

/** The refusal a worker answered for an item, to throw at the caller: its own code; a lost dependency says retry. */
export function refusalOf(result: ItemResult): DomainError {
  const { code, detail } = result.error!;
  return code === 'dependency_unavailable' ? dependencyUnavailable('A backing service') : new DomainError(code, detail);
}
