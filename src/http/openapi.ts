import { sample } from 'openapi-sampler';
import { z } from 'zod';
import {
  dependencyUnavailable,
  notFound,
  unauthenticated,
  validationFailed,
  type DomainError,
  type ErrorCode,
} from '../lib/errors';
import { DOMAIN_ERRORS, exampleOf, titleOf, toProblem } from './errors';
import type { Access, Operation } from './operation';
import { listParamItems } from '../lib/paging';
import { takesIdempotencyKey } from './router';
import { authFailuresThrottled } from '../limits/auth-failures';

const GUARD_ERRORS: Record<number, string[]> = {
  400: ['validation_failed'],
  401: ['unauthenticated'],
  403: ['insufficient_role', 'insufficient_scope', 'member_deactivated'],
  404: ['not_found'],
  // Past the caller's or workspace's budget (src/limits/api.ts), or failed authentications from one client
  // address past AUTH_FAILURE_RATE_POINTS (src/limits/auth-failures.ts).
  429: ['throttled'],
  503: ['dependency_unavailable', 'shutting_down'],
};

/** What the body parser answers before any operation runs, for every operation that takes a body. */
const BODY_ERRORS: ErrorCode[] = ['payload_too_large', 'payload_too_complex', 'unsupported_media_type'];

/** What a streamed body (an upload) is refused with before its handler reads it; its limits are the operation's own codes. */
const STREAM_BODY_ERRORS: ErrorCode[] = ['unsupported_media_type'];

/** What an Idempotency-Key can be answered with, on every operation that takes one. */
const IDEMPOTENCY_ERRORS: ErrorCode[] = ['idempotency_key_invalid', 'idempotency_key_reused', 'idempotency_key_in_use'];

/** The budget headers every authenticated answer carries (IETF httpapi RateLimit header fields draft). */
const RATE_LIMIT_HEADERS = {
  'RateLimit-Policy': {
    description: 'The budgets this request counts against: `"caller"` (the API key, or the user of an access token) and `"workspace"`, each with its quota `q` and window `w` in seconds (API_RATE_POINTS, WORKSPACE_RATE_POINTS, API_RATE_WINDOW_SECONDS).',
    schema: { type: 'string', example: '"caller";q=6000;w=60, "workspace";q=20000;w=60' },
  },
  RateLimit: {
    description: 'What is left of each budget (`r`) and the seconds until its window resets (`t`).',
    schema: { type: 'string', example: '"caller";r=5999;t=60, "workspace";r=19999;t=60' },
  },
};

const ifMatchParameter = {
  name: 'If-Match',
  in: 'header',
  description:
    'No lost updates (RFC 9110): the ETag of the version you read. A change made on a stale read is refused with `412 precondition_failed` and nothing is written; `*` matches any current version. Weak tags (W/) never match a write.',
  schema: { type: 'string' },
  example: '"7"',
};

const lastEventIdParameter = {
  name: 'Last-Event-ID',
  in: 'header',
  description: 'The id of the last event received (EventSource sends it when it reconnects): the stream resumes right after it.',
  schema: { type: 'string', format: 'uuid' },
  example: '0b7f3c1e-5d2a-4c8e-9f61-3a4b5c6d7e8f',
};

const ifNoneMatchParameter = {
  name: 'If-None-Match',
  in: 'header',
  description: 'The ETag of the version you hold: `304 Not Modified` (no body) while it is still current.',
  schema: { type: 'string' },
  example: '"7"',
};

/** On the answers that carry a secret (`secretInAnswer`): no browser or proxy keeps it. */
const NO_STORE_HEADER = {
  'Cache-Control': { description: '`no-store`: the answer carries a secret (shown once, or a credential), which no cache may keep.', schema: { type: 'string', enum: ['no-store'] } },
};

const etagHeader = { ETag: { description: 'A strong entity tag of this version of the resource (send it back in If-Match or If-None-Match).', schema: { type: 'string', example: '"7"' } } };

const idempotencyKeyParameter = {
  name: 'Idempotency-Key',
  in: 'header',
  description:
    'Makes a retry safe (IETF httpapi Idempotency-Key draft): the first request with a key runs and its answer is kept for IDEMPOTENCY_TTL_SECONDS (24 h by default); a repeat with the same method, path and body answers the same status and body with `Idempotent-Replayed: true` and does nothing again. The same key with another body → 422 idempotency_key_reused; a repeat while the first still runs → 409 idempotency_key_in_use. Keys are per workspace and caller; 1 to 255 printable ASCII characters. A request answered with an error keeps nothing: a retry runs again.',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
  example: 'b5b1c2c4-6a3e-4f1b-9d0e-3c7a2f9e8d11',
};


