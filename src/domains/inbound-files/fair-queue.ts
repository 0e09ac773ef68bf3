import type { RedisClient } from '../../queue/connection';

/** BullMQ's largest priority (2^21 - 1). */
const MAX_PRIORITY = 2_097_151;
/** A workspace's count forgets itself after this long without a new file job (a lost decrement cannot last). */
const COUNT_TTL_SECONDS = 3600;

/**
 * Fair turns on the `files` queue across workspaces (issue 34). The queue is one FIFO for every workspace, so one
 * that floods 1 MiB files would put every other workspace's files behind its whole backlog. Instead each fetch job
 * is queued with a BullMQ priority equal to its workspace's number of file jobs still waiting or running, counting
 * itself: a workspace's k-th waiting job has priority k. The queue takes the lowest number first, so the workspaces
 * take turns: a quiet workspace's first job (priority 1) goes ahead of a flood's second, third and later ones, as in
 * round-robin, with no lock or scheduler of our own. The count is one Redis key per workspace: raised when a job is
 * queued, lowered when it settles (done, or failed for the last time). A rerun's job (the same job id, which BullMQ
 * adds once) raises it once more than it should; the key's TTL and the floor at zero bound any such drift.
 */
export function createFetchTurns(deps: { redis: RedisClient; prefix: string }) {
  const key = (tenantId: string) => `${deps.prefix}:files:waiting:${tenantId}`;
  return {
    /** The priority for one more of this workspace's file jobs. */
    async take(tenantId: string): Promise<number> {
      const k = key(tenantId);
      const out = await deps.redis.multi().incr(k).expire(k, COUNT_TTL_SECONDS).exec();
      const n = Number(out?.[0]?.[1] ?? 1);
      return Math.min(Math.max(1, n), MAX_PRIORITY);
    },
    /** One of its jobs settled. */
    async settle(tenantId: string): Promise<void> {
      const k = key(tenantId);
      if ((await deps.redis.decr(k)) < 0) await deps.redis.set(k, '0', 'EX', COUNT_TTL_SECONDS);
    },
  };
}

export type FetchTurns = ReturnType<typeof createFetchTurns>;
