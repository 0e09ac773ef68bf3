/**
 * Every refusal the service makes, mapped to its status in one place (RFC 9457 problem details).
 * Handlers throw these; the error middleware renders them. `code` is the stable, machine-readable name.
 */
import type { z } from 'zod';

export interface FieldError {
  path: string;
  message: string;
}

/** A zod error as the `errors` list of a problem body: dotted paths under `prefix` (body, query…). */
export const toFieldErrors = (error: z.ZodError, prefix = ''): FieldError[] =>
  error.issues.map((i) => ({
    path: [prefix, ...i.path.map(String)].filter(Boolean).join('.') || '(root)',
    message: i.code === 'unrecognized_keys' ? `unknown field(s): ${i.keys.join(', ')}` : i.message,
  }));

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

/** An explicit limit on size, nesting or count was passed: `errors` names each field and its limit. */
export const payloadTooComplex = (errors: FieldError[]) =>
  new AppError(400, 'payload_too_complex', 'Payload too complex', errors.map((e) => e.message).join('; '), { errors });

export const unprocessable = (code: string, detail: string, errors?: FieldError[]) =>
  new AppError(422, code, 'Unprocessable content', detail, errors ? { errors } : {});

export const forbidden = (code: string, detail: string) => new AppError(403, code, 'Forbidden', detail);

export const dependencyUnavailable = (which: string, retryAfterSeconds = 5) =>
  new AppError(503, 'dependency_unavailable', 'Service unavailable', `${which} is unreachable; retry later.`, {
    headers: { 'Retry-After': String(retryAfterSeconds) },
  });

/** A process draining after SIGTERM: another process (or this service after its restart) will answer. */
export const shuttingDown = () =>
  new AppError(503, 'shutting_down', 'Service unavailable', 'This API process is shutting down; retry (another process will answer).', {
    headers: { 'Retry-After': '1' },
  });

/**
 * Every domain code an operation may answer, with its status: the OpenAPI document lists them per operation
 * from this table, and `Operation.errors` can only name codes that are here.
 */
export const DOMAIN_ERRORS = {
  scope_invalid: 422,
  agent_unknown: 422,
  member_exists: 409,
  realm_subject_taken: 409,
  member_invited: 409,
  last_owner: 409,
  member_deactivated: 403,
  customer_exists: 409,
  customer_unknown: 422,
  assignee_unknown: 422,
  team_unknown: 422,
  illegal_transition: 409,
  ticket_merged: 409,
  merge_self: 400,
  reopen_not_allowed: 409,
  member_unknown: 422,
  team_member_exists: 409,
  no_eligible_member: 409,
  filter_unknown: 422,
  filter_invalid: 422,
  macro_disabled: 409,
  channel_credential_misplaced: 400,
  channel_payload_invalid: 400,
  channel_adapter_unavailable: 400,
  oauth_state_invalid: 400,
  oauth_state_mismatch: 403,
  oauth_code_invalid: 400,
  mail_provider_not_configured: 409,
  mail_provider_unavailable: 502,
  signature_invalid: 401,
  signature_required: 401,
  webhook_payload_invalid: 400,
  cap_order: 422,
  brand_key_unknown: 422,
  brand_value_invalid: 422,
  brand_key_duplicate: 422,
  help_centre_required: 400,
  subdomain_taken: 409,
  subdomain_reserved: 422,
  no_conflict: 409,
  payload_too_complex: 400,
  throttled: 429,
  integration_limit_reached: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  /** Answered by the operator dashboard (/admin/queues), not by an API operation. */
  cross_site_request: 403,
} as const;

export type DomainErrorCode = keyof typeof DOMAIN_ERRORS;
