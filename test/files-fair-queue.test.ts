/**
 * Files of one workspace never queue every other workspace's files behind them (issue 34): each `files.fetch` job
 * takes its workspace's next turn as its BullMQ priority (src/domains/inbound-files/fair-queue.ts), so a quiet
 * workspace's first file goes ahead of a flooding workspace's backlog, and a turn is given back when its job
 * settles, so a workspace that stops flooding is first in line again.
 */
import { newId as uuidv7 } from '../src/lib/ids';
import type { JobData } from '../src/queue/jobs';
import { eventually } from './helpers/wait';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp();

/** A fetch job for a message that does not exist (its files then have nowhere to go, and the job ends at once). */
const job = (tenantId: string): JobData<'files.fetch'> => ({
  tenant_id: tenantId,
  ticket_id: uuidv7(),
  event_id: uuidv7(),
  channel: 'telegram',
  files: [{ name: 'photo.jpg', source: { kind: 'telegram', fileId: 'AgAD' }, skip: { reason: 'listed only' } }],
});

const queued = async () => {
  const jobs = await ctx.runtime.queues.queue('files').getJobs(['prioritized', 'waiting'], 0, 1000);
  return jobs.filter((j) => j.name === 'files.fetch').map((j) => ({ tenant: (j.data as JobData<'files.fetch'>).tenant_id, priority: j.opts.priority ?? 0 }));
};

test('a quiet workspace\'s file job is queued ahead of a flooding workspace\'s backlog, and turns come back as jobs settle', async () => {
  const flood = uuidv7();
  const quiet = uuidv7();
  await ctx.workerServices.inboundFiles.queueFetch(Array.from({ length: 12 }, () => job(flood)));
  await ctx.workerServices.inboundFiles.queueFetch([job(quiet)]);

  const jobs = await queued();
  const floodPriorities = jobs.filter((j) => j.tenant === flood).map((j) => j.priority).sort((a, b) => a - b);
  expect(floodPriorities).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
  expect(jobs.filter((j) => j.tenant === quiet).map((j) => j.priority)).toEqual([1]);
  // The order the queue hands jobs out in (lowest priority number first): the quiet workspace's job is among the
  // first two, not the 13th.
  const order = [...jobs].sort((a, b) => a.priority - b.priority);
  expect(order.slice(0, 2).map((j) => j.tenant)).toContain(quiet);

  // The workers take them all; each settles and gives its turn back, so the flood's next job is first in line again.
  const workers = await ctx.startWorkers();
  try {
    await eventually(async () => ((await queued()).length === 0 ? true : undefined), 20_000, 'the file jobs to run');
    await eventually(async () => (Number((await ctx.runtime.redis.get(`${ctx.config.REDIS_PREFIX}:files:waiting:${flood}`)) ?? 0) === 0 ? true : undefined), 10_000, 'the turns to be given back');
  } finally {
    await workers.close();
  }
  await ctx.workerServices.inboundFiles.queueFetch([job(flood)]);
  expect((await queued()).map((j) => j.priority)).toEqual([1]);
});