/** Formats whose zod regex adds nothing a client needs beyond the format itself. */
const FORMATS_OVER_PATTERN = new Set(['uuid', 'guid', 'email', 'date-time', 'date', 'time']);

const jsonSchema = (schema: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
    // A query integer (intParam) is documented as an integer: the digits-only pattern of its string form goes.
    override: (ctx) => {
      if (ctx.jsonSchema.type === 'integer') delete ctx.jsonSchema.pattern;
      // zod bounds every `.int()` by the safe-integer range: a bound that says only that goes (every JSON number a
      // JavaScript client reads is one; a sampler, a docs renderer's included, would show its lower end as the value).
      for (const bound of ['minimum', 'maximum'] as const) if (Math.abs(ctx.jsonSchema[bound] as number) === Number.MAX_SAFE_INTEGER) delete ctx.jsonSchema[bound];
      // A format says what zod's regex for it says (uuid, email, date-time, date): the regex goes, once per field
      // it was repeated in (issue 35: the document referenced once, under 250 KB). Validators check the format.
      if (typeof ctx.jsonSchema.format === 'string' && FORMATS_OVER_PATTERN.has(ctx.jsonSchema.format)) delete ctx.jsonSchema.pattern;
      // A query boolean (boolParam): its string enum goes.
      if (ctx.jsonSchema.type === 'boolean') delete ctx.jsonSchema.enum;
      // A multi-value filter (listParam): documented as the array it parses to, sent as a repeated key or
      // comma-separated (parametersOf adds `style: form, explode: true` and says both are accepted).
      const list = listParamItems(ctx.zodSchema as unknown as z.ZodType);
      if (list) {
        const { $schema: _, ...items } = jsonSchema(list.item, io);
        for (const k of Object.keys(ctx.jsonSchema)) delete ctx.jsonSchema[k];
        Object.assign(ctx.jsonSchema, { type: 'array', minItems: 1, maxItems: list.max, items });
      }
    },
  }) as Record<string, unknown>;

type JsonSchema = Record<string, unknown>;


/**
 * The example for a body: the hand-written one if the row has it, else the fullest sample the zod schema
 * accepts (every property, then required ones only: refinements such as "exactly one of" can refuse the
 * first). Falls back to the full sample so that a schema no sample satisfies shows up in the tests.
 */
function exampleFor(components: Components, schema: z.ZodType, json: JsonSchema, handWritten: unknown): unknown {
  if (handWritten !== undefined) return handWritten;
  const full = components.sampled(json, false);
  if (schema.safeParse(full).success) return full;
  const required = components.sampled(json, true);
  return schema.safeParse(required).success ? required : full;
}

/** A timestamp field of an answer: every `…_at` and `…_due` we send is an ISO 8601 date-time. */
const TIMESTAMP_FIELD = /_(at|due)$/;

/**
 * Marks the answers' timestamps `format: date-time`, so generated clients type them as such: walks the
 * schema's object properties (nested objects and arrays included, `$defs` too).
 */
function markTimestamps(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(markTimestamps);
  if (node === null || typeof node !== 'object') return;
  const schema = node as Record<string, unknown>;
  const properties = schema.properties as Record<string, Record<string, unknown>> | undefined;
  for (const [name, prop] of Object.entries(properties ?? {})) {
    const types = ([] as unknown[]).concat(prop.type ?? (Array.isArray(prop.anyOf) ? (prop.anyOf as { type?: unknown }[]).map((a) => a.type) : []));
    if (TIMESTAMP_FIELD.test(name) && types.includes('string') && prop.format === undefined) {
      if (prop.type !== undefined) prop.format = 'date-time';
      else for (const alt of prop.anyOf as Record<string, unknown>[]) if (alt.type === 'string') alt.format = 'date-time';
    }
  }
  for (const value of Object.values(schema)) if (value !== null && typeof value === 'object') markTimestamps(value);
}

/** A component name OpenAPI accepts (and generators turn into a type name): what `.meta({ id })` may say. */
const COMPONENT_NAME = /^[A-Z][A-Za-z0-9]*$/;

