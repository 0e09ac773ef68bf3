import type { Readable } from 'node:stream';
import type { IntakeOutcome } from '../intake/edge';

/** What an operation's handler answers. */
export interface HandlerResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** The request was a redelivery answered from a dedupe ledger (counted in helpdesk_dedupe_hits_total). */
  duplicate?: boolean;
  /** Versioned operations: the resource's version, sent as its strong ETag. */
  version?: string;
  /**
   * Fields of the body already checked against the response schema and serialized (UTF-8 JSON), sent as they
   * are after the rest of the body: a ticket's timeline, rendered once per version and kept, so a read does
   * not parse, check and serialize fifty events again. `body` holds every other field.
   */
  rendered?: Record<string, Buffer>;
  /**
   * A long-lived answer (Server-Sent Events): the router sends the headers, then hands the writer over until
   * it returns or the client goes away (`signal`), then ends the answer. A domain's live feed gets here framed
   * by `sse(run)` (src/http/sse.ts): domains write items, never these bytes.
   */
  stream?: (out: StreamWriter) => Promise<void>;
  /** An answer of bytes (a file's content): streamed as it is read, with `status` and `headers` (Content-Type, Content-Length…) as given. */
  bytes?: Readable;
  /** An answer that is not JSON (a provider's own format: TwiML, a handshake's plain-text challenge). */
  text?: { contentType: string; body: string };
}

/**
 * Where a streaming handler writes. Backpressure is the handler's to honour: `write` says whether the client's
 * buffer is still below the high-water mark, and `drained` waits until it is, or says the client stayed behind.
 */
export interface StreamWriter {
  /** Queues a chunk; false when the client's buffer is now at or above the high-water mark (or the client is gone). */
  write(chunk: string | Buffer): boolean;
  /** True once the buffer is below the high-water mark; false when it is still above it after `ms`, or the client left. */
  drained(ms: number): Promise<boolean>;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

/** An intake's outcome as HTTP: 202 when the worker had not answered in time (still written once), else 200. */
export const intakeAnswer = (o: IntakeOutcome): HandlerResult => ({
  status: o.accepted ? 202 : 200,
  body: o.body,
  ...(o.duplicate ? { duplicate: true } : {}),
});
