import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { redisReady, type RedisClient } from './queue/connection';
import type { Logger } from 'pino';
import { pinoHttp } from 'pino-http';
import { sql } from 'kysely';
import type { Config } from './config';
import type { Db } from './db';
import { AppError, problemOf, toProblem } from './http/errors';
import { buildOpenApi } from './http/openapi';
import { sendProblem } from './http/problem';
import { asDependencyError, dependencyUnavailable, notFound } from './lib/errors';
import { createOpsMetrics, mountOps } from './http/ops';
import { webChatCors, webChatVisitorCors } from './http/cors';
import { baseAnswerHeaders } from './http/answer-headers';
import { expressPath, mountOperations } from './http/router';
import { withLogContext } from './lib/log-context';
import { serializeError } from './lib/logger';
import { withTimeout } from './lib/time';
import { buildOperationTable } from './operations';
import type { QueueHub } from './queue/hub';
import type { ResultBus } from './queue/results';
import { createApiServices, type ApiServices } from './services/api';

export interface AppDeps {
  config: Config;
  logger: Logger;
  db: Db;
  /** The read replica for rollup and list reads (DATABASE_READ_URL), if any. */
  readDb?: Db | null;
  redis: RedisClient;
  queues: QueueHub;
  bus: ResultBus;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;


export function createApp(deps: AppDeps): { app: Express; services: ApiServices } {
  const { config, logger, db, redis } = deps;
  const services = createApiServices({ db, readDb: deps.readDb ?? null, config, queues: deps.queues, logger, redis, bus: deps.bus });
  const operations = buildOperationTable();
  const openapi = buildOpenApi(operations, { version: '1.0.0', ...(config.PUBLIC_BASE_URL ? { serverUrl: config.PUBLIC_BASE_URL } : {}) });

  const metrics = createOpsMetrics({ openStreams: services.events.openStreams });
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.TRUST_PROXY);
  app.set('query parser', 'simple');
  // No accidental ETags: only operations that declare one (versioned resources, polled rollups) send it.
  app.set('etag', false);
  // nosniff on every answer, whatever answers it (issue 35).
  app.use(baseAnswerHeaders());

  app.use(
    pinoHttp({
      logger,
      genReqId: (req, res) => {
        const incoming = req.headers['x-request-id'];
        const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
        res.setHeader('X-Request-Id', id);
        return id;
      },
      // One line per request with only what an operator needs; never headers or bodies.
      serializers: {
        req: (req) => ({ id: req.id, method: req.method, path: String(req.url).split('?')[0] }),
        res: (res) => ({ status: res.statusCode }),
        // PostgreSQL errors without the statement values they can quote (see src/lib/logger.ts).
        err: serializeError,
      },
      customProps: (_req, res) => ({
        operation_id: (res as Response).locals?.operationId,
        tenant_id: (res as Response).locals?.tenantId,
      }),
      // A 503 is a dependency outage answered as designed (with Retry-After), not a fault of this service:
      // warn, so error lines stay the signal for bugs.
      customLogLevel: (_req, res, err) => (err || (res.statusCode >= 500 && res.statusCode !== 503) ? 'error' : res.statusCode >= 400 ? 'warn' : 'info'),
    }),
  );

  // Every line logged while serving this request names it (and, once known, its workspace).
  app.use((req: Request, _res: Response, next: NextFunction) => withLogContext({ request_id: String(req.id) }, next));

  // Request durations by operation (unmatched routes count as "none").
  app.use((req: Request, res: Response, next: NextFunction) => {
    const end = metrics.requestDuration.startTimer({ method: req.method });
    res.on('finish', () => {
      const operation = String(res.locals.operationId ?? 'none');
      end({ operation_id: operation, status: String(res.statusCode) });
      if (res.statusCode === 429) metrics.throttled.inc({ route: operation });
      if (res.locals.duplicate) metrics.dedupeHits.inc({ route: operation });
    });
    next();
  });
  mountOps(app, { config, logger, queues: deps.queues, redis, metrics });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  app.get('/readyz', async (req, res) => {
    const [pg, rd] = await Promise.allSettled([
      withTimeout(sql`select 1`.execute(db), 2000),
      withTimeout(redisReady(redis), 2000),
    ]);
    const checks = { postgres: pg.status === 'fulfilled' ? 'ok' : 'unreachable', redis: rd.status === 'fulfilled' ? 'ok' : 'unreachable' };
    if (pg.status === 'fulfilled' && rd.status === 'fulfilled') {
      res.json({ status: 'ready', checks });
      return;
    }
    const down = [pg.status === 'rejected' ? 'PostgreSQL' : null, rd.status === 'rejected' ? 'Redis' : null].filter(Boolean);
    const err = toProblem(dependencyUnavailable(down.join(' and ')));
    res.setHeader('Retry-After', '5');
    res
      .status(503)
      .type('application/problem+json')
      .send(JSON.stringify({ type: 'about:blank', title: err.title, status: 503, detail: err.detail, code: err.code, checks, request_id: req.id }));
  });

