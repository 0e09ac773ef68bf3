import { sample } from 'openapi-sampler';
import { z } from 'zod';
import {
  AppError,
  dependencyUnavailable,
  DOMAIN_ERRORS,
  insufficientRole,
  insufficientScope,
  notFound,
  unauthenticated,
  validationFailed,
  type DomainErrorCode,
} from './errors';
import type { Operation } from './operation';
import { authFailuresThrottled } from './auth-throttle';
import { toFieldErrors } from './errors';

const GUARD_ERRORS: Record<number, string[]> = {
  400: ['validation_failed'],
  401: ['unauthenticated'],
  403: ['insufficient_role', 'insufficient_scope', 'member_deactivated'],
  404: ['not_found'],
  // Failed authentications from one client address past AUTH_FAILURE_RATE_POINTS (src/http/auth-throttle.ts).
  429: ['throttled'],
  503: ['dependency_unavailable', 'shutting_down'],
};

/** What the body parser answers before any operation runs, for every operation that takes a body. */
const BODY_ERRORS: DomainErrorCode[] = ['payload_too_large', 'payload_too_complex', 'unsupported_media_type'];


const jsonSchema = (schema: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<string, unknown>;

type JsonSchema = Record<string, unknown>;

/**
 * openapi-sampler's example for a JSON schema (deterministic: the same schema always gives the same value).
 * It takes `const`, then `examples[0]` (what zod's `.meta({ examples })` emits), then `enum[0]`, then
 * `default`, and only then makes up a value from the type and format. The schema is its own document for
 * the `$ref`s zod emits into `$defs`.
 */
function sampled(schema: JsonSchema, skipNonRequired: boolean): unknown {
  const bare = withoutSafeIntegerBounds(schema) as JsonSchema;
  return sample(bare as Parameters<typeof sample>[0], { skipNonRequired, quiet: true }, bare);
}

/** zod bounds every `.int()` by the safe-integer range, whose lower end the sampler would show as the value. */
function withoutSafeIntegerBounds(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutSafeIntegerBounds);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([k, x]) => !((k === 'minimum' || k === 'maximum') && Math.abs(x as number) === Number.MAX_SAFE_INTEGER))
      .map(([k, x]) => [k, withoutSafeIntegerBounds(x)]),
  );
}

/**
 * The example for a body: the hand-written one if the row has it, else the fullest sample the zod schema
 * accepts (every property, then required ones only: refinements such as "exactly one of" can refuse the
 * first). Falls back to the full sample so that a schema no sample satisfies shows up in the tests.
 */
function exampleFor(schema: z.ZodType, json: JsonSchema, handWritten: unknown): unknown {
  if (handWritten !== undefined) return handWritten;
  const full = sampled(json, false);
  if (schema.safeParse(full).success) return full;
  const required = sampled(json, true);
  return schema.safeParse(required).success ? required : full;
}

/** A JSON body's media type: its schema, and the example for it. */
function jsonContent(schema: z.ZodType, io: 'input' | 'output', handWritten: unknown) {
  const json = jsonSchema(schema, io);
  return { 'application/json': { schema: json, example: exampleFor(schema, json, handWritten) } };
}

/** Path and query values are strings on the wire, whatever type the sampler picked. */
const asParameterValue = (v: unknown) => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : v);

/**
 * Each parameter's example: hand-written on the row, else sampled from the input schema, else from the output
 * schema as a string. The last is for values zod parses with a transform (an integer from its digits, a
 * boolean from "true"): zod keeps no `examples` or `default` on the input side of a transform, but the output
 * side has the default and its bounds, which is the value a client writes in the URL.
 */
function parametersOf(schema: z.ZodType | undefined, where: 'path' | 'query', handWritten: Record<string, string> = {}) {
  if (!schema || !(schema instanceof z.ZodObject)) return [];
  const shape = schema.shape as Record<string, z.ZodType>;
  // Sampled as one object so each value is sampled under its own name (uuid samples are seeded by it).
  const input = sampled(jsonSchema(schema, 'input'), false) as Record<string, unknown>;
  const output = sampled(jsonSchema(schema, 'output'), false) as Record<string, unknown>;
  return Object.entries(shape).map(([name, s]) => {
    const sampledValue = [input[name], output[name]].map(asParameterValue).find((c) => c !== undefined && s.safeParse(c).success);
    return {
      name,
      in: where,
      required: where === 'path' || !s.safeParse(undefined).success,
      schema: jsonSchema(s, 'input'),
      example: handWritten[name] ?? sampledValue ?? asParameterValue(input[name]),
    };
  });
}

const problem = {
  type: 'object',
  required: ['type', 'title', 'status', 'code'],
  properties: {
    type: { type: 'string' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    code: { type: 'string' },
    errors: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } } },
    request_id: { type: 'string' },
  },
};

