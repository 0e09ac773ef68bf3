import { loadConfigOrExit } from '../src/config';
import { createLogger } from '../src/lib/logger';
import { openRuntime } from '../src/runtime';
import { createWorkerServices } from '../src/services/worker';
import { startWorkers } from './runtime';
import { loadDotEnv } from '../src/lib/env-file';

async function main() {
  // .env in development, before the configuration is read (src/lib/env-file.ts).
  loadDotEnv();
  const config = loadConfigOrExit();
  const logger = createLogger(config);
  const runtime = openRuntime(config, logger, 'worker');
  const services = createWorkerServices({ db: runtime.db.db, config, queues: runtime.queues, logger, redis: runtime.redis });
  const starting = startWorkers({ config, logger, services, queues: runtime.queues, redis: runtime.redis });

  // The handlers are installed before the workers start: "workers started" is logged inside startWorkers, and
  // a SIGTERM that arrived between that line and handlers installed after it killed the process with the
  // signal's default action (exit 143) instead of draining.
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'workers shutting down: finishing in-flight jobs');
    const timer = setTimeout(() => {
      logger.error('workers did not finish within the grace period; exiting');
      process.exit(1);
    }, config.SHUTDOWN_GRACE_MS).unref();
    const set = await starting;
    await set.close();
    await runtime.close();
    clearTimeout(timer);
    logger.info('workers stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  await starting;
}

main().catch((err) => {
  process.stderr.write(`worker start-up failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