/** Replaces zod's `#/$defs/<id>` references by the component each id was hoisted to. */
function pointRefs(node: unknown, names: Record<string, string>): unknown {
  if (Array.isArray(node)) return node.map((n) => pointRefs(n, names));
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => {
      if (k !== '$ref' || typeof v !== 'string' || !v.startsWith('#/$defs/')) return [k, pointRefs(v, names)];
      const id = v.slice('#/$defs/'.length);
      return [k, `#/components/schemas/${names[id] ?? id}`];
    }),
  );
}

/**
 * The document's named schemas. Every zod schema with `.meta({ id })` is written once under
 * `components.schemas` and referenced from the operations, so generated clients get one named type per
 * resource (Ticket, Customer, …) instead of one anonymous copy per operation. zod's output and input forms
 * of a schema differ (defaults make fields required, objects are closed on output): the output form takes
 * the plain name, an input form that differs from it is suffixed `Input`, and two different schemas under
 * one name throw, so a clash is found when the document is built rather than by a client.
 */
class Components {
  readonly schemas: Record<string, JsonSchema> = { Problem: problem };

  /** The JSON schema of `schema` as the document carries it: named parts hoisted and referenced. */
  schemaOf(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
    const json = this.converted(schema, io);
    const defs = (json.$defs ?? {}) as Record<string, JsonSchema>;
    delete json.$defs;
    const outputDefs = io === 'input' && Object.keys(defs).length ? ((this.converted(schema, 'output').$defs ?? {}) as Record<string, JsonSchema>) : defs;
    const names = Object.fromEntries(
      Object.keys(defs).map((id) => [id, io === 'output' || JSON.stringify(defs[id]) === JSON.stringify(outputDefs[id]) ? id : `${id}Input`]),
    );
    for (const [id, def] of Object.entries(defs)) this.add(names[id]!, pointRefs(def, names) as JsonSchema);
    // The document's dialect is OpenAPI 3.1's (JSON Schema 2020-12): no `$schema` on each schema.
    const { $schema: _, ...root } = pointRefs(json, names) as JsonSchema;
    // A schema that is itself named is just its reference.
    return typeof root.$ref === 'string' && Object.keys(root).length === 1 ? { $ref: root.$ref } : root;
  }

  /**
   * openapi-sampler's example for a JSON schema (deterministic: the same schema always gives the same value).
   * It takes `const`, then `examples[0]` (what zod's `.meta({ examples })` emits), then `enum[0]`, then
   * `default`, and only then makes up a value from the type and format. `$ref`s resolve in the components.
   */
  sampled(schema: JsonSchema, skipNonRequired: boolean): unknown {
    return sample(schema as Parameters<typeof sample>[0], { skipNonRequired, quiet: true }, { components: { schemas: this.schemas } });
  }

  private converted(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
    const json = jsonSchema(schema, io);
    if (io === 'output') markTimestamps(json);
    return json;
  }

  private add(name: string, def: JsonSchema): void {
    if (!COMPONENT_NAME.test(name)) throw new Error(`OpenAPI: schema id ${name} is not a component name (PascalCase letters and digits)`);
    const existing = this.schemas[name];
    if (existing !== undefined) {
      if (JSON.stringify(existing) !== JSON.stringify(def)) throw new Error(`OpenAPI: two different schemas are named ${name}`);
      return;
    }
    this.schemas[name] = def;
  }
}

/**
 * A JSON body's media type: its schema, and the example for it. A success body's example is left out when it is
 * exactly openapi-sampler's sample of the schema as served (issue 35: written once, not once per answer): the
 * sample is made of the schemas' own `examples`, and it is what a docs renderer (Redoc samples with
 * openapi-sampler) or a mock server shows for a body with no example. A hand-written example, a sample of the
 * required properties only (the full one was refused) and every request body's example stay written out.
 */
function jsonContent(components: Components, schema: z.ZodType, io: 'input' | 'output', handWritten: unknown) {
  const json = components.schemaOf(schema, io);
  const example = exampleFor(components, schema, json, handWritten);
  const derived = io === 'output' && handWritten === undefined && JSON.stringify(example) === JSON.stringify(components.sampled(json, false));
  return { 'application/json': { schema: json, ...(derived ? {} : { example }) } };
}

/**
 * The main success answer's JSON content. When other statuses document their own body (`alsoAnswers[].schema`),
 * `response.schema` is the union of all of them and this status is the union's remaining options: one schema, or
 * `oneOf` (the options are closed objects, so exactly one matches a body).
 */
