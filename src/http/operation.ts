import type { z } from 'zod';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { VersionCondition } from '../lib/errors';
import type { DomainErrorCode } from './errors';
import type { Role } from '../db/types';
import type { ScopeAction, ScopeTag } from '../domains/identity/scopes';
import type { Principal } from '../domains/identity/principal';
import type { HandlerResult } from './result';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface Access {
  floor: Role;
  tag: ScopeTag;
  action: ScopeAction;
}

export type { HandlerResult } from './result';

export interface OperationInput<P, Q, B> {
  /** Absent only on public operations (provider intake), which take no credential. */
  principal: Principal;
  params: P;
  query: Q;
  body: B;
  requestId: string;
  /** Event streams: the Last-Event-ID the (re)connecting client sent, if any. */
  lastEventId?: string;
  /**
   * Event streams: checks the request's credential again, live (revoked, removed, demoted, expired), and the
   * operation's floor and scope; resolves the caller as they are now, or throws the refusal a new request
   * would get. A stream outlives the check its request passed, so it asks again. The check answered started
   * after `notBefore` (performance.now() time); streams holding the same credential share one.
   */
  reauthorize?: (notBefore: number) => Promise<Principal>;
  /** Versioned operations: the If-Match the request sent, if any. */
  ifMatch?: VersionCondition;
  /** Operations with `rawBody`: the bytes exactly as sent (decompressed) and the request headers. */
  raw?: {
    body: Buffer;
    headers: Record<string, string | string[] | undefined>;
    url: { protocol: string; host: string; originalUrl: string };
    /** A spooled body (`spooledJson`): the JSON as read, its large strings in the store; `body` is then empty. */
    json?: unknown;
  };
  /** Operations with `streamBody`: the request body as it arrives, unread, and the request headers. */
  stream?: { body: Readable; headers: IncomingHttpHeaders };
  /** Operations with `readsHeaders`: those request headers (lower-case names), undefined when not sent. */
  headers?: Record<string, string | undefined>;
}

type Infer<T> = T extends z.ZodType ? z.output<T> : undefined;

/**
 * One row of the operation table: routing, the auth guard, validation and the OpenAPI document are all
 * derived from these fields, so they cannot drift apart.
 */
export interface Operation<
  S = never,
  P extends z.ZodType | undefined = z.ZodType | undefined,
  Q extends z.ZodType | undefined = z.ZodType | undefined,
  B extends z.ZodType | undefined = z.ZodType | undefined,
