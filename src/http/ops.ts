import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { timingSafeEqual, createHash } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Express, NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from '../config';
import { refuse } from '../lib/errors';
import { sendProblem } from './problem';
import type { QueueHub } from '../queue/hub';
import { readWorkerMetrics } from '../queue/job-metrics';
import { queueNames } from '../queue/jobs';
import type { RedisClient } from '../queue/connection';

/** The API process's metrics; domains count throttle rejections and dedupe hits through `opsMetrics`. */
export function createOpsMetrics(live: { openStreams?: () => number } = {}) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const openStreams = live.openStreams;
  if (openStreams) {
    new Gauge({
      name: 'helpdesk_event_streams_open',
      help: 'Event streams (GET /v1/events/stream) open in this API process',
      registers: [registry],
      collect() {
        this.set(openStreams());
      },
    });
  }
  return {
    registry,
    requestDuration: new Histogram({
      name: 'helpdesk_http_request_duration_seconds',
      help: 'HTTP request duration by operation id and status',
      labelNames: ['operation_id', 'method', 'status'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    throttled: new Counter({ name: 'helpdesk_throttle_rejections_total', help: 'Requests refused with 429, by route', labelNames: ['route'] as const, registers: [registry] }),
    dedupeHits: new Counter({ name: 'helpdesk_dedupe_hits_total', help: 'Deliveries answered as duplicates, by route', labelNames: ['route'] as const, registers: [registry] }),
  };
}

export type OpsMetrics = ReturnType<typeof createOpsMetrics>;

const digest = (s: string) => createHash('sha256').update(s).digest();

/** HTTP basic auth against OPS_USER / OPS_PASSWORD, compared in constant time (hashes of equal length). */
function basicAuth(user: string, password: string) {
  const expected = digest(`${user}:${password}`);
  return (req: Request, res: Response, next: NextFunction) => {
    const header = req.headers.authorization ?? '';
    const given = header.startsWith('Basic ') ? Buffer.from(header.slice(6), 'base64').toString('utf8') : '';
    if (given && timingSafeEqual(digest(given), expected)) return next();
    res.setHeader('WWW-Authenticate', 'Basic realm="helpdesk-ops", charset="UTF-8"');
    res.status(401).type('text/plain').send('Operator credentials required.');
  };
}

/**
 * The operator pages may never be framed by another site (clickjacking a logged-in operator into retrying or
 * cleaning queues): both the legacy header and its CSP successor, on every answer, refusals included.
 */
function noFraming(_req: Request, res: Response, next: NextFunction) {
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Content-Security-Policy', "frame-ancestors 'none'");
  next();
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Browsers resend cached basic credentials on any request to this origin, so another site could make an
 * operator's browser POST to Bull Board (retry, clean, pause queues). A state-changing request is accepted
 * only when the browser says it is not cross-site: Sec-Fetch-Site absent (a non-browser client) or
 * same-origin/none, and an Origin header, when sent, naming this host. Checked before the credential, so a
 * forged request is refused the same way whether or not the browser attached one.
 */
function refuseCrossSite(req: Request, res: Response, next: NextFunction) {
  if (SAFE_METHODS.has(req.method)) return next();
  const site = req.headers['sec-fetch-site'];
  const origin = req.headers.origin;
  let sameSite = site === undefined || site === 'same-origin' || site === 'none';
  if (sameSite && origin !== undefined) {
    try {
      // Host only, not scheme: TLS is usually terminated in front of the service. req.host follows TRUST_PROXY.
      sameSite = new URL(origin).host === req.host;
    } catch {
      sameSite = false;
    }
  }
  if (sameSite) return next();
  sendProblem(res, refuse('cross_site_request', 'State-changing requests to the operator dashboard must come from the dashboard itself.'), String(req.id));
}

/**
 * Bull Board's page template links Google Fonts; operators' browsers should fetch nothing from third parties
 * (and the dashboard must work without internet access), so the template is served without that link and the
 * page falls back to its sans-serif font. The copy is made from the installed package at start-up, so it
 * follows package upgrades.
 */
function boardViewsWithoutWebFonts(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'helpdesk-bull-board-'));
  const template = readFileSync(require.resolve('@bull-board/ui/dist/index.ejs'), 'utf8');
  writeFileSync(path.join(dir, 'index.ejs'), template.replace(/<link[^<>]*>\s*/g, (link) => (/fonts\.(?:googleapis|gstatic)\.com/.test(link) ? '' : link)));
  return dir;
}

/**
 * Operator surfaces: the Bull Board queue dashboard at /admin/queues and Prometheus metrics at /metrics,
 * both behind basic auth. Without OPS_USER and OPS_PASSWORD they are not mounted (a log line says so).
 */
export function mountOps(app: Express, deps: { config: Config; logger: Logger; queues: QueueHub; redis: RedisClient; metrics: OpsMetrics }) {
  const { config, logger, queues, redis, metrics } = deps;
  if (!config.OPS_USER || !config.OPS_PASSWORD) {
    logger.warn('ops endpoints disabled: set OPS_USER and OPS_PASSWORD to serve /admin/queues and /metrics');
    return;
  }
  const guard = basicAuth(config.OPS_USER, config.OPS_PASSWORD);

  const board = new ExpressAdapter();
  board.setBasePath('/admin/queues');
  const names = queueNames(config.INTAKE_QUEUE_SHARDS);
  createBullBoard({ queues: names.map((name) => new BullMQAdapter(queues.queue(name))), serverAdapter: board });
  board.setViewsPath(boardViewsWithoutWebFonts());
  app.use('/admin/queues', noFraming, refuseCrossSite, guard, board.getRouter());

  // Queue depth and age are read from Redis when scraped, so they are current and cost nothing between scrapes.
  const depth = new Gauge({ name: 'helpdesk_queue_jobs', help: 'Jobs per queue and state', labelNames: ['queue', 'state'] as const, registers: [metrics.registry] });
  const oldest = new Gauge({ name: 'helpdesk_queue_oldest_waiting_seconds', help: 'Age of the oldest waiting job per queue', labelNames: ['queue'] as const, registers: [metrics.registry] });
  const totals = new Gauge({ name: 'helpdesk_queue_jobs_kept', help: 'Completed and failed jobs kept per queue (bounded retention)', labelNames: ['queue', 'state'] as const, registers: [metrics.registry] });
  app.get('/metrics', noFraming, guard, async (_req, res, next) => {
    try {
      for (const name of names) {
        const q = queues.queue(name);
        const counts = await q.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed', 'prioritized');
        for (const state of ['waiting', 'active', 'delayed', 'failed'] as const) depth.set({ queue: name, state }, counts[state] ?? 0);
        for (const state of ['completed', 'failed'] as const) totals.set({ queue: name, state }, counts[state] ?? 0);
        const [first] = await q.getJobs(['waiting'], 0, 0, true);
        oldest.set({ queue: name }, first ? Math.max(0, (Date.now() - first.timestamp) / 1000) : 0);
      }
      const workers = await readWorkerMetrics(redis, config.REDIS_PREFIX);
      res.type(metrics.registry.contentType).send(`${await metrics.registry.metrics()}\n${await workers.metrics()}`);
    } catch (err) {
      next(err);
    }
  });
}
