import express, { type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { notFound, refuse, validationFailed, type DomainError } from '../../lib/errors';
import { assertStorableJson, jsonTooComplex, unstorableText } from '../../lib/json-limits';
import type { SpooledString } from '../../lib/spooled-json';
import { toFieldErrors } from '../errors';
import { bodyScannedClean, scanJsonBody, TOO_COMPLEX } from '../input-guard';
import type { OperationInput } from '../operation';
import { readSpooledBody, wantsSpool, type SpoolStore } from '../spooled-body';
import type { Exchange } from './context';

const noQuery = z.strictObject({});

/** The request's validated parts, as the handler gets them, and the body as sent (for the idempotency fingerprint). */
export interface Input {
  params: unknown;
  query: unknown;
  body: unknown;
  raw?: OperationInput<unknown, unknown, unknown>['raw'];
  stream?: OperationInput<unknown, unknown, unknown>['stream'];
  /** The body as the caller sent it (before schema defaults): what an Idempotency-Key's fingerprint covers. */
  sent: unknown;
}

/** The body parsers, built once per router: JSON (pre-scanned for depth and unstorable text), raw bytes, spooling. */
export interface BodyReaders {
  json: RequestHandler;
  raw: RequestHandler;
  bodyLimit: number;
  spool?: SpoolStore;
}

export function bodyReaders(opts: { bodyLimit: number; spool?: SpoolStore }): BodyReaders {
  return {
    json: express.json({ limit: opts.bodyLimit, strict: true, type: () => true, verify: scanJsonBody }),
    raw: express.raw({ limit: opts.bodyLimit, type: () => true }),
    bodyLimit: opts.bodyLimit,
    ...(opts.spool ? { spool: opts.spool } : {}),
  };
}

function runMiddleware(mw: RequestHandler, req: Request, res: Response): Promise<void> {
  return new Promise((resolve, reject) => mw(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
}

export function bodyParserError(err: unknown): DomainError | null {
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

async function parsed(mw: RequestHandler, req: Request, res: Response): Promise<void> {
  try {
    await runMiddleware(mw, req, res);
  } catch (err) {
    throw bodyParserError(err) ?? err;
  }
}

const bodyOf = (schema: z.ZodType, value: unknown) => {
  const out = schema.safeParse(value);
  if (!out.success) throw validationFailed(toFieldErrors(out.error, 'body'));
  return out.data;
};

/** The URL as this request reached us (protocol and host as TRUST_PROXY lets us believe them): what a provider that signs the URL (Twilio) signed. */
const urlOf = (req: Request) => ({ protocol: req.protocol, host: req.get('host') ?? '', originalUrl: req.originalUrl });

/**
 * Stage 3, the input: path ids (malformed or unstorable: the same 404 as unknown), the query, then the body in the
 * operation's way: spooled (a large email, its files' text to the store as it arrives), streamed (uploads: unread,
 * no Content-Encoding), raw bytes (signature checks), or JSON (pre-scanned, walked for unstorable text, then the
 * schema). Spooled strings are noted in `res.locals.spooled` at once, so the router removes them whatever follows.
 */
export async function readInput(x: Exchange, readers: BodyReaders): Promise<Input> {
  const { op, req, res } = x;
  // A malformed id cannot name anything, so it is the same 404 as an unknown one; nor can an id holding text
  // PostgreSQL cannot store (NUL, an unpaired surrogate), which must never reach a query.
  if (Object.values(req.params).some((v) => typeof v === 'string' && unstorableText(v) !== null)) throw notFound();
  const params = op.params ? op.params.safeParse(req.params) : { success: true as const, data: undefined };
  if (!params.success) throw notFound();
  assertStorableJson(req.query, 'query');
  const query = (op.query ?? noQuery).safeParse(req.query);
  if (!query.success) throw validationFailed(toFieldErrors(query.error, 'query'));
  const base = { params: params.data, query: query.data, body: undefined as unknown, sent: undefined as unknown };

  if (readers.spool && op.spooledJson?.when(req.params as Record<string, string>) && wantsSpool(req, readers.bodyLimit)) {
    const read = await readSpooledBody(req, res, op.spooledJson.spill, readers.spool, readers.bodyLimit, !op.rawBody);
    res.locals.spooled = read.spooled satisfies SpooledString[];
    if (op.rawBody) return { ...base, raw: { body: Buffer.alloc(0), json: read.value, headers: req.headers, url: urlOf(req) }, sent: '' };
    if (!op.body) return base;
    assertStorableJson(read.value, 'body');
    return { ...base, body: bodyOf(op.body, read.value) };
  }
  if (op.streamBody) {
    // The handler reads the body as it arrives; a compressed one it would have to inflate without a bound.
    const encoding = req.headers['content-encoding'];
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') throw refuse('unsupported_media_type', 'Send the body without a Content-Encoding.');
    return { ...base, stream: { body: req, headers: req.headers } };
  }
  if (op.rawBody) {
    await parsed(readers.raw, req, res);
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    return { ...base, raw: { body, headers: req.headers, url: urlOf(req) }, sent: body.toString('utf8') };
  }
  if (!op.body) return base;
  const hasBody = req.headers['content-length'] !== '0' && (req.headers['content-length'] || req.headers['transfer-encoding']);
  if (hasBody && !req.is('application/json') && !req.is('application/*+json')) throw refuse('unsupported_media_type', 'Send the body as application/json.');
  if (hasBody) await parsed(readers.json, req, res);
  // The pre-scan found no \u0000 or surrogate escape and no deep nesting: nothing for the walk to find.
  if (hasBody && !bodyScannedClean(req)) assertStorableJson(req.body, 'body');
  return { ...base, body: bodyOf(op.body, hasBody ? req.body : {}), sent: req.body };
}
