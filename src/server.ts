import { createApp } from './app';
import { answerClientErrors } from './http/client-errors';
import { createDrainableServer } from './http/drain';
import { loadConfigOrExit } from './config';
import { createLogger } from './lib/logger';
import { openRuntime } from './runtime';
import { loadDotEnv } from './lib/env-file';

// .env in development, before the configuration is read (src/lib/env-file.ts).
loadDotEnv();
const config = loadConfigOrExit();
const logger = createLogger(config);
const runtime = openRuntime(config, logger, 'http');
const { app, services } = createApp({ config, logger, db: runtime.db.db, readDb: runtime.readDb?.db ?? null, redis: runtime.redis, queues: runtime.queues, bus: runtime.bus });

// Macro changes drop the remembered "does any macro listen for this event?" answers, so a ticket write asks
// PostgreSQL nothing about triggers. LISTEN needs a session of its own (behind a pooler, a direct URL).
const macroChanges = services.macroTriggers.listenForChanges(config.DATABASE_LISTEN_URL ?? config.DATABASE_URL);
const { server, drain } = createDrainableServer(app);
server.listen(config.PORT, config.HOST, () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.PORT;
  logger.info({ port }, `API listening on http://localhost:${port}`);
});
answerClientErrors(server);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'API shutting down: finishing in-flight requests');
  const timer = setTimeout(() => process.exit(1), config.SHUTDOWN_GRACE_MS).unref();
  await drain();
  // Work the last answers started after their commit (timers, triggers) finishes before its queues close.
  await services.later.settle();
  await macroChanges.close();
  await runtime.close();
  clearTimeout(timer);
  logger.info('API stopped');
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
