/**
 * Every refusal the service makes, mapped to its status in one place (RFC 9457 problem details).
 * Handlers throw these; the error middleware renders them. `code` is the stable, machine-readable name.
 */
export interface FieldError {
  path: string;
  message: string;
}

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

export const validationFailed = (errors: FieldError[], detail = 'The request did not match its schema.') =>
  new AppError(400, 'validation_failed', 'Validation failed', detail, { errors });

export const unauthenticated = (detail = 'A valid bearer credential is required.') =>
  new AppError(401, 'unauthenticated', 'Unauthenticated', detail, {
    headers: { 'WWW-Authenticate': 'Bearer realm="helpdesk"' },
  });

export const insufficientRole = (floor: string) =>
  new AppError(403, 'insufficient_role', 'Insufficient role', `This operation requires the ${floor} role or above.`);

export const insufficientScope = (needed: string) =>
  new AppError(403, 'insufficient_scope', 'Insufficient scope', `This API key lacks a scope covering ${needed}.`);

export const notFound = (what = 'resource') =>
  new AppError(404, 'not_found', 'Not found', `No such ${what}.`);

export const conflict = (code: string, detail: string) => new AppError(409, code, 'Conflict', detail);

export const unprocessable = (code: string, detail: string, errors?: FieldError[]) =>
  new AppError(422, code, 'Unprocessable content', detail, errors ? { errors } : {});

export const forbidden = (code: string, detail: string) => new AppError(403, code, 'Forbidden', detail);

export const dependencyUnavailable = (which: string, retryAfterSeconds = 5) =>
  new AppError(503, 'dependency_unavailable', 'Service unavailable', `${which} is unreachable; retry later.`, {
    headers: { 'Retry-After': String(retryAfterSeconds) },
  });
