import { types } from 'node:util';
import type { z } from 'zod';

/**
 * What the domains refuse with: a stable code, a detail that says why, and (for field problems) the fields.
 * No HTTP here. Each code's kind is in one table below, with the detail the OpenAPI document shows as its
 * example; src/http/errors.ts maps a kind to a status and title, once, for every code. Adding a code is one
 * row here.
 */

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

/** The kinds of refusal, by what the caller must do about them. */
export type ErrorKind =
  | 'invalid' // fix the request
  | 'unauthenticated' // present a valid credential or signature
  | 'forbidden' // this caller may not
  | 'not_found'
  | 'conflict' // the resource's state forbids it now
  | 'precondition' // the caller's If-Match names a version that is no longer current
  | 'too_large'
  | 'range' // the byte range asked for lies outside the resource
  | 'unsupported_media'
  | 'unprocessable' // well-formed, but names something that does not exist or cannot be
  | 'throttled' // retry after the given time
  | 'upstream' // a provider we depend on failed; retry
  | 'unavailable'; // a backing service or this process is unavailable; retry

/**
 * Every code a domain refuses with: its kind, and a realistic detail (as the services word it, placeholders
 * filled in) for the OpenAPI examples.
 */
export const ERRORS = {
  not_found: ['not_found', 'No such ticket.'],
  unauthenticated: ['unauthenticated', 'A valid bearer credential is required.'],
  insufficient_role: ['forbidden', 'This operation requires the admin role or above.'],
  insufficient_scope: ['forbidden', 'This API key lacks a scope covering tickets:write.'],
  validation_failed: ['invalid', 'The request did not match its schema.'],
  payload_too_complex: ['invalid', 'body_html has elements nested more than 100 deep.'],
  dependency_unavailable: ['unavailable', 'PostgreSQL is unreachable; retry later.'],
  throttled: ['throttled', 'This channel is receiving more than its rate; retry later.'],
  scope_invalid: ['unprocessable', 'One or more scopes cannot be granted by this deployment.'],
  agent_unknown: ['unprocessable', 'No agent 5b0e4c1d-8a7f-4e2b-9c3d-1f6a2b7c8d9e exists in this workspace.'],
  member_exists: ['conflict', 'This workspace already has a member with this email.'],
  realm_subject_taken: ['conflict', 'This realm subject is already bound to another member of this workspace.'],
  member_invited: ['conflict', 'This member has not signed in yet; only their role can be changed.'],
  last_owner: ['conflict', 'The workspace must keep at least one active owner.'],
  member_deactivated: ['forbidden', 'Your membership in this workspace is deactivated.'],
  customer_exists: ['conflict', 'A customer with this email already exists in the workspace.'],
  customer_unknown: ['unprocessable', 'No such customer in this workspace.'],
  assignee_unknown: ['unprocessable', 'The assignee is not an active member of this workspace.'],
  team_unknown: ['unprocessable', 'No such team in this workspace.'],
  illegal_transition: ['conflict', 'A solved ticket cannot move to pending; allowed: none.'],
  ticket_merged: ['conflict', 'Ticket 3f2b8c4e-6a1d-4e7f-9b2c-5d8e1a4f7c3b is merged; merged tickets are terminal.'],
  merge_self: ['invalid', 'A ticket cannot be merged into itself.'],
  whatsapp_window_closed: ['conflict', 'The customer last wrote on WhatsApp 26 hours ago; past 24 hours only an approved template may be sent (send template: {name, language}).'],
  reply_too_long: ['invalid', 'A Telegram message holds at most 4096 characters; this reply has 5210.'],
  template_not_allowed: ['invalid', 'A template reply is a WhatsApp feature; this ticket came in by sms.'],
  delivery_not_retryable: ['conflict', 'This reply was sent; only a failed, blocked or unknown delivery can be sent again.'],
  reopen_not_allowed: ['conflict', 'Only a solved or closed ticket can be reopened; this one is open.'],
  member_unknown: ['unprocessable', 'The user is not a member of this workspace.'],
  team_member_exists: ['conflict', 'The user is already in this team.'],
  no_eligible_member: ['conflict', 'No member of this team can take the ticket now; it was not assigned.'],
  filter_unknown: ['unprocessable', 'GET /v1/tickets does not understand the filter(s) assignee.'],
  filter_invalid: ['unprocessable', 'One or more filter values are not valid for GET /v1/tickets.'],
  macro_disabled: ['conflict', 'This macro is disabled; enable it before applying it.'],
  channel_credential_misplaced: [
    'invalid',
    'An OAuth token does not belong in a channel config (found at config.access_token); connect the mailbox with POST /v1/channels/email/oauth/{mailprovider}/complete, which stores tokens encrypted.',
  ],
  channel_payload_invalid: ['invalid', 'The web_chat adapter cannot read this payload: web_chat payload is invalid: text must not be blank.'],
  channel_adapter_unavailable: ['invalid', 'The instagram channel has no adapter yet; messages cannot be ingested.'],
  oauth_state_invalid: ['invalid', 'The state is unknown, expired or already used; start the connection again.'],
  oauth_state_mismatch: ['forbidden', 'This state was minted for another workspace; complete the connection from the workspace that started it.'],
  oauth_code_invalid: ['invalid', 'invalid_grant; the code may be expired or already used — start the connection again.'],
  mail_provider_not_configured: ['conflict', 'This deployment has no google OAuth client configured; an operator must set its client id and secret.'],
  mail_provider_unavailable: ['upstream', 'google token endpoint answered 503; the state is still valid, retry the same completion shortly.'],
  signature_invalid: ['unauthenticated', 'The webhook signature is missing, does not match the body, or is outside the accepted time window.'],
  hook_signature_invalid: ['unauthenticated', 'The X-Twilio-Signature is missing or does not match; nothing was recorded.'],
  signature_required: ['unauthenticated', 'This deployment accepts only signed webhooks; set a signing secret on the integration and in the provider.'],
  webhook_payload_invalid: ['invalid', 'Not a readable zendesk ticket event: ticket event without a ticket id.'],
  cap_order: ['unprocessable', 'The daily cap may not exceed the monthly cap.'],
  brand_key_unknown: [
    'unprocessable',
    '"logoURL" is not a branding key; the keys are logo_url, logoUrl, logo, favicon_url, faviconUrl, favicon, brand_color, brandColor, brand_colour, color, colour, primary_color, title, site_title, siteTitle, tagline, tag_line, tagLine.',
  ],
  brand_value_invalid: ['unprocessable', '"brand_color" must be a hex colour: #rgb or #rrggbb.'],
  brand_key_duplicate: ['unprocessable', '"logo" and "logo_url" both set the logo; send one of them.'],
  help_centre_required: ['invalid', 'This workspace has several help centres: name one with help_centre_id.'],
  subdomain_taken: ['conflict', 'northwind.help.example.com is already in use; choose another label.'],
  subdomain_reserved: ['unprocessable', 'www.help.example.com is reserved for the platform; choose another label.'],
  no_conflict: ['conflict', 'This translation has no conflict: no source update arrived after a local edit.'],
  idempotency_key_invalid: ['invalid', 'Idempotency-Key must be 1 to 255 printable ASCII characters.'],
  idempotency_key_reused: ['unprocessable', 'This Idempotency-Key was used for a different request; use a new key for a new request.'],
  idempotency_key_in_use: ['conflict', 'A request with this Idempotency-Key is still being processed; retry after it answers.'],
  precondition_failed: ['precondition', 'The ticket changed since the ETag you sent (If-Match "7", now "9"); read it again and reapply your change.'],
  event_type_unknown: ['unprocessable', 'Unknown event type(s): ticket.exploded; the types are ticket.created, ticket.updated, message.created.'],
  endpoint_url_refused: ['unprocessable', 'The endpoint URL must be https://.'],
  endpoint_disabled: ['conflict', 'This endpoint is disabled; enable it (PATCH enabled: true) before replaying events to it.'],
  integration_limit_reached: ['conflict', 'A workspace can hold at most 20 integrations; delete one first.'],
  endpoint_limit_reached: ['conflict', 'A workspace can hold at most 20 webhook endpoints; delete one first.'],
  visitor_token_invalid: ['unauthenticated', 'The visitor token is missing, malformed or not signed by this service; open a new session (POST /v1/web-chat/sessions).'],
  visitor_token_expired: ['unauthenticated', 'The visitor token expired at 2025-03-21T09:30:00.000Z; open a new session (POST /v1/web-chat/sessions).'],
  visitor_session_ended: ['unauthenticated', 'This web chat session has ended: the connection\'s inbound token was rotated or the connection disabled; open a new session.'],
  too_many_streams: ['throttled', 'This API key already has 10 event streams open, the most allowed; close one, or retry later.'],
  payload_too_large: ['too_large', 'The request body exceeds the size limit.'],
  file_too_large: ['too_large', 'The file is larger than 26214400 bytes (FILES_MAX_BYTES), the most one file may be; nothing was stored.'],
  files_quota_exceeded: ['too_large', 'This workspace holds 10737418240 of its 10737418240 bytes of files (FILES_WORKSPACE_QUOTA_BYTES); this file was not stored.'],
  upload_token_invalid: ['unprocessable', 'attachments[1] is not an upload of yours in this workspace that is stored and unused within its hour: unknown, expired, already used or not stored.'],
  attachment_unavailable: ['conflict', 'This file is quarantined: the scanner found Eicar-Test-Signature. It cannot be downloaded.'],
  attachment_not_sendable: ['unprocessable', 'report.pdf (12582912 bytes) cannot go by email through Postmark: a message carries at most 10000000 bytes of attachments.'],
  file_link_invalid: ['not_found', 'This file link is unknown, altered or expired.'],
  range_not_satisfiable: ['range', 'The file has 48213 bytes; the range bytes=50000- starts past its end.'],
  unsupported_media_type: ['unsupported_media', 'Send the body as application/json.'],
  // Search (issue 36): the query language of `q`, its limits, and a search PostgreSQL cancelled at SEARCH_TIMEOUT_MS.
  query_invalid: ['invalid', 'The search query is not valid: unclosed quote (opened at character 9).'],
  query_too_long: ['invalid', 'The search query has 913 characters; at most 512 (SEARCH_QUERY_MAX_CHARS) are accepted.'],
  query_too_complex: ['invalid', 'The search query holds 40 terms; at most 32 (SEARCH_QUERY_MAX_TERMS) are accepted.'],
  query_too_expensive: ['unprocessable', 'This search ran longer than 3000 ms (SEARCH_TIMEOUT_MS) and was stopped; add words or filters to narrow it.'],
  // Business hours (issue 37): schedules, and the SLA policies that count on them.
  schedule_unknown: ['unprocessable', 'No schedule 6f1d2c3b-4a5e-4f60-9b7c-8d9e0a1b2c3d in this workspace.'],
  schedule_in_use: ['conflict', 'SLA policy "Business hours (EU)" counts on this schedule, and a policy keeps its schedule: change the schedule\'s hours instead.'],
  sla_target_unreachable: ['unprocessable', 'The schedule gives 60 business minutes a week; a target of 525600 minutes could not be met within 10 years.'],
  ical_url_refused: ['unprocessable', 'The iCal feed URL must be https:// (or webcal://).'],
  // Customers as people (issue 38): update, merge, erasure.
  customer_merged: ['conflict', 'Customer 0b6f1c2d-3e4a-4b5c-8d6e-7f8091a2b3c4 was merged into 7d3f9a21-5b8c-4e6d-a1f0-2c9b8e7d6a54; use 7d3f9a21-5b8c-4e6d-a1f0-2c9b8e7d6a54.'],
  customer_erased: ['conflict', 'This customer was erased; an erased customer cannot be changed.'],
  handle_taken: ['conflict', 'A whatsapp_id handle sent belongs to customer 7d3f9a21-5b8c-4e6d-a1f0-2c9b8e7d6a54; merge the two customers instead.'],
  event_not_redactable: ['conflict', 'This event has no text of a message to redact (a status change); only messages and notes can be redacted.'],
  /** Answered by the operator dashboard (/admin/queues), not by an API operation. */
  cross_site_request: ['forbidden', 'State-changing requests to the operator dashboard must come from the dashboard itself.'],
} as const satisfies Record<string, readonly [ErrorKind, string]>;

