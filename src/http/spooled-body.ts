import type { Request } from 'express';
import type { Readable } from 'node:stream';
import { refuse, validationFailed, type DomainError } from '../lib/errors';
import { jsonTooComplex, MAX_JSON_DEPTH, MAX_JSON_VALUES } from '../lib/json-limits';
import { readSpooledJson, SpoolError, type SpooledString } from '../lib/spooled-json';

/** Where a spooled body's large strings go (the file store's staging area), set by the app. */
export interface SpoolStore {
  /** The largest body taken this way (INGEST_EMAIL_MAX_BYTES). */
  maxBytes: number;
  store(text: Readable, maxChars: number): Promise<string>;
  remove(key: string): Promise<void>;
}

/**
 * Whether this request's body goes the spooled way: the operation takes one, and the body is over the ordinary
 * limit or of unknown length. A body within the limit is parsed whole as always (JSON.parse is quicker than a
 * tokenizer for what fits).
 */
export function wantsSpool(req: Request, bodyLimit: number): boolean {
  const length = req.headers['content-length'];
  if (length === undefined) return req.headers['transfer-encoding'] !== undefined;
  return Number(length) > bodyLimit;
}

function refusal(err: SpoolError): DomainError {
  switch (err.reason) {
    case 'too_large':
    case 'inline_too_large':
      return refuse('payload_too_large', `The request body is too large: ${err.message}.`);
    case 'too_deep':
    case 'too_many':
      return jsonTooComplex(err.reason);
    default:
      return validationFailed([{ path: '(body)', message: err.message }], 'The body is not valid JSON.');
  }
}

/**
 * Reads the body with src/lib/spooled-json.ts: keys, numbers and ordinary strings within `bodyLimit`, the strings
 * at `spill` paths written to the store as they arrive. A refusal while the client is still sending closes the
 * connection rather than reading on.
 */
export async function readSpooledBody(
  req: Request,
  res: { setHeader(name: string, value: string): unknown },
  spill: (path: readonly (string | number)[]) => boolean,
  store: SpoolStore,
  bodyLimit: number,
  requireJsonType: boolean,
): Promise<{ value: unknown; spooled: SpooledString[] }> {
  const close = () => {
    if (!req.complete) res.setHeader('Connection', 'close');
  };
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    close();
    throw refuse('unsupported_media_type', 'Send the body without a Content-Encoding.');
  }
  if (requireJsonType && !req.is('application/json') && !req.is('application/*+json')) {
    close();
    throw refuse('unsupported_media_type', 'Send the body as application/json.');
  }
  if (Number(req.headers['content-length'] ?? 0) > store.maxBytes) {
    close();
    throw refuse('payload_too_large', `The request body exceeds ${store.maxBytes} bytes.`);
  }
  try {
    // Not destroyed when the read stops early: the refusal is still answered on this connection (then closed).
    return await readSpooledJson(req.iterator({ destroyOnReturn: false }), {
      maxBytes: store.maxBytes,
      maxInlineBytes: bodyLimit,
      maxDepth: MAX_JSON_DEPTH,
      maxValues: MAX_JSON_VALUES,
      spill,
      store: (text, maxChars) => store.store(text, maxChars),
      remove: (key) => store.remove(key),
    });
  } catch (err) {
    close();
    if (err instanceof SpoolError) throw refusal(err);
    throw err;
  }
}

/** After the handler: spooled strings nobody took on are removed (a refusal, a status record, a duplicate). */
export async function releaseSpooled(spooled: SpooledString[] | undefined, store: SpoolStore | undefined, log: { warn(o: object, msg: string): void }): Promise<void> {
  if (!spooled || !store) return;
  for (const s of spooled) {
    if (s.adopted || !s.key) continue;
    await store.remove(s.key).catch((err: Error) => log.warn({ err_code: 'spool_not_removed', cause: err.message }, 'a spooled body part could not be removed (the staged sweep will)'));
  }
}