function mainContent(components: Components, op: Operation) {
  const schema = op.response.schema!;
  const own = (op.alsoAnswers ?? []).flatMap((a) => (a.schema ? [a.schema] : []));
  if (own.length === 0) return jsonContent(components, schema, 'output', op.example?.response);
  if (!(schema instanceof z.ZodUnion)) throw new Error(`OpenAPI: ${op.id} documents another answer's schema, so its response schema must be a z.union holding it`);
  const options = schema.options as readonly z.ZodType[];
  for (const o of own) if (!options.includes(o)) throw new Error(`OpenAPI: ${op.id}: an alsoAnswers schema is not an option of the response schema`);
  const rest = options.filter((o) => !own.includes(o));
  if (rest.length === 1) return jsonContent(components, rest[0]!, 'output', op.example?.response);
  const content = jsonContent(components, z.union(rest as [z.ZodType, z.ZodType, ...z.ZodType[]]), 'output', op.example?.response);
  const media = content['application/json'];
  const { anyOf, ...others } = media.schema as { anyOf?: unknown };
  return { 'application/json': { ...media, schema: anyOf ? { ...others, oneOf: anyOf } : media.schema } };
}

const isAuthorization = (h: { name: string }) => h.name.toLowerCase() === 'authorization';

/** A public operation's provider signature headers (`requestHeaders`), as optional header parameters. */
function providerHeaders(op: Operation) {
  return (op.requestHeaders ?? [])
    .filter((h) => !isAuthorization(h))
    .map((h) => ({ name: h.name, in: 'header', description: h.description, schema: { type: 'string' }, ...(h.example !== undefined ? { example: h.example } : {}) }));
}

/** Path and query values are strings on the wire, whatever type the sampler picked. */
const asParameterValue = (v: unknown) => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : v);

/**
 * A parameter's example in its documented type (OpenAPI validates it against the parameter's schema, and a
 * client serialises it): `50` for an integer parameter, `false` for a boolean one, as chosen on the wire.
 */
function typedParameterValue(schema: JsonSchema, wire: unknown): unknown {
  if (typeof wire !== 'string') return wire;
  if ((schema.type === 'integer' || schema.type === 'number') && /^-?\d+(\.\d+)?$/.test(wire)) return Number(wire);
  if (schema.type === 'boolean' && (wire === 'true' || wire === 'false')) return wire === 'true';
  return wire;
}

/**
 * Each parameter's example: hand-written on the row, else sampled from the input schema, else from the output
 * schema as a string. The last is for values zod parses with a transform (an integer from its digits, a
 * boolean from "true"): zod keeps no `examples` or `default` on the input side of a transform, but the output
 * side has the default and its bounds, which is the value a client writes in the URL.
 */
