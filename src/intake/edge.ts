import type { RedisClient } from '../queue/connection';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { dependencyUnavailable } from '../lib/errors';
import { consumeOrRefuse } from '../lib/rate';
import { createCoalescer } from '../queue/coalescer';
import { shardOf } from '../queue/jobs';
import type { FairShare } from './fair-share';
import { refusalOf, TIMED_OUT, type ItemResult, type ResultBus } from '../queue/results';

/**
 * What an intake answers once the edge has done its part: the worker's results, or `accepted` when they did
 * not come within the wait (the items are still written exactly once; routes answer 202 then).
 */
export type Submitted = { accepted: true } | { accepted: false; results: ItemResult[] };

/** What an intake route answers: the body, whether it is only accepted (202), and whether it was a redelivery. */
export interface IntakeOutcome {
  body: unknown;
  accepted?: boolean;
  duplicate?: boolean;
}

/** BullMQ takes jobs without a priority before any with one: bulk batches carry this one. */
const BULK_PRIORITY = 10;

/**
 * The HTTP tier's half of an intake (channel ingest, helpdesk webhooks): a budget per key (one point per item
 * it would write; what is not written goes back), the result channel's readiness, and concurrent submissions
 * coalesced into one queued batch whose answers come back on this process's result channel.
 */
export function createIntakeEdge<Item extends { id: string; tenant_id: string }>(deps: {
  redis: RedisClient;
  bus: ResultBus;
  /** The throttle: its Redis key prefix, budget and window, and what the refusal calls the thing throttled. */
  throttle: { keyPrefix: string; points: number; durationSeconds: number; what: string };
  /** Items per queued job, and how long the first waits for company. */
  batch: { max: number; windowMs: number };
  waitMs: number;
  /** Intake queue shards (INTAKE_QUEUE_SHARDS): a batch is queued as one job per workspace shard it holds. */
  shards: number;
  /** The process's lanes per workspace (fair sharing of intake), shared by every intake. */
  fair: FairShare;
  /**
   * Queues one batch: on its shard; a bulk one (a burst's) marked as such in its data, for the worker, and
   * with a priority, so it goes behind live ones.
   */
  send(items: Item[], replyTo: string, opts: { shard: number; priority?: number; bulk: boolean }): Promise<unknown>;
}) {
  const { bus } = deps;
  /** One job per shard the batch touches, each on its shard's queue (one job, shard 0, when unsharded). */
  const sendByShard = async (items: Item[], replyTo: string, bulk: boolean) => {
    // The class travels twice: as the job's priority (Redis orders it) and as `bulk` (the worker writes apart).
    const kind = bulk ? { priority: BULK_PRIORITY, bulk } : { bulk };
    if (deps.shards <= 1) return deps.send(items, replyTo, { shard: 0, ...kind });
    const groups = new Map<number, Item[]>();
    for (const item of items) {
      const shard = shardOf(item.tenant_id, deps.shards);
      const group = groups.get(shard);
      if (group) group.push(item);
      else groups.set(shard, [item]);
    }
    return Promise.all([...groups].map(([shard, group]) => deps.send(group, replyTo, { shard, ...kind })));
  };
  const limiter = new RateLimiterRedis({
    storeClient: deps.redis,
    keyPrefix: deps.throttle.keyPrefix,
    points: deps.throttle.points,
    duration: deps.throttle.durationSeconds,
  });
  // Live and bulk items are batched apart, so a quiet workspace's message never rides in a burst's job.
  const coalesce = (bulk: boolean) =>
    createCoalescer<Item>({ bus, max: deps.batch.max, windowMs: deps.batch.windowMs, waitMs: deps.waitMs, send: (items, replyTo) => sendByShard(items, replyTo, bulk) });
  const live = coalesce(false);
  const bulk = coalesce(true);

  return {
    newId: () => bus.newId(),

    /** Takes `points` from `key`'s budget (429 `throttled` when over it); the returned function gives some back. */
    async charge(key: string, points = 1): Promise<(points: number) => Promise<void>> {
      await consumeOrRefuse(limiter, key, deps.throttle.what, points);
      return async (back: number) => {
        if (back > 0) await limiter.reward(key, back).catch(() => {});
      };
    },

    /**
     * Waits until `n` items of the workspace may be queued (its lane, see fair-share.ts), or refuses 429 when its
     * lane is full. Call before charging the budget; the returned function hands the items back once answered.
     */
    enter: (tenantId: string, n: number) => deps.fair.enter(tenantId, n),

    /** Queues the items (coalesced with other requests' of the same class) and waits for their answers. */
    async submit(items: Item[], o: { bulk: boolean }): Promise<Submitted> {
      await bus.ready().catch(() => {
        throw dependencyUnavailable('Redis');
      });
      const coalescer = o.bulk ? bulk : live;
      const answers = await Promise.all(items.map((item) => coalescer.submit(item)));
      if (answers.some((a) => a === TIMED_OUT)) return { accepted: true };
      return { accepted: false, results: answers as ItemResult[] };
    },

    /** The refusal a worker answered for an item, thrown at the caller. */
    refusalOf,
  };
}

export type IntakeEdge<Item extends { id: string; tenant_id: string }> = ReturnType<typeof createIntakeEdge<Item>>;