  app.get('/v1/openapi.json', (_req, res) => {
    res.json(openapi);
  });

  // API docs in a browser: Redoc served from the installed package (no CDN), reading the same document.
  // The bundle's "API docs by Redocly" badge loads its logo from Redocly's CDN; an inline image stands in so
  // the page makes no request beyond this service (air-gapped operators, no third-party tracking).
  const redocBundle = readFileSync(require.resolve('redoc/bundles/redoc.standalone.js'), 'utf8').replaceAll(
    'https://cdn.redoc.ly/redoc/logo-mini.svg',
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/%3E",
  );
  app.get('/docs/redoc.standalone.js', (_req, res) => {
    res.type('application/javascript').send(redocBundle);
  });
  app.get('/docs', (_req, res) => {
    res
      .type('html')
      .send(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Helpdesk API</title>' +
          '<meta name="viewport" content="width=device-width, initial-scale=1"></head>' +
          '<body><redoc spec-url="/v1/openapi.json"></redoc><script src="/docs/redoc.standalone.js"></script></body></html>',
      );
  });

  // A browser widget posts web chat messages from the connection's allowed origins (CORS), nothing else.
  app.use('/v1/ingest/web_chat', webChatCors((token, origin) => services.channels.webChatOriginAllowed(token, origin)));
  // The widget's visitor routes (sessions, messages, the live conversation) by the same rule (issue 33).
  app.use('/v1/web-chat', webChatVisitorCors((key, origin) => services.webChat.originAllowed(key, origin)));
  const router = express.Router({ caseSensitive: true, strict: false });
  mountOperations(router, operations, services, { bodyLimit: config.BODY_LIMIT_BYTES, spool: services.inboundFiles.spool });
  app.use(router);

  // A known path with another method is 405 with Allow, not a misleading 404.
  const known = operations.map((op) => ({ re: new RegExp(`^${expressPath(op.path).replace(/:[^/]+/g, '[^/]+')}/?$`), method: op.method }));
  app.use((req: Request, res: Response) => {
    const allowed = [...new Set(known.filter((k) => k.re.test(req.path)).map((k) => k.method.toUpperCase()))];
    if (allowed.length > 0) {
      res.setHeader('Allow', allowed.join(', '));
      sendProblem(res, new AppError(405, 'method_not_allowed', 'Method not allowed', `Use ${allowed.join(' or ')}.`), String(req.id));
      return;
    }
    sendProblem(res, notFound('route'), String(req.id));
  });

  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const known = problemOf(err) ?? problemOf(asDependencyError(err));
    if (known) {
      if (known.status >= 500) req.log.warn({ err_code: known.code, cause: (err as Error)?.message }, 'dependency unavailable');
      sendProblem(res, known, String(req.id));
      return;
    }
    // Express fails to decode a malformed %-escape in a path id before any handler runs: it names nothing.
    if (err instanceof URIError) {
      sendProblem(res, notFound(), String(req.id));
      return;
    }
    // Malformed JSON on routes outside the operation table, e.g. a body sent to a probe.
    if ((err as { type?: string })?.type === 'entity.parse.failed') {
      sendProblem(res, new AppError(400, 'validation_failed', 'Validation failed', 'The body is not valid JSON.'), String(req.id));
      return;
    }
    req.log.error({ err }, 'unhandled error');
    sendProblem(res, new AppError(500, 'internal_error', 'Internal error', 'Something went wrong on our side; it has been logged.'), String(req.id));
  });

  return { app, services };
}