export type ErrorCode = keyof typeof ERRORS;

export const kindOf = (code: ErrorCode): ErrorKind => ERRORS[code][0];

/** A refusal: thrown by services, rendered by the HTTP layer (status and title from the code's kind). */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly extra: { errors?: FieldError[]; retryAfterSeconds?: number; headers?: Record<string, string> } = {},
  ) {
    super(detail);
    this.name = 'DomainError';
  }
}

export const refuse = (code: ErrorCode, detail: string, errors?: FieldError[]) => new DomainError(code, detail, errors ? { errors } : {});

export const unauthenticated = (detail = 'A valid bearer credential is required.') => new DomainError('unauthenticated', detail);

export const insufficientRole = (floor: string) => new DomainError('insufficient_role', `This operation requires the ${floor} role or above.`);

export const insufficientScope = (needed: string) => new DomainError('insufficient_scope', `This API key lacks a scope covering ${needed}.`);

/** PostgreSQL refused a row a unique constraint already holds (SQLSTATE 23505). */
export const isUniqueViolation = (err: unknown) => (err as { code?: string })?.code === '23505';

export const notFound = (what = 'resource') => new DomainError('not_found', `No such ${what}.`);

export const validationFailed = (errors: FieldError[], detail = 'The request did not match its schema.') =>
  new DomainError('validation_failed', detail, { errors });

