/**
 * The HTTP face of every refusal (RFC 9457 problem details): a domain code's status and title come from its
 * kind, here and nowhere else. Services throw `DomainError`s (src/lib/errors.ts); `problemOf` turns them
 * into the `AppError` the error handler renders. `AppError` itself is built only for what exists at the HTTP
 * layer alone (a wrong method, an internal error, a draining process).
 */
import { DomainError, ERRORS, kindOf, type ErrorCode, type ErrorKind, type FieldError } from '../lib/errors';

export { toFieldErrors, type FieldError } from '../lib/errors';

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly title: string,
    readonly detail: string,
    readonly extra: { errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(detail);
    this.name = 'AppError';
  }
}

/** Each kind's status and title: the one place a domain refusal becomes HTTP. */
const KIND_HTTP: Record<ErrorKind, { status: number; title: string }> = {
  invalid: { status: 400, title: 'Bad request' },
  unauthenticated: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  not_found: { status: 404, title: 'Not found' },
  conflict: { status: 409, title: 'Conflict' },
  precondition: { status: 412, title: 'Precondition failed' },
  too_large: { status: 413, title: 'Payload too large' },
  range: { status: 416, title: 'Range not satisfiable' },
  unsupported_media: { status: 415, title: 'Unsupported media type' },
  unprocessable: { status: 422, title: 'Unprocessable content' },
  throttled: { status: 429, title: 'Too many requests' },
  upstream: { status: 502, title: 'Bad gateway' },
  unavailable: { status: 503, title: 'Service unavailable' },
};

/** Codes whose title says more than their kind's. */
const TITLES: Partial<Record<ErrorCode, string>> = {
  validation_failed: 'Validation failed',
  payload_too_complex: 'Payload too complex',
  unauthenticated: 'Unauthenticated',
  insufficient_role: 'Insufficient role',
  insufficient_scope: 'Insufficient scope',
};

export const statusOf = (code: ErrorCode): number => KIND_HTTP[kindOf(code)].status;
export const titleOf = (code: ErrorCode): string => TITLES[code] ?? KIND_HTTP[kindOf(code)].title;
/** The OpenAPI example detail of a code. */
export const exampleOf = (code: ErrorCode): string => ERRORS[code][1];

/** Every domain code with its status: what `Operation.errors` may name and the OpenAPI document lists. */
export const DOMAIN_ERRORS = Object.fromEntries(Object.keys(ERRORS).map((c) => [c, statusOf(c as ErrorCode)])) as Record<ErrorCode, number>;
export type DomainErrorCode = ErrorCode;

function headersOf(err: DomainError): Record<string, string> | undefined {
  if (err.code === 'unauthenticated') return { 'WWW-Authenticate': 'Bearer realm="helpdesk"' };
  const headers = { ...err.extra.headers, ...(err.extra.retryAfterSeconds !== undefined ? { 'Retry-After': String(err.extra.retryAfterSeconds) } : {}) };
  return Object.keys(headers).length > 0 ? headers : undefined;
}

/** A domain refusal as the problem the HTTP layer answers. */
export function toProblem(err: DomainError): AppError {
  const headers = headersOf(err);
  return new AppError(statusOf(err.code), err.code, titleOf(err.code), err.detail, {
    ...(err.extra.errors ? { errors: err.extra.errors } : {}),
    ...(headers ? { headers } : {}),
  });
}

/** The problem an error is answered with, when it is a refusal (an `AppError` or a `DomainError`). */
export function problemOf(err: unknown): AppError | null {
  if (err instanceof AppError) return err;
  if (err instanceof DomainError) return toProblem(err);
  return null;
}

/** A process draining after SIGTERM: another process (or this service after its restart) will answer. */
export const shuttingDown = () =>
  new AppError(503, 'shutting_down', 'Service unavailable', 'This API process is shutting down; retry (another process will answer).', {
    headers: { 'Retry-After': '1' },
  });