> {
  id: string;
  method: Method;
  /** OpenAPI-style path, e.g. /v1/api-keys/{key_id}. */
  path: string;
  summary: string;
  description?: string;
  /** 'public': no credential is read or required (provider intake routes). */
  access: Access | 'public';
  params?: P;
  query?: Q;
  body?: B;
  /**
   * The handler gets the body as bytes (and the headers) instead of parsed JSON: for signature checks over
   * exactly what was signed. Content type and JSON are then the handler's to check; `body` documents it.
   */
  rawBody?: boolean;
  /**
   * The handler gets the request body as a stream, unread (`stream`), instead of a parsed or buffered body: for
   * uploads, parsed as they arrive and written on without ever being held whole. The router reads nothing of it,
   * applies no body limit (the handler bounds what it reads), refuses a Content-Encoding (415) and takes no
   * Idempotency-Key (the body cannot be fingerprinted without reading it). Authentication, the floor and scope,
   * the budgets and the path and query checks run as for every operation, before any byte is read. OpenAPI
   * documents `mediaType` with `schema` as the request body.
   */
  streamBody?: { mediaType: string; schema: Record<string, unknown>; description?: string };
  /**
   * A JSON body that may be far larger than BODY_LIMIT_BYTES (an email with its files, which Postmark sends inside
   * the JSON). When `when` holds for the request's path parameters and the body is over BODY_LIMIT_BYTES or of
   * unknown length, it is read as it arrives (src/http/spooled-body.ts): the strings at `spill` paths go to the file
   * store as they arrive (the parsed body holds '' there; `spooledMember` says where the text went), the rest
   * within BODY_LIMIT_BYTES, the whole within INGEST_EMAIL_MAX_BYTES. With `rawBody` the handler gets the parsed
   * value as `raw.json`. Strings no handler adopted are removed after the answer.
   */
  spooledJson?: { when(params: Record<string, string>): boolean; spill(path: readonly (string | number)[]): boolean };
  /** Public intake: a 4xx refusal is charged to the client address's refusal budget (src/limits/refusals.ts). */
  chargeRefusals?: boolean;
  /**
   * A public read anyone may call (a help centre's search): every request takes a point from its client address's
   * budget (src/limits/public-reads.ts, PUBLIC_SEARCH_RATE_*) before its input is read; 429 throttled past it.
   */
  addressBudget?: boolean;
  /**
   * The answer is a Server-Sent Events stream (the handler answers `stream`); `Last-Event-ID` reaches the
   * handler as `lastEventId`, and OpenAPI documents `text/event-stream`.
   */
  eventStream?: boolean;
  /** What OpenAPI shows as the stream's example (event streams; the event log's by default). */
  streamExample?: string;
  /**
   * Request headers handed to the handler (`headers`): for a public operation that checks a credential of its
   * own (a web chat visitor token in `authorization`) or answers by `accept` (JSON or an event stream).
   */
  readsHeaders?: readonly string[];
  /**
   * Request headers a public operation checks itself (a provider's signature), documented as optional header
   * parameters; the router reads none of them (the handler gets them through `rawBody` or `readsHeaders`). An
   * `Authorization` entry (Postmark's basic authentication) is documented as an optional `providerBasic`
   * security requirement instead: OpenAPI ignores a header parameter of that name.
   */
  requestHeaders?: readonly { name: string; description: string; example?: string }[];
  /** Answers carry an ETag of their body; a matching If-None-Match gets 304 (clients polling rollups). */
  etag?: boolean;
  /**
   * The resource has a version (the handler answers it): answers carry it as a strong ETag, a GET whose
   * If-None-Match names it gets 304, and a write's If-Match reaches the handler (`ifMatch`) to be checked
   * against the locked row (412 precondition_failed when stale).
   */
  versioned?: boolean;
  /**
   * The answer carries a secret a client must not leave in a cache (a key or signing secret shown once, a bearer
   * token, a URL that is itself a credential): it is sent with `Cache-Control: no-store` (src/http/answer-headers.ts),
   * replays of an Idempotency-Key included, and OpenAPI documents the header on the success answer.
   */
  secretInAnswer?: boolean;
  /** `binary`: the answer is bytes (the handler answers `bytes`), documented as any media type, binary: a download is sent with its file's own sniffed type. */
  /**
   * `text`: media types the operation may answer as text instead of (or besides) JSON, as a provider's own format
   * (Twilio's TwiML as text/xml, Meta's handshake challenge as text/plain); the handler answers `text`.
   */
  response: { status: number; description: string; schema?: z.ZodType; binary?: boolean; text?: readonly string[] };
  /** Codes this operation can answer beyond the guard's own (documented in OpenAPI). */
  errors?: DomainErrorCode[];
  /**
   * Hand-written OpenAPI examples, preferred over the ones sampled from the schemas: for payloads a sampler
   * cannot make meaningful (a provider's webhook, a channel's ingest payload). Each part must parse with the
   * row's own schema (params/query per field); test/openapi.test.ts checks that.
   */
  example?: { request?: unknown; response?: unknown; params?: Record<string, string>; query?: Record<string, string> };
  /**
   * Replays of a large answer: an answer over IDEMPOTENCY_MAX_STORED_BYTES is not kept whole for an
   * Idempotency-Key; the operation keeps `pointer(answer)` (small JSON naming the resource it showed), and a
   * replay answers `read(pointer)`: the resource as it now stands, in the same schema. Operations without it
   * keep their answer whole (their answers are bounded by their own request's limits).
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the answer as the response schema parsed it
  replay?: { pointer: (answer: any) => Record<string, unknown>; read: (input: { principal: Principal; pointer: any }, services: S) => Promise<HandlerResult> };
  /**
   * Other success answers (e.g. 202 when the worker's answer did not come in time), in the same schema. With
   * `schema`, that status's body is documented on its own: `response.schema` is then a `z.union` holding it (every
   * answer is still parsed with `response.schema`, the allowlist), and the main status is documented as the
   * union's other options (`oneOf` when several). OpenAPI refuses a `schema` the union does not hold.
   */
  alsoAnswers?: { status: number; description: string; example: unknown; schema?: z.ZodType }[];
  /** `services` is the service container the app mounts the table with (generic: src/http knows no domain). */
  handler: (input: OperationInput<Infer<P>, Infer<Q>, Infer<B>>, services: S) => Promise<HandlerResult>;
}

/**
 * `defineOperation` for a service container type: an identity function that keeps each row's schema types
 * attached to its handler's input (src/define-operation.ts binds it to ApiServices, the API's container).
 */
export const operationsFor =
  <S>() =>
  <P extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined, B extends z.ZodType | undefined = undefined>(
    op: Operation<S, P, Q, B>,
  ): Operation<S> =>
    op as unknown as Operation<S>;
