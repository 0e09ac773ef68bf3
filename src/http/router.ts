import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import express, { type NextFunction, type Request, type RequestHandler, type Response, type Router } from 'express';
import { z } from 'zod';
import { roleAtLeast } from '../domains/identity/roles';
import { scopesCover } from '../domains/identity/scopes';
import { insufficientRole, insufficientScope, notFound, refuse, validationFailed, type DomainError, type VersionCondition } from '../lib/errors';
import { toFieldErrors } from './errors';
import { setLogTenant } from '../lib/log-context';
import { assertStorableJson, jsonTooComplex, unstorableText } from '../lib/json-limits';
import { bodyScannedClean, scanJsonBody, TOO_COMPLEX } from './input-guard';
import { readSpooledBody, releaseSpooled, wantsSpool, type SpoolStore } from './spooled-body';
import type { SpooledString } from '../lib/spooled-json';
import type { ApiLimits } from './api-limits';
import type { AuthThrottle } from './auth-throttle';
import type { HandlerResult, Operation, OperationInput } from './operation';
import type { RefusalBudget } from './throttle';
import type { IdempotencyService } from '../domains/idempotency/service';
import type { Principal } from '../domains/identity/principal';
import type { ReadRouting } from '../db/reads';
import { createRechecks } from './rechecks';

const noQuery = z.strictObject({});

/** Handed to public operations, which must not read it: no credential was consulted. */
const PUBLIC_PRINCIPAL: Principal = Object.freeze({
  kind: 'user',
  tenantId: '',
  userId: '',
  role: 'viewer',
  apiKeyId: null,
  scopes: [],
  agentIds: [],
}) as Principal;

export const expressPath = (path: string) => path.replace(/\{([^{}]+)\}/g, ':$1');

/** The single guard: 401 → 404 (membership, inside authenticate) → 403 insufficient_role → 403 insufficient_scope. */
function authorize(op: Operation & { access: Exclude<Operation['access'], 'public'> }, principal: Principal): void {
  if (!roleAtLeast(principal.role, op.access.floor)) throw insufficientRole(op.access.floor);
  if (principal.scopes && !scopesCover(principal.scopes, op.access.tag, op.access.action)) {
    throw insufficientScope(`${op.access.tag}:${op.access.action}`);
  }
}

function runMiddleware(mw: RequestHandler, req: Request, res: Response): Promise<void> {
  return new Promise((resolve, reject) => mw(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
}

function bodyParserError(err: unknown): DomainError | null {
  const type = (err as { type?: string })?.type;
  if (type === TOO_COMPLEX) return jsonTooComplex((err as { reason: 'too_deep' | 'too_many' }).reason);
  if (type === 'entity.parse.failed') return validationFailed([{ path: '(body)', message: 'malformed JSON' }], 'The body is not valid JSON.');
  if (type === 'entity.too.large') return refuse('payload_too_large', 'The request body exceeds the size limit.');
  if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
    return refuse('unsupported_media_type', 'The body encoding is not supported.');
  }
  // Corrupt compressed bodies, aborted uploads, wrong lengths: the client's fault, never a 500.
  const status = (err as { status?: number })?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return validationFailed([{ path: '(body)', message: 'unreadable body' }], 'The body could not be read.');
  }
  return null;
}

/** What the router itself asks of the service container: authentication and the intake refusal budget. */
export interface RouterServices {
  authThrottle: Pick<AuthThrottle, 'authenticate'>;
  identity: { authenticate(authorization: string | undefined): Promise<Principal> };
  intakeRefusals: Pick<RefusalBudget, 'charge'>;
  idempotency: Pick<IdempotencyService, 'check' | 'fingerprint' | 'start' | 'finish' | 'release' | 'maxStoredBytes'>;
  apiLimits: Pick<ApiLimits, 'take'>;
  reads: Pick<ReadRouting, 'wrote'>;
}