/** An explicit limit on size, nesting or count was passed: `errors` names each field and its limit. */
export const payloadTooComplex = (errors: FieldError[]) =>
  new DomainError('payload_too_complex', errors.map((e) => e.message).join('; '), { errors });

export const dependencyUnavailable = (which: string, retryAfterSeconds = 5) =>
  new DomainError('dependency_unavailable', `${which} is unreachable; retry later.`, { retryAfterSeconds });

/** A merged ticket is closed to changes: the one refusal every domain that writes to tickets answers. */
export const ticketMerged = (id: string) => new DomainError('ticket_merged', `Ticket ${id} is merged; merged tickets are terminal.`);

const PG_UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);

/**
 * A prepared statement whose tables changed shape under it (a migration added a column to a table it reads
 * with `*`, during a rolling deploy) fails with this once per connection: PostgreSQL re-plans it after DDL but
 * refuses a different row type. src/db/named-statements.ts prepares it afresh; a transaction it broke is
 * answered 503, worth a retry.
 */
export const isStalePreparedStatement = (err: unknown): boolean =>
  (err as { code?: unknown })?.code === '0A000' && String((err as Error)?.message).includes('cached plan must not change result type');

/** A statement PostgreSQL cancelled: statement_timeout (SQLSTATE 57014, also an operator's pg_cancel_backend). */
export const isQueryCanceled = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === '57014';

