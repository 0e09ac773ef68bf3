/**
 * npm run jobs -- retry-failed --queue <name>     moves every failed job of the queue back to waiting
 * npm run jobs -- counts                          prints each queue's job counts as JSON
 * The shell twin of the dashboard's retry action, for operators without a browser at hand.
 */
import { parseArgs } from 'node:util';
import { Queue } from 'bullmq';
import { loadConfigOrExit } from '../src/config';
import { createRedis, queuePrefix } from '../src/queue/connection';
import { queueNames, type QueueName } from '../src/queue/jobs';

async function main(): Promise<number> {
  const { positionals, values } = parseArgs({ allowPositionals: true, options: { queue: { type: 'string' } } });
  const command = positionals[0];
  const config = loadConfigOrExit();
  const connection = createRedis(config, 'http');
  const names = queueNames(config.INTAKE_QUEUE_SHARDS);
  try {
    if (command === 'counts') {
      const out: Record<string, unknown> = {};
      for (const name of names) {
        const q = new Queue(name, { connection, prefix: queuePrefix(config, name) });
        out[name] = await q.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed');
        await q.close();
      }
      process.stdout.write(`${JSON.stringify(out)}\n`);
      return 0;
    }
    if (command === 'retry-failed') {
      const name = values.queue as QueueName | undefined;
      if (!name || !names.includes(name)) {
        process.stderr.write(`--queue must be one of ${names.join(', ')}\n`);
        return 2;
      }
      const q = new Queue(name, { connection, prefix: queuePrefix(config, name) });
      const failed = await q.getJobCountByTypes('failed');
      await q.retryJobs({ state: 'failed', count: 1000 });
      await q.close();
      process.stdout.write(`${failed} failed job(s) of ${name} moved back to waiting\n`);
      return 0;
    }
    process.stderr.write('usage: npm run jobs -- retry-failed --queue <name> | counts\n');
    return 2;
  } finally {
    await connection.quit().catch(() => connection.disconnect());
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`jobs failed: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
