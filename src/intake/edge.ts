import type { RedisClient } from '../queue/connection';
import { dependencyUnavailable } from '../lib/errors';
import { createIntakeBudget, type IntakeCharge } from '../limits/intake';
import { createCoalescer } from '../queue/coalescer';
import { shardOf } from '../queue/jobs';
import { jobClass, type Lanes } from './priority';
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

/**
 * The HTTP tier's half of an intake (channel ingest, helpdesk webhooks): a budget per key (one point per item
 * it would write; what is not written goes back, by src/limits/intake.ts's rule), the result channel's
 * readiness, and concurrent submissions coalesced into one queued batch whose answers come back on this
 * process's result channel.
 */
export function createIntakeEdge<Item extends { id: string; tenant_id: string }>(deps: {
  redis: RedisClient;
  bus: ResultBus;
  /** The budget (src/limits/intake.ts): its Redis key prefix, points and window, and what its 429 calls the thing throttled. */
  budget: { keyPrefix: string; points: number; windowSeconds: number; what: string };
  /** Items per queued job, and how long the first waits for company. */
  batch: { max: number; windowMs: number };
  waitMs: number;
  /** Intake queue shards (INTAKE_QUEUE_SHARDS): a batch is queued as one job per workspace shard it holds. */
  shards: number;
  /** The process's lanes per workspace (fair sharing of intake, priority/lanes.ts), shared by every intake. */
  lanes: Lanes;
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
    const kind = jobClass(bulk);
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
  const budget = createIntakeBudget({ redis: deps.redis, ...deps.budget });
  // Live and bulk items are batched apart, so a quiet workspace's message never rides in a burst's job.
  const coalesce = (bulk: boolean) =>
    createCoalescer<Item>({ bus, max: deps.batch.max, windowMs: deps.batch.windowMs, waitMs: deps.waitMs, send: (items, replyTo) => sendByShard(items, replyTo, bulk) });
  const live = coalesce(false);
  const bulk = coalesce(true);

  return {
    newId: () => bus.newId(),

    /**
     * Takes `points` from `key`'s budget (429 `throttled` when over it); the returned charge gives back what was
     * not written, by the one refund rule (src/limits/intake.ts).
     */
    charge: (key: string, points = 1): Promise<IntakeCharge> => budget.take(key, points),

    /**
     * Waits until `n` items of the workspace may be queued (its lane, priority/lanes.ts), or refuses 429 when its
     * lane is full. Call before charging the budget; the returned function hands the items back once answered.
     */
    enter: (tenantId: string, n: number) => deps.lanes.enter(tenantId, n),

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
