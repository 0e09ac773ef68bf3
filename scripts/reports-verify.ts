/**
 * npm run reports:verify -- --tenant <workspace id> [--repair] [--limit N]
 * Recomputes every report of the workspace from raw rows (tickets, their events, time entries) for every local day
 * and filter key, and compares it with the precomputed days plus the journal not yet folded, cell by cell. Prints
 * one line per difference and a summary; exits 1 when anything differs. It also measures the business minutes of
 * tickets on a scheduled policy on today's schedules: a difference there is a schedule changed since the fact was
 * recorded (printed, not a failure). --repair rebuilds the workspace's report state and days from raw rows
 * (business minutes measured again on today's schedules).
 */
import { parseArgs } from 'node:util';
import pino from 'pino';
import { z } from 'zod';
import { loadConfigOrExit } from '../src/config';
import { createDb } from '../src/db';
import { createReportService } from '../src/domains/reports/service';
import { verifyWorkspace } from '../src/domains/reports/verify';
import type { QueueHub } from '../src/queue/hub';

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { tenant: { type: 'string' }, repair: { type: 'boolean', default: false }, limit: { type: 'string', default: '1000' } } });
  const tenant = z.uuid().safeParse(values.tenant);
  const limit = z.coerce.number().int().min(1).max(1_000_000).safeParse(values.limit);
  if (!tenant.success || !limit.success) {
    process.stderr.write('--tenant must be a workspace id (uuid); --limit a whole number of differences to print\n');
    return 2;
  }
  const handle = createDb(loadConfigOrExit());
  try {
    const { differences, remeasured } = await verifyWorkspace(handle.db, tenant.data, limit.data);
    for (const d of differences) {
      process.stdout.write(
        `${d.grain === 'd' ? 'day' : 'month'} ${d.period} team ${d.team} agent ${d.agent} channel ${d.channel} priority ${d.priority}: ${d.column} stored ${d.stored ?? '-'}, raw ${d.expected ?? '-'}\n`,
      );
    }
    for (const r of remeasured) {
      process.stdout.write(`business minutes of ticket ${r.ticket_id} (${r.fact}): recorded ${r.recorded ?? '-'}, on today's schedule ${r.now}\n`);
    }
    if (differences.length === 0) {
      process.stdout.write(`reports of ${tenant.data}: no differences between the precomputed days and raw rows${remeasured.length ? `; ${remeasured.length} business measurement(s) predate a schedule change` : ''}\n`);
      return 0;
    }
    process.stdout.write(`reports of ${tenant.data}: ${differences.length}${differences.length === limit.data ? '+' : ''} difference(s)\n`);
    if (values.repair) {
      // No queue: the repair folds nothing later, it rebuilds now.
      const queues = { enqueue: async () => undefined } as unknown as QueueHub;
      const reports = createReportService({ db: handle.db, queues, logger: pino({ level: 'warn' }) });
      const rebuilt = await reports.rebuildAll(tenant.data);
      process.stdout.write(`report state and days rebuilt from raw rows (${rebuilt.rows} day rows, zone ${rebuilt.zone})\n`);
    }
    return 1;
  } finally {
    await handle.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`reports:verify failed: ${(err as Error).message}\n`);
    process.exit(2);
  },
);