/** The detail each domain code is answered with (as the services word it; placeholders filled in). */
const DOMAIN_DETAILS: Record<DomainErrorCode, string> = {
  scope_invalid: 'One or more scopes cannot be granted by this deployment.',
  agent_unknown: 'No agent 5b0e4c1d-8a7f-4e2b-9c3d-1f6a2b7c8d9e exists in this workspace.',
  member_exists: 'This workspace already has a member with this email.',
  realm_subject_taken: 'This realm subject is already bound to another member of this workspace.',
  member_invited: 'This member has not signed in yet; only their role can be changed.',
  last_owner: 'The workspace must keep at least one active owner.',
  member_deactivated: 'Your membership in this workspace is deactivated.',
  customer_exists: 'A customer with this email already exists in the workspace.',
  customer_unknown: 'No such customer in this workspace.',
  assignee_unknown: 'The assignee is not an active member of this workspace.',
  team_unknown: 'No such team in this workspace.',
  illegal_transition: 'A solved ticket cannot move to pending; allowed: none.',
  ticket_merged: 'Ticket 3f2b8c4e-6a1d-4e7f-9b2c-5d8e1a4f7c3b is merged; merged tickets are terminal.',
  merge_self: 'A ticket cannot be merged into itself.',
  reopen_not_allowed: 'Only a solved or closed ticket can be reopened; this one is open.',
  member_unknown: 'The user is not a member of this workspace.',
  team_member_exists: 'The user is already in this team.',
  no_eligible_member: 'No member of this team can take the ticket now; it was not assigned.',
  filter_unknown: 'GET /v1/tickets does not understand the filter(s) assignee.',
  filter_invalid: 'One or more filter values are not valid for GET /v1/tickets.',
  macro_disabled: 'This macro is disabled; enable it before applying it.',
  channel_credential_misplaced:
    'An OAuth token does not belong in a channel config (found at config.access_token); connect the mailbox with POST /v1/channels/email/oauth/{mailprovider}/complete, which stores tokens encrypted.',
  channel_payload_invalid: 'The web_chat adapter cannot read this payload: web_chat payload is invalid: text must not be blank.',
  channel_adapter_unavailable: 'The instagram channel has no adapter yet; messages cannot be ingested.',
  oauth_state_invalid: 'The state is unknown, expired or already used; start the connection again.',
  oauth_state_mismatch: 'This state was minted for another workspace; complete the connection from the workspace that started it.',
  oauth_code_invalid: 'invalid_grant; the code may be expired or already used — start the connection again.',
  mail_provider_not_configured: 'This deployment has no google OAuth client configured; an operator must set its client id and secret.',
  mail_provider_unavailable: 'google token endpoint answered 503; the state is still valid, retry the same completion shortly.',
  signature_invalid: 'The webhook signature is missing, does not match the body, or is outside the accepted time window.',
  signature_required: 'This deployment accepts only signed webhooks; set a signing secret on the integration and in the provider.',
  webhook_payload_invalid: 'Not a readable zendesk ticket event: ticket event without a ticket id.',
  cap_order: 'The daily cap may not exceed the monthly cap.',
  brand_key_unknown: '"logoURL" is not a branding key; the keys are logo_url, logoUrl, logo, favicon_url, faviconUrl, favicon, brand_color, brandColor, brand_colour, color, colour, primary_color, title, site_title, siteTitle, tagline, tag_line, tagLine.',
  brand_value_invalid: '"brand_color" must be a hex colour: #rgb or #rrggbb.',
  brand_key_duplicate: '"logo" and "logo_url" both set the logo; send one of them.',
  help_centre_required: 'This workspace has several help centres: name one with help_centre_id.',
  subdomain_taken: 'northwind.help.example.com is already in use; choose another label.',
  subdomain_reserved: 'www.help.example.com is reserved for the platform; choose another label.',
  no_conflict: 'This translation has no conflict: no source update arrived after a local edit.',
  payload_too_complex: 'body_html has elements nested more than 100 deep.',
  throttled: 'This channel is receiving more than its rate; retry later.',
  integration_limit_reached: 'A workspace can hold at most 20 integrations; delete one first.',
  payload_too_large: 'The request body exceeds the size limit.',
  unsupported_media_type: 'Send the body as application/json.',
  cross_site_request: 'State-changing requests to the operator dashboard must come from the dashboard itself.',
};

/** Titles the services give domain codes, by status (guard codes carry their own, from errors.ts). */
const DOMAIN_TITLES: Record<number, string> = {
  400: 'Bad request',
  401: 'Unauthorized',
  403: 'Forbidden',
  409: 'Conflict',
  413: 'Payload too large',
  415: 'Unsupported media type',
  422: 'Unprocessable content',
  429: 'Too many requests',
  502: 'Bad gateway',
};

