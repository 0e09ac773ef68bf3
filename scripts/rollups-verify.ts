/**
 * npm run rollups:verify -- --tenant <workspace id> [--repair]
 * Recomputes the workspace's time and satisfaction rollups from raw rows and compares them with the
 * buckets plus the journal not yet folded. Prints one line per difference and a summary; exits 1 when
 * anything differs. --repair then rebuilds the buckets from the raw rows.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfigOrExit } from '../src/config';
import { createDb } from '../src/db';
import * as store from '../src/domains/rollups/store';

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { tenant: { type: 'string' }, repair: { type: 'boolean', default: false } } });
  const tenant = z.uuid().safeParse(values.tenant);
  if (!tenant.success) {
    process.stderr.write('--tenant must be a workspace id (uuid)\n');
    return 2;
  }
  const handle = createDb(loadConfigOrExit());
  try {
    const diff = await store.differences(handle.db, tenant.data);
    for (const d of diff.time) {
      process.stdout.write(
        `time  day ${d.day} user ${d.user_id ?? '-'} team ${d.team_id ?? '-'} worked_on ${d.worked_on ?? '-'} billable ${d.billable}: ` +
          `buckets ${d.folded_entries} entries / ${d.folded_minutes} min, raw ${d.raw_entries} entries / ${d.raw_minutes} min\n`,
      );
    }
    for (const d of diff.csat) {
      process.stdout.write(`csat  day ${d.day} assignee ${d.assignee_id ?? '-'} score ${d.score}: buckets ${d.folded}, raw ${d.raw}\n`);
    }
    for (const d of diff.dims) {
      const unit = d.table === 'csat_dims' ? 'responses' : 'min';
      process.stdout.write(`dims  ${d.table} ${d.grain === 'd' ? 'day' : 'month'} ${d.period} ${d.dim} ${d.key ?? '-'}: stored ${d.stored} ${unit}, expected ${d.expected} ${unit}\n`);
    }
    const count = diff.time.length + diff.csat.length + diff.dims.length;
    if (count === 0) {
      process.stdout.write(`rollups of ${tenant.data}: no differences between buckets and raw rows\n`);
      return 0;
    }
    process.stdout.write(`rollups of ${tenant.data}: ${count} difference(s)\n`);
    if (values.repair) {
      await handle.db.transaction().execute((tx) => store.rebuild(tx, tenant.data));
      process.stdout.write('buckets rebuilt from raw rows\n');
    }
    return 1;
  } finally {
    await handle.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`rollups:verify failed: ${(err as Error).message}\n`);
    process.exit(2);
  },
);
