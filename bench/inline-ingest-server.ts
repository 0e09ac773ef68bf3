/**
 * The ingest benchmark's baseline: a bare Express app that parses the same payload with the same adapter
 * and calls the same ingest service function inline (same transaction), with no queue, throttle or
 * result channel. Started by bench/ingest.ts as its own process, like the real API.
 */
import express from 'express';
import { channelById } from '../src/domains/channels/registry';
import { loadConfigOrExit } from '../src/config';
import { createLogger } from '../src/lib/logger';
import { openRuntime } from '../src/runtime';
import { createWorkerServices } from '../src/services/worker';

const config = loadConfigOrExit();
const logger = createLogger(config);
const runtime = openRuntime(config, logger, 'http');
// The workers' container: the baseline runs their ingest writer inline, in the request.
const services = createWorkerServices({ db: runtime.db.db, config, queues: runtime.queues, logger, redis: runtime.redis });
let seq = 0;

const app = express();
app.use(express.json({ limit: '1mb' }));
app.post('/v1/ingest/:channel', async (req, res) => {
  const def = channelById(String(req.params.channel));
  const parsed = def?.adapter?.parse(req.body.payload);
  if (!def || !parsed || !parsed.ok) {
    res.status(400).json({ code: 'channel_payload_invalid' });
    return;
  }
  try {
    const results = [];
    for (const message of parsed.messages) {
      results.push(await services.ingestProcessor.process({ id: `inline-${process.pid}-${(seq += 1)}`, tenant_id: req.body.tenant_id, channel: def.id, message }));
    }
    res.json(results[0]);
  } catch (err) {
    res.status(500).json({ error: (err as Error).message });
  }
});
const server = app.listen(config.PORT, '127.0.0.1', () => process.stdout.write(`inline baseline listening on ${config.PORT}\n`));
process.on('SIGTERM', () => server.close(() => void runtime.close().then(() => process.exit(0))));
app.get('/healthz', (_req, res) => {
  res.json({ status: 'ok' });
});