const EXAMPLE_REQUEST_ID = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
const noQuery = z.strictObject({});

/** The guard's own refusal for `code`, built with the same factories the service throws. */
function guardProblem(op: Operation, code: string): AppError | undefined {
  const access = op.access === 'public' ? null : op.access;
  switch (code) {
    case 'validation_failed': {
      const body = op.body && !op.rawBody ? op.body.safeParse({}) : undefined;
      if (body && !body.success) return validationFailed(toFieldErrors(body.error, 'body'));
      const query = (op.query ?? noQuery).safeParse({ sort: 'newest' });
      return validationFailed(query.success ? [{ path: 'query.sort', message: 'unknown field(s): sort' }] : toFieldErrors(query.error, 'query'));
    }
    case 'unauthenticated':
      return unauthenticated();
    case 'insufficient_role':
      return insufficientRole(access?.floor ?? 'viewer');
    case 'insufficient_scope':
      return insufficientScope(access ? `${access.tag}:${access.action}` : 'the operation');
    case 'not_found':
      return notFound();
    case 'dependency_unavailable':
      return dependencyUnavailable('PostgreSQL');
    case 'throttled':
      return authFailuresThrottled(60);
    default:
      return undefined;
  }
}

/**
 * An example problem for one status of one operation: the operation's own domain code for that status when
 * it has one (the more telling refusal), else the guard's first.
 */
function problemExample(op: Operation, status: number, codes: Set<string>) {
  const own = (op.errors ?? []).find((c) => DOMAIN_ERRORS[c] === status);
  const code = own ?? [...codes][0]!;
  const err = own ? undefined : guardProblem(op, code);
  return {
    type: 'about:blank',
    title: err?.title ?? DOMAIN_TITLES[status] ?? 'Error',
    status,
    detail: err?.detail ?? DOMAIN_DETAILS[code as DomainErrorCode],
    code,
    ...(err?.extra.errors ? { errors: err.extra.errors } : {}),
    request_id: EXAMPLE_REQUEST_ID,
  };
}

/**
 * The OpenAPI 3.1 document, derived entirely from the operation table and its zod schemas. Every operation
 * carries examples (request body, each parameter, the success body and each problem): sampled from the
 * schemas, whose `.meta({ examples })` make them read like a helpdesk, or hand-written on the row.
 */
export function buildOpenApi(ops: Operation[], info: { version: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of ops) {
    const codesByStatus = new Map<number, Set<string>>();
    for (const [s, codes] of Object.entries(GUARD_ERRORS)) {
      if (op.access !== 'public' || s === '400' || s === '404' || s === '503') codesByStatus.set(Number(s), new Set(codes));
    }
    for (const code of [...(op.errors ?? []), ...(op.body ? BODY_ERRORS : [])]) {
      const s = DOMAIN_ERRORS[code];
      codesByStatus.set(s, (codesByStatus.get(s) ?? new Set()).add(code));
    }
    const responses: Record<string, unknown> = {
      [op.response.status]: {
        description: op.response.description,
        ...(op.response.schema ? { content: jsonContent(op.response.schema, 'output', op.example?.response) } : {}),
      },
    };
    for (const extra of op.alsoAnswers ?? []) {
      responses[extra.status] = {
        description: extra.description,
        ...(op.response.schema ? { content: jsonContent(op.response.schema, 'output', extra.example) } : {}),
      };
    }
    for (const [s, codes] of [...codesByStatus.entries()].sort((a, b) => a[0] - b[0])) {
      responses[s] = {
        description: `Problem: ${[...codes].join(', ')}`,
        content: {
          'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' }, example: problemExample(op, s, codes) },
        },
      };
    }
    const access = op.access === 'public' ? null : op.access;
    const pub = access === null;
    const scope = access ? `${access.tag}:${access.action}` : null;
    (paths[op.path] ??= {})[op.method] = {
      operationId: op.id,
      summary: op.summary,
      description: [op.description, access ? `Floor: ${access.floor}. Scope: ${scope}.` : 'Public: no credential is read.'].filter(Boolean).join('\n\n'),
      tags: [access ? access.tag : 'public-intake'],
      'x-floor': access ? access.floor : 'public',
      'x-scope': scope,
      security: pub ? [] : [{ bearer: [] }],
      parameters: [...parametersOf(op.params, 'path', op.example?.params), ...parametersOf(op.query, 'query', op.example?.query)],
      ...(op.body ? { requestBody: { required: true, content: jsonContent(op.body, 'input', op.example?.request) } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Helpdesk API', version: info.version },
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'An API key (sk_zr_…) or a realm access token (JWT).' },
      },
      schemas: { Problem: problem },
    },
    paths,
  };
}