/** Authenticated writes a retry can repeat: each may carry an Idempotency-Key (see the idempotency domain). */
// A streamed body (an upload) cannot be fingerprinted without reading it whole, so it takes none.
export const takesIdempotencyKey = (op: Pick<Operation, 'access' | 'method' | 'streamBody'>) => op.access !== 'public' && !op.streamBody && (op.method === 'post' || op.method === 'patch');

/** `If-Match: "3", W/"4"` → ['3'] (a weak tag never matches a write); `*` → '*'. */
export function parseIfMatch(header: string): VersionCondition {
  if (header.trim() === '*') return '*';
  return header
    .split(',')
    .map((t) => t.trim())
    .filter((t) => /^"[^"]*"$/.test(t))
    .map((t) => t.slice(1, -1));
}

/** Whether If-None-Match names this (strong) tag: weak comparison, as RFC 9110 says for GET. */
const ifNoneMatch = (header: string | undefined, tag: string) =>
  header !== undefined && (header.trim() === '*' || header.split(',').some((t) => t.trim().replace(/^W\//, '') === tag));

/** A response schema without the fields a handler answered already rendered (one per operation and set of fields). */
const partialSchemas = new WeakMap<z.ZodType, Map<string, z.ZodType>>();
function withoutRendered(schema: z.ZodType | undefined, fields: string[]): z.ZodType {
  if (!(schema instanceof z.ZodObject)) throw new Error('rendered fields need an object response schema');
  let bySet = partialSchemas.get(schema);
  if (!bySet) partialSchemas.set(schema, (bySet = new Map()));
  const key = fields.join(',');
  let partial = bySet.get(key);
  if (!partial) {
    partial = schema.omit(Object.fromEntries(fields.map((f) => [f, true])) as never);
    bySet.set(key, partial);
  }
  return partial;
}

/** A read's answer as JSON bytes: checked against the schema, with its rendered fields (already checked) spliced in. */
function readAnswer(schema: z.ZodType | undefined, result: HandlerResult): Buffer {
  if (!result.rendered) return Buffer.from(JSON.stringify(schema ? schema.parse(result.body) : result.body));
  return splice(JSON.stringify(withoutRendered(schema, Object.keys(result.rendered)).parse(result.body)), result.rendered);
}

/** The answer's bytes: the checked rest of the body as JSON, each rendered field put in before its closing brace. */
function splice(head: string, rendered: Record<string, Buffer>): Buffer {
  const parts: Buffer[] = [Buffer.from(head.slice(0, -1))];
  let separator = head === '{}' ? '' : ',';
  for (const [field, json] of Object.entries(rendered)) {
    parts.push(Buffer.from(`${separator}${JSON.stringify(field)}:`), json);
    separator = ',';
  }
  parts.push(Buffer.from('}'));
  return Buffer.concat(parts);
}

export function mountOperations<S extends RouterServices>(router: Router, ops: Operation<S>[], services: S, opts: { bodyLimit: number; spool?: SpoolStore }): void {
  const json = express.json({ limit: opts.bodyLimit, strict: true, type: () => true, verify: scanJsonBody });
  const raw = express.raw({ limit: opts.bodyLimit, type: () => true });
  // What outlives its request (an event stream) checks its credential again; streams of one credential share it.
  const rechecks = createRechecks((authorization) => services.identity.authenticate(authorization));

  for (const op of ops) {
    router[op.method](expressPath(op.path), async (req: Request, res: Response, next: NextFunction) => {
      res.locals.operationId = op.id;
      try {
        let principal = PUBLIC_PRINCIPAL;
        if (op.access !== 'public') {
          principal = await services.authThrottle.authenticate(req.ip, req.headers.authorization, services.identity.authenticate);
          res.locals.tenantId = principal.tenantId;
          setLogTenant(principal.tenantId);
          authorize(op as Parameters<typeof authorize>[0], principal);
          // The caller's and the workspace's budgets, said on every authenticated answer (429 past either).
          for (const [name, value] of Object.entries(await services.apiLimits.take(principal))) res.setHeader(name, value);
        }

        // A malformed id cannot name anything, so it is the same 404 as an unknown one; nor can an id holding
        // text PostgreSQL cannot store (NUL, an unpaired surrogate), which must never reach a query.
        if (Object.values(req.params).some((v) => typeof v === 'string' && unstorableText(v) !== null)) throw notFound();
        const params = op.params ? op.params.safeParse(req.params) : { success: true as const, data: undefined };
        if (!params.success) throw notFound();

        assertStorableJson(req.query, 'query');
        const query = (op.query ?? noQuery).safeParse(req.query);
        if (!query.success) throw validationFailed(toFieldErrors(query.error, 'query'));

        let body: unknown = undefined;
        let rawInput: OperationInput<unknown, unknown, unknown>['raw'];
        let streamInput: OperationInput<unknown, unknown, unknown>['stream'];
        if (opts.spool && op.spooledJson?.when(req.params as Record<string, string>) && wantsSpool(req, opts.bodyLimit)) {
          // A large JSON body (an email with its files): read as it arrives, its files' text written to the store.
          const read = await readSpooledBody(req, res, op.spooledJson.spill, opts.spool, opts.bodyLimit, !op.rawBody);
          res.locals.spooled = read.spooled;
          if (op.rawBody) {
            rawInput = { body: Buffer.alloc(0), json: read.value, headers: req.headers, url: { protocol: req.protocol, host: req.get('host') ?? '', originalUrl: req.originalUrl } };
          } else if (op.body) {
            assertStorableJson(read.value, 'body');
            const parsed = op.body.safeParse(read.value);
            if (!parsed.success) throw validationFailed(toFieldErrors(parsed.error, 'body'));
            body = parsed.data;
          }
        } else if (op.streamBody) {
          // The handler reads the body as it arrives; a compressed one it would have to inflate without a bound.
          const encoding = req.headers['content-encoding'];
          if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') throw refuse('unsupported_media_type', 'Send the body without a Content-Encoding.');
          streamInput = { body: req, headers: req.headers };
        } else if (op.rawBody) {
          try {
            await runMiddleware(raw, req, res);
          } catch (err) {
            throw bodyParserError(err) ?? err;
          }
          // The URL as this request reached us (protocol and host as TRUST_PROXY lets us believe them): what a
          // provider that signs the URL (Twilio) signed, when PUBLIC_BASE_URL does not say it.
          rawInput = { body: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0), headers: req.headers, url: { protocol: req.protocol, host: req.get('host') ?? '', originalUrl: req.originalUrl } };
        } else if (op.body) {
          const hasBody = req.headers['content-length'] !== '0' && (req.headers['content-length'] || req.headers['transfer-encoding']);
          if (hasBody && !req.is('application/json') && !req.is('application/*+json')) {
            throw refuse('unsupported_media_type', 'Send the body as application/json.');
          }
          if (hasBody) {
            try {
              await runMiddleware(json, req, res);
            } catch (err) {
              throw bodyParserError(err) ?? err;
            }
          }
          // The pre-scan found no \u0000 or surrogate escape and no deep nesting: nothing for the walk to find.
          if (hasBody && !bodyScannedClean(req)) assertStorableJson(req.body, 'body');
          const parsed = op.body.safeParse(hasBody ? req.body : {});
          if (!parsed.success) throw validationFailed(toFieldErrors(parsed.error, 'body'));
          body = parsed.data;
        }

        // Safe retries: a key seen before answers what its first request answered, without running again.
        const idempotencyKey = takesIdempotencyKey(op) ? req.get('idempotency-key') : undefined;
        if (idempotencyKey !== undefined) {
          services.idempotency.check(idempotencyKey);
          // The request as sent (before schema defaults), so the fingerprint is the caller's own payload.
          const sentBody: unknown = rawInput ? rawInput.body.toString('utf8') : op.body ? req.body : undefined;
          const start = await services.idempotency.start(principal, idempotencyKey, services.idempotency.fingerprint(req.method, req.path, sentBody));
          if (!start.run) {
            res.setHeader('Idempotent-Replayed', 'true');
            // A large first answer was kept as a pointer: the replay reads the resource it showed, as it now stands.
            if (start.pointer) {
              if (!op.replay) throw new Error(`${op.id}: a kept pointer, but the operation cannot read one`);
              res.status(start.status).type('application/json').send(readAnswer(op.response.schema, await op.replay.read({ principal, pointer: start.pointer }, services)));
            } else if (start.body === null) res.status(start.status).end();
            else res.status(start.status).type('application/json').send(start.body);
            return;
          }
        }
        // The answer is kept for replay. If that fails the answer still goes out (the work is done); the key
        // then stays in use until it expires, so a retry is refused (409) rather than run twice.
        const keep = (key: string, status: number, answer: { body: string | null } | { pointer: Record<string, unknown> }) =>
          services.idempotency.finish(principal, key, status, answer).catch((err: unknown) => req.log.warn({ err_code: 'idempotency_not_kept', cause: (err as Error)?.message }, 'idempotent answer not kept'));
        let result;
        try {
          result = await op.handler(
            {
              principal,
              params: params.data,
              query: query.data,
              body,
              requestId: String(req.id),
              ...(rawInput ? { raw: rawInput } : {}),
              ...(streamInput ? { stream: streamInput } : {}),
              ...(op.versioned && req.get('if-match') !== undefined ? { ifMatch: parseIfMatch(req.get('if-match')!) } : {}),
              ...(op.eventStream && req.get('last-event-id') !== undefined ? { lastEventId: req.get('last-event-id')! } : {}),
              ...(op.readsHeaders ? { headers: Object.fromEntries(op.readsHeaders.map((h) => [h.toLowerCase(), req.get(h)])) } : {}),
              ...(op.eventStream && op.access !== 'public'
                ? {
                    reauthorize: async (notBefore: number) => {
                      const now = await rechecks(req.headers.authorization, notBefore);
                      authorize(op as Parameters<typeof authorize>[0], now);
                      return now;
                    },
                  }
                : {}),
            },
            services,
          );
        } catch (err) {
          // A refusal or a failure wrote nothing to keep: the key is free for the retry.
          if (idempotencyKey !== undefined) await services.idempotency.release(principal, idempotencyKey).catch(() => {});
          throw err;
        }
        // A caller's write: its own rollup and list reads go to the primary until a replica has it.
        if (op.method !== 'get' && op.access !== 'public') await services.reads.wrote(principal);
        for (const [k, v] of Object.entries(result.headers ?? {})) res.setHeader(k, v);
        if (op.versioned && result.version !== undefined) {
          const tag = `"${result.version}"`;
          res.setHeader('ETag', tag);
          if (op.method === 'get' && ifNoneMatch(req.get('if-none-match'), tag)) {
            res.status(304).end();
            return;
          }
        }
        if (result.duplicate) res.locals.duplicate = true;
        if (result.stream) {
          res.status(200);
          res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
          // No cache or proxy may hold events back (X-Accel-Buffering: nginx's buffering of upstream answers).
          res.setHeader('Cache-Control', 'no-cache, no-transform');
          res.setHeader('X-Accel-Buffering', 'no');
          // The stream ends only with its connection, so its body is delimited by the close (RFC 9112 §6.3), not
          // chunked: each write then goes to the socket as it is, where chunk framing made Node copy every
          // write into a buffer of its own per socket (hundreds of streams writing the same page each held a copy).
          res.useChunkedEncodingByDefault = false;
          res.shouldKeepAlive = false;
          res.flushHeaders();
          const gone = new AbortController();
          res.once('close', () => gone.abort());
          const write = (chunk: string | Buffer) => !gone.signal.aborted && res.write(chunk) && !res.writableNeedDrain;
          const drained = (ms: number) =>
            new Promise<boolean>((resolve) => {
              if (gone.signal.aborted) return resolve(false);
              if (!res.writableNeedDrain) return resolve(true);
              const done = (ok: boolean) => () => {
                clearTimeout(timer);
                res.off('drain', onDrain);
                res.off('close', onClose);
                resolve(ok && !gone.signal.aborted);
              };
              const onDrain = done(true);
              const onClose = done(false);
              const timer = setTimeout(done(false), ms);
              res.once('drain', onDrain).once('close', onClose);
            });
          try {
            await result.stream({ write, drained, signal: gone.signal });
          } catch (err) {
            // The headers are sent: a stream that fails ends, and the client resumes with Last-Event-ID.
            req.log.warn({ err_code: 'stream_failed', cause: (err as Error)?.message }, 'event stream ended by an error');
          } finally {
            // A client that stopped reading would keep its unsent frames (and its socket) here for as long as it
            // likes: it is cut off instead. It lost no event: it resumes after the last whole one it read.
            if (res.writableNeedDrain) res.destroy();
            else res.end();
          }
          return;
        }
        const status = result.status ?? op.response.status;
        if (result.bytes) {
          // A file's bytes, as they are read: a client that goes away stops the read (pipeline destroys both).
          res.status(status);
          try {
            await pipeline(result.bytes, res);
          } catch (err) {
            req.log.warn({ err_code: 'bytes_not_sent', cause: (err as Error)?.message }, 'answer of bytes ended early');
            res.destroy();
          }
          return;
        }
        if (result.text) {
          // A provider's own answer format (Twilio's TwiML, Meta's handshake challenge): sent as it is.
          res.status(status).type(result.text.contentType).send(result.text.body);
          return;
        }
        if (status === 204 || result.body === undefined) {
          if (idempotencyKey !== undefined) await keep(idempotencyKey, status, { body: null });
          res.status(status).end();
          return;
        }
        // Express answers 304 by itself to any If-None-Match it thinks fresh (even `*` with no ETag sent): only
        // operations that declare an ETag may answer 304, so the others never see the header.
        if (!op.etag && !op.versioned) delete req.headers['if-none-match'];
        // Rendered fields were checked when they were rendered: the rest is checked now, and they are appended.
        if (result.rendered) {
          // Reads only: an answer kept for replay or hashed into an ETag is built whole below.
          if (idempotencyKey !== undefined || op.etag) throw new Error(`${op.id}: rendered fields are for reads without an etag`);
          res.status(status).type('application/json').send(readAnswer(op.response.schema, result));
          return;
        }
        // The response schema is the allowlist of what leaves the service: unknown fields are stripped.
        const out = op.response.schema ? op.response.schema.parse(result.body) : result.body;
        if (idempotencyKey !== undefined) {
          const sent = JSON.stringify(out);
          // A large answer is not kept whole (a reopen of a long ticket answered megabytes, kept a day per key):
          // an operation that shows one resource keeps a pointer to it instead.
          const large = op.replay !== undefined && Buffer.byteLength(sent) > services.idempotency.maxStoredBytes;
          await keep(idempotencyKey, status, large ? { pointer: op.replay!.pointer(out) } : { body: sent });
          res.status(status).type('application/json').send(sent);
          return;
        }
        if (op.etag) {
          const json = JSON.stringify(out);
          const tag = `"${createHash('sha256').update(json).digest('base64url').slice(0, 27)}"`;
          res.setHeader('ETag', tag);
          if (ifNoneMatch(req.get('if-none-match'), tag)) {
            res.status(304).end();
            return;
          }
          res.status(status).type('application/json').send(json);
          return;
        }
        res.status(status).json(out);
      } catch (err) {
        // A refused upload still on its way (too large, over quota, malformed): the answer closes the connection
        // rather than reading the rest only to throw it away (see src/domains/files/routes.ts).
        if (op.streamBody && !req.complete && !res.headersSent) res.setHeader('Connection', 'close');
        next(op.chargeRefusals ? await services.intakeRefusals.charge(req.ip, err) : err);
      } finally {
        await releaseSpooled(res.locals.spooled as SpooledString[] | undefined, opts.spool, req.log);
      }
    });
  }
}
