import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import type { HandlerResult } from '../operation';
import { sendStream } from './answer-stream';
import type { Exchange } from './context';
import type { Idempotency } from './idempotency';
import { readAnswer } from './json-answer';

/** Whether If-None-Match names this (strong) tag: weak comparison, as RFC 9110 says for GET. */
export const ifNoneMatch = (header: string | undefined, tag: string) =>
  header !== undefined && (header.trim() === '*' || header.split(',').some((t) => t.trim().replace(/^W\//, '') === tag));

/**
 * Stage 6, the answer, by what the handler answered: a version as a strong ETag (304 for a GET that has it), an
 * event stream, bytes, a provider's own text, nothing (204), a read with rendered fields spliced in, or JSON
 * through the response schema (the allowlist of what leaves the service), kept for an Idempotency-Key (a large
 * one as a pointer) or hashed into an ETag.
 */
export async function sendAnswer(x: Exchange, result: HandlerResult, idem: Idempotency): Promise<void> {
  const { op, services, req, res } = x;
  for (const [k, v] of Object.entries(result.headers ?? {})) res.setHeader(k, v);
  if (op.versioned && result.version !== undefined) {
    const tag = `"${result.version}"`;
    res.setHeader('ETag', tag);
    if (op.method === 'get' && ifNoneMatch(req.get('if-none-match'), tag)) return void res.status(304).end();
  }
  if (result.duplicate) res.locals.duplicate = true;
  if (result.stream) return sendStream(res, result.stream, req.log);
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
  // A provider's own answer format (Twilio's TwiML, Meta's handshake challenge): sent as it is.
  if (result.text) return void res.status(status).type(result.text.contentType).send(result.text.body);
  if (status === 204 || result.body === undefined) {
    await idem.keep(status, { body: null });
    return void res.status(status).end();
  }
  // Express answers 304 by itself to any If-None-Match it thinks fresh (even `*` with no ETag sent): only
  // operations that declare an ETag may answer 304, so the others never see the header.
  if (!op.etag && !op.versioned) delete req.headers['if-none-match'];
  if (result.rendered) {
    // Reads only: an answer kept for replay or hashed into an ETag is built whole below.
    if (idem.key !== undefined || op.etag) throw new Error(`${op.id}: rendered fields are for reads without an etag`);
    return void res.status(status).type('application/json').send(readAnswer(op.response.schema, result));
  }
  const out = op.response.schema ? op.response.schema.parse(result.body) : result.body;
  if (idem.key !== undefined) {
    const sent = JSON.stringify(out);
    // A large answer is not kept whole (a reopen of a long ticket answered megabytes, kept a day per key): an
    // operation that shows one resource keeps a pointer to it instead.
    const large = op.replay !== undefined && Buffer.byteLength(sent) > services.idempotency.maxStoredBytes;
    await idem.keep(status, large ? { pointer: op.replay!.pointer(out) } : { body: sent });
    return void res.status(status).type('application/json').send(sent);
  }
  if (op.etag) {
    const json = JSON.stringify(out);
    const tag = `"${createHash('sha256').update(json).digest('base64url').slice(0, 27)}"`;
    res.setHeader('ETag', tag);
    if (ifNoneMatch(req.get('if-none-match'), tag)) return void res.status(304).end();
    return void res.status(status).type('application/json').send(json);
  }
  res.status(status).json(out);
}
