import { loadConfigOrExit } from '../src/config';
import { applyDatabaseDefaults, createDb, migrateToLatest } from '../src/db';
import { ensureDatabase } from '../src/db/admin';
import { loadDotEnv } from '../src/lib/env-file';

async function main() {
  // .env in development, before the configuration is read (src/lib/env-file.ts).
  loadDotEnv();
  const config = loadConfigOrExit();
  if (await ensureDatabase(config.DATABASE_URL)) process.stderr.write('[helpdesk] created the database\n');
  const handle = createDb(config);
  try {
    const applied = await migrateToLatest(handle.db);
    process.stderr.write(`[helpdesk] migrations: ${applied.length ? applied.join(', ') : 'up to date'}\n`);
    await applyDatabaseDefaults(handle.db, config);
  } finally {
    await handle.close();
  }
}

main().catch((err) => {
  process.stderr.write(`migration failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