/**
 * Recognises a lost PostgreSQL or Redis so the caller gets a 503 with Retry-After instead of a 500.
 * Transactions roll back on these errors, so nothing is half-written.
 */
export function asDependencyError(err: unknown): DomainError | null {
  // isNativeError also recognises errors made in another realm (Node's own, seen from a vm context such as jest's).
  if (!(err instanceof Error) && !types.isNativeError(err)) return null;
  const code = (err as { code?: unknown }).code;
  const message = err.message ?? '';
  if (typeof code === 'string' && (PG_UNAVAILABLE_CODES.has(code) || NET_CODES.has(code))) {
    return dependencyUnavailable('A backing service');
  }
  if (isStalePreparedStatement(err)) return dependencyUnavailable('PostgreSQL', 1);
  if (
    /timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error/i.test(message)
  ) {
    return dependencyUnavailable('PostgreSQL');
  }
  if (
    err.name === 'MaxRetriesPerRequestError' ||
    /Stream isn't writeable|Connection is closed|enableOfflineQueue/i.test(message)
  ) {
    return dependencyUnavailable('Redis');
  }
  return null;
}

/**
 * What a write was conditioned on (`If-Match`): any current version (`*`), or one of these versions (strong
 * comparison: a weak tag never matches).
 */
export type VersionCondition = '*' | string[];

/** Refuses the write (412 precondition_failed) unless the resource's current version is one the caller named. */
export function requireVersion(condition: VersionCondition | undefined, what: string, version: string | number): void {
  const current = String(version);
  if (condition === undefined || condition === '*' || condition.includes(current)) return;
  throw new DomainError('precondition_failed', `The ${what} changed since the ETag you sent (If-Match ${condition.map((v) => `"${v}"`).join(', ')}, now "${current}"); read it again and reapply your change.`);
}