function parametersOf(components: Components, schema: z.ZodType | undefined, where: 'path' | 'query', handWritten: Record<string, string> = {}) {
  if (!schema || !(schema instanceof z.ZodObject)) return [];
  const shape = schema.shape as Record<string, z.ZodType>;
  // Sampled as one object so each value is sampled under its own name (uuid samples are seeded by it).
  const input = components.sampled(components.schemaOf(schema, 'input'), false) as Record<string, unknown>;
  const output = components.sampled(components.schemaOf(schema, 'output'), false) as Record<string, unknown>;
  return Object.entries(shape).map(([name, s]) => {
    // A value as written in the URL: an array sample (a list filter's, which now parses too) is not one.
    const sampledValue = [input[name], output[name]].map(asParameterValue).find((c) => c !== undefined && !Array.isArray(c) && s.safeParse(c).success);
    const example = handWritten[name] ?? sampledValue ?? asParameterValue(input[name]);
    const parameterSchema = components.schemaOf(s, 'input');
    // A multi-value filter (listParam) takes both forms of a query array; the document declares OpenAPI's default,
    // the repeated key (`style: form, explode: true`), which openapi-fetch and most generators send and a
    // validating proxy checks, and says that the comma-separated form is accepted too (issue 35).
    if (parameterSchema.type === 'array') {
      const values = String(example).split(',');
      // The description's two values: the example's, with a placeholder for a long one (a uuid, written four times).
      const [a, b] = (values.length > 1 ? values : [values[0]!, values[0]!]).map((v) => (v.length > 16 ? `<${String((parameterSchema.items as JsonSchema | undefined)?.format ?? 'value')}>` : v));
      return {
        name,
        in: where,
        // How many distinct values are taken is the schema's maxItems.
        description: `Several values: repeat the parameter (\`${name}=${a}&${name}=${b}\`) or send them comma-separated (\`${name}=${a},${b}\`). Both forms, alone or mixed, mean the same; any of the values matches.`,
        style: 'form',
        explode: true,
        schema: parameterSchema,
        example: values,
      };
    }
    const typed = typedParameterValue(parameterSchema, example);
    // The example is the parameter's own: the schema's `examples` (zod's `.meta`) go when they say the same.
    const { examples, ...rest } = parameterSchema;
    const schemaOut = Array.isArray(examples) && examples.length === 1 && JSON.stringify(examples[0]) === JSON.stringify(typed) ? rest : parameterSchema;
    // Not required is OpenAPI's default: `required` is written only when it is true.
    const required = where === 'path' || !s.safeParse(undefined).success;
    return { name, in: where, ...(required ? { required: true } : {}), schema: schemaOut, example: typed };
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

/** What every client needs to know before its first call (the document's own introduction). */
const API_DESCRIPTION = [
  'A multi-tenant helpdesk API: tickets, customers, channels, macros, teams, rollups and help centres, one workspace per credential.',
  '',
  '**Authentication.** `Authorization: Bearer <secret>` with an API key (`sk_zr_…`, scoped by `tag:action` scopes) or a realm access token (JWT). Each operation names its role floor and scope.',
  '',
  '**Headers.** Every answer carries `X-Content-Type-Options: nosniff`; answers that carry a secret (a key, a signing secret, a token, a webhook URL) also carry `Cache-Control: no-store`.',
  '',
  '**Errors.** RFC 9457 problem details (`application/problem+json`) with a stable `code`, a `detail` that says why, `errors` for field problems and the `request_id` (also in `X-Request-Id`).',
  '',
  '**Retries.** Authenticated POST and PATCH take an `Idempotency-Key`: a repeat replays the first answer (`Idempotent-Replayed: true`) and does nothing again.',
  '',
  '**Limits.** Every authenticated answer carries `RateLimit-Policy` and `RateLimit` (per caller and per workspace); past either, `429 throttled` with `Retry-After`.',
  '',
  '**Concurrency.** Versioned resources (tickets, workspace settings, article translations, macros) carry a strong `ETag`: `If-Match` on their PATCH refuses a stale change (412), `If-None-Match` on their read answers 304.',
  '',
  '**Paging.** Lists that can grow answer one envelope, `{<items>: [...], next_cursor}`: pass `next_cursor` back as `after` (with the same `limit`, `sort` and filters) for the next page; it is null on the last page. Pages are keyset reads, stable while rows arrive, and a deep page costs what the first costs. The customer directory keeps its `limit`/`offset`/`total` envelope.',
].join('\n');

/**
 * A download's bytes (`response.binary`), and its 206 range: sent with the file's own sniffed type (application/pdf,
 * image/png, …; application/octet-stream for HTML, SVG, XML and scripts), so any media type. The drift test
 * (test/openapi-drift.test.ts) found `application/octet-stream` alone was not what the answers say.
 */
const BINARY_CONTENT = { '*/*': { schema: { type: 'string', format: 'binary' } } };

/** What an event stream sends: the reconnection delay, events, and a heartbeat comment while idle. */
const EVENT_STREAM_EXAMPLE = 'retry: 2000\n\nid: 0b7f3c1e-5d2a-4c8e-9f61-3a4b5c6d7e8f\nevent: ticket.status_changed\ndata: {"id":"0b7f3c1e-5d2a-4c8e-9f61-3a4b5c6d7e8f","type":"ticket.status_changed","occurred_at":"2025-03-14T09:41:53.412Z","tenant_id":"6f8e2a41-93c5-4b7d-a0e2-5c1d9b3f7a62","data":{"ticket":{"id":"595be628-f6f2-4262-9c10-6389c6c4a5b8","status":"pending"},"event":{"kind":"status_changed"}}}\n\n: heartbeat\n\n';

const EXAMPLE_REQUEST_ID = '7c9e6679-7425-40de-944b-e07fc1f90ae7';

/**
 * The guard's own refusal for `code`, built with the same factories the service throws. Independent of the
 * operation, so that one problem response serves every operation that can answer it (components.responses).
 */
function guardRefusal(code: string): DomainError | undefined {
  switch (code) {
    // Every query is a closed object: an unknown field is a refusal every operation can answer.
    case 'validation_failed':
      return validationFailed([{ path: 'query.sort', message: 'unknown field(s): sort' }]);
    case 'unauthenticated':
      return unauthenticated();
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
 * The example problem for one status and its documented codes: the first code that is not the guard's own (the
 * operation's domain code, the more telling refusal) when there is one, else the guard's first.
 */
function problemExample(status: number, codes: Set<string>) {
  const guard = GUARD_ERRORS[status] ?? [];
  const code = [...codes].find((c) => !guard.includes(c)) ?? [...codes][0]!;
  const refusal = guardRefusal(code);
  const err = refusal ? toProblem(refusal) : undefined;
  return {
    type: 'about:blank',
    title: err?.title ?? titleOf(code as ErrorCode),
    status,
    detail: err?.detail ?? exampleOf(code as ErrorCode),
    code,
    ...(err?.extra.errors ? { errors: err.extra.errors } : {}),
    request_id: EXAMPLE_REQUEST_ID,
  };
}

type Json = Record<string, unknown>;
const byName = <T>(table: Record<string, T>) => Object.fromEntries(Object.entries(table).sort(([x], [y]) => x.localeCompare(y)));
type OperationDoc = { parameters: Json[]; responses: Record<string, Json & { headers?: Record<string, Json> }> };

/** `idempotency_key_in_use` → `IdempotencyKeyInUse`; `X-Hub-Signature-256` → `XHubSignature256`. */
const pascal = (s: string) => s.split(/[^A-Za-z0-9]+/).filter(Boolean).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');

/** A problem response's component name: its status, then the codes beyond the guard's own (`Problem409IdempotencyKeyInUse`). */
function problemName(status: string, response: Json): string {
  const codes = String(response.description).replace(/^Problem: /, '').split(', ');
  const guard = GUARD_ERRORS[Number(status)] ?? [];
  const own = codes.filter((c) => !guard.includes(c));
  // The same codes can come with or without the caller's budget header (429 on a public operation has none).
  const publicVariant = status === '429' && !(response.headers as Json | undefined)?.RateLimit ? 'Public' : '';
  return `Problem${status}${own.map(pascal).join('')}${publicVariant}`;
}

/** The reason of a status answered without a body, as a response component's name. */
const NO_BODY_NAMES: Record<string, string> = { '204': 'NoContent', '302': 'Found', '304': 'NotModified' };

/**
 * Any other response's component name: what its body is and its status (`Todo200`, `Binary206`), or for one
 * without a body the status's reason (`NotModified`).
 */
function answerName(status: string, response: Json): string {
  const content = response.content as Record<string, { schema?: { $ref?: unknown } }> | undefined;
  if (!content) return NO_BODY_NAMES[status] ?? `Status${status}`;
  const ref = content['application/json']?.schema?.$ref;
  return `${typeof ref === 'string' ? ref.split('/').pop()! : content['*/*'] ? 'Binary' : 'Body'}${status}`;
}

/**
 * Shared parameters, headers and responses, referenced once (issue 35): a post-pass over the built paths. Every
 * parameter, response header and response (a problem, a 304, a 204 `Deleted`, …) written identically in two places
 * or more moves to `components.parameters`, `components.headers` or `components.responses`, and each place holds a
 * `$ref` to it. Names come from what the piece is (`TicketIdPath`, `LimitQuery`, `IdempotencyKeyHeader`,
 * `RateLimit`, `Problem401`, `NotModified`); two different pieces that would share a name are numbered in the
 * order the operations come (`LimitQuery`, `LimitQuery2`), so the document is the same each time it is built. A
 * piece written once stays inline: no component is left unused.
 */
function referenceShared(paths: Record<string, Record<string, unknown>>) {
  const operations = Object.values(paths).flatMap((p) => Object.values(p)) as OperationDoc[];
  const components = { parameters: {} as Record<string, Json>, headers: {} as Record<string, Json>, responses: {} as Record<string, Json> };
  const hoister = (kind: keyof typeof components) => {
    const uses = new Map<string, number>();
    const named = new Map<string, string>();
    return {
      /** One more place `value` is written (`as`: what makes two places the same piece, the value by default). */
      count(value: unknown, as: unknown = value) {
        const text = JSON.stringify(as);
        uses.set(text, (uses.get(text) ?? 0) + 1);
      },
      /** The value, or a reference to it when it is shared. */
      ref<T>(value: T, name: string, as: unknown = value): T | { $ref: string } {
        const text = JSON.stringify(as);
        if ((uses.get(text) ?? 0) < 2) return value;
        let key = named.get(text);
        if (key === undefined) {
          key = name;
          for (let n = 2; components[kind][key] !== undefined; n++) key = `${name}${n}`;
          components[kind][key] = value as Json;
          named.set(text, key);
        }
        return { $ref: `#/components/${kind}/${key}` };
      },
    };
  };
  const headers = hoister('headers');
  const responses = hoister('responses');
  const parameters = hoister('parameters');
  // Headers first, so that a shared response holds references to shared headers.
  for (const op of operations) for (const r of Object.values(op.responses)) for (const [name, h] of Object.entries(r.headers ?? {})) headers.count(h, [name, h]);
  for (const op of operations) {
    for (const r of Object.values(op.responses)) {
      if (r.headers) r.headers = Object.fromEntries(Object.entries(r.headers).map(([name, h]) => [name, headers.ref(h, pascal(name), [name, h]) as Json]));
    }
  }
  for (const op of operations) for (const p of op.parameters) parameters.count(p);
  for (const op of operations) for (const r of Object.values(op.responses)) responses.count(r);
  for (const op of operations) {
    op.parameters = op.parameters.map((p) => parameters.ref(p, `${pascal(String(p.name))}${pascal(String(p.in))}`) as Json);
    for (const [s, r] of Object.entries(op.responses)) op.responses[s] = responses.ref(r, Number(s) >= 400 ? problemName(s, r) : answerName(s, r)) as Json;
  }
  return components;
}

/**
 * The OpenAPI 3.1 document, derived entirely from the operation table and its zod schemas. Every operation
 * shows examples (request body, each parameter, the success body and each problem): sampled from the
 * schemas, whose `.meta({ examples })` make them read like a helpdesk, or hand-written on the row. A success
 * body's sample is not written out: it is what openapi-sampler makes of the schema as served (`jsonContent`).
 */
export function buildOpenApi(ops: Operation[], info: { version: string; serverUrl?: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  const components = new Components();
  // Declared once at the top as well: generators and linters group operations by the document's tag list.
  const tags = new Map<string, string>();
  const tag = (access: Access | null) => {
    const name = access ? access.tag : 'public-intake';
    tags.set(name, access ? `Operations under the \`${name}\` scope tag (\`${name}:<action>\` on an API key).` : 'Provider and channel intake: public, no credential is read.');
    return name;
  };
  for (const op of ops) {
    const codesByStatus = new Map<number, Set<string>>();
    for (const [s, codes] of Object.entries(GUARD_ERRORS)) {
      if (op.access !== 'public' || s === '400' || s === '404' || s === '503') codesByStatus.set(Number(s), new Set(codes));
    }
    const idempotent = takesIdempotencyKey(op);
    for (const code of [...(op.errors ?? []), ...(op.body ? BODY_ERRORS : op.streamBody ? STREAM_BODY_ERRORS : []), ...(idempotent ? IDEMPOTENCY_ERRORS : [])]) {
      const s = DOMAIN_ERRORS[code];
      codesByStatus.set(s, (codesByStatus.get(s) ?? new Set()).add(code));
    }
    const responses: Record<string, unknown> = {
      [op.response.status]: {
        description: op.response.description,
        ...(op.access !== 'public' || op.secretInAnswer
          ? {
              headers: {
                ...(op.secretInAnswer ? NO_STORE_HEADER : {}),
                ...(op.access !== 'public' ? RATE_LIMIT_HEADERS : {}),
                ...(op.versioned || op.etag ? etagHeader : {}),
                ...(idempotent ? { 'Idempotent-Replayed': { description: '`true` when this is the stored answer to an earlier request with the same Idempotency-Key.', schema: { type: 'string', enum: ['true'] } } } : {}),
              },
            }
          : {}),
        // An operation may answer JSON or, asked with Accept: text/event-stream, a stream (web chat messages).
        ...(op.response.schema || op.eventStream || op.response.binary || op.response.text
          ? {
              content: {
                ...(op.response.schema ? mainContent(components, op) : {}),
                ...(op.response.binary ? BINARY_CONTENT : {}),
                ...Object.fromEntries((op.response.text ?? []).map((t) => [t, { schema: { type: 'string' } }])),
                ...(op.eventStream ? { 'text/event-stream': { schema: { type: 'string' }, example: op.streamExample ?? EVENT_STREAM_EXAMPLE } } : {}),
              },
            }
          : {}),
      },
    };
    // 304 wherever it can be answered: versioned resources and polled rollups, on a current If-None-Match.
    if ((op.versioned || op.etag) && op.method === 'get') responses['304'] = { description: 'Not modified: the If-None-Match names the current version (no body).' };
    for (const extra of op.alsoAnswers ?? []) {
      const schema = extra.schema ?? op.response.schema;
      responses[extra.status] = {
        description: extra.description,
        ...(schema ? { content: jsonContent(components, schema, 'output', extra.example) } : extra.status === 206 && op.response.binary ? { content: BINARY_CONTENT } : {}),
      };
    }
    for (const [s, codes] of [...codesByStatus.entries()].sort((a, b) => a[0] - b[0])) {
      responses[s] = {
        description: `Problem: ${[...codes].join(', ')}`,
        ...(s === 429
          ? { headers: { 'Retry-After': { description: 'Whole seconds to wait before retrying.', schema: { type: 'integer', minimum: 1 } }, ...(op.access !== 'public' ? { RateLimit: RATE_LIMIT_HEADERS.RateLimit } : {}) } }
          : {}),
        content: {
          'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' }, example: problemExample(s, codes) },
        },
      };
    }
    const access = op.access === 'public' ? null : op.access;
    const scope = access ? `${access.tag}:${access.action}` : null;
    (paths[op.path] ??= {})[op.method] = {
      operationId: op.id,
      summary: op.summary,
      // The floor and scope are also `x-floor` and `x-scope`; the sentence is what a docs renderer shows (Redoc hides
      // `x-` fields), and it makes every operation's description non-empty (Spectral's operation-description).
      description: [
        op.description,
        access ? `Floor: ${access.floor}. Scope: ${scope}.` : op.readsHeaders?.includes('authorization') ? 'Public: no API key or access token is read; the operation checks a bearer token of its own, as described.' : 'Public: no credential is read.',
      ]
        .filter(Boolean)
        .join('\n\n'),
      tags: [tag(access)],
      'x-floor': access ? access.floor : 'public',
      'x-scope': scope,
      // The document's `security` (a bearer credential) holds unless the operation is public: none, or a provider's
      // basic authentication (Postmark) when its connection sets one, optional, hence `{}` first.
      ...(access ? {} : { security: op.requestHeaders?.some(isAuthorization) ? [{}, { providerBasic: [] }] : [] }),
      parameters: [...parametersOf(components, op.params, 'path', op.example?.params), ...parametersOf(components, op.query, 'query', op.example?.query), ...(idempotent ? [idempotencyKeyParameter] : []), ...(op.eventStream ? [lastEventIdParameter] : []), ...providerHeaders(op), ...(op.versioned || op.etag ? (op.method === 'get' ? [ifNoneMatchParameter] : op.method === 'patch' || op.method === 'put' ? [ifMatchParameter] : []) : [])],
      ...(op.body ? { requestBody: { required: true, content: jsonContent(components, op.body, 'input', op.example?.request) } } : {}),
      ...(op.streamBody
        ? { requestBody: { required: true, ...(op.streamBody.description ? { description: op.streamBody.description } : {}), content: { [op.streamBody.mediaType]: { schema: op.streamBody.schema } } } }
        : {}),
      responses,
    };
  }
  const shared = referenceShared(paths);
  return {
    openapi: '3.1.0',
    info: { title: 'Helpdesk API', version: info.version, description: API_DESCRIPTION },
    // Generators (openapi-typescript, openapi-fetch) need a server; this deployment's base URL, else relative.
    servers: [{ url: info.serverUrl ?? '/', description: 'This deployment' }],
    tags: [...tags.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, description]) => ({ name, description })),
    // Every operation takes a bearer credential but the public ones, which say so with a `security` of their own.
    security: [{ bearer: [] }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'An API key (sk_zr_…) or a realm access token (JWT).' },
        ...(ops.some((op) => op.requestHeaders?.some(isAuthorization))
          ? { providerBasic: { type: 'http', scheme: 'basic', description: "A provider's own basic authentication on its webhook (Postmark: the email connection's webhook_username and webhook_password), checked when the connection sets one." } }
          : {}),
      },
      // By name, so a new component lands in a predictable place of the document.
      schemas: byName(components.schemas),
      parameters: byName(shared.parameters),
      headers: byName(shared.headers),
      responses: byName(shared.responses),
    },
    paths,
  };
}
