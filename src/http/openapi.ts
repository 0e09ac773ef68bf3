import { z } from 'zod';
import { DOMAIN_ERRORS } from './errors';
import type { Operation } from './operation';

const GUARD_ERRORS: Record<number, string[]> = {
  400: ['validation_failed'],
  401: ['unauthenticated'],
  403: ['insufficient_role', 'insufficient_scope'],
  404: ['not_found'],
  503: ['dependency_unavailable'],
};


const jsonSchema = (schema: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<string, unknown>;

function parametersOf(schema: z.ZodType | undefined, where: 'path' | 'query') {
  if (!schema || !(schema instanceof z.ZodObject)) return [];
  const shape = schema.shape as Record<string, z.ZodType>;
  return Object.entries(shape).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || !s.safeParse(undefined).success,
    schema: jsonSchema(s, 'input'),
  }));
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

/** The OpenAPI 3.1 document, derived entirely from the operation table and its zod schemas. */
export function buildOpenApi(ops: Operation[], info: { version: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of ops) {
    const codesByStatus = new Map<number, Set<string>>();
    for (const [s, codes] of Object.entries(GUARD_ERRORS)) {
      if (op.access !== 'public' || s === '400' || s === '404' || s === '503') codesByStatus.set(Number(s), new Set(codes));
    }
    for (const code of op.errors ?? []) {
      const s = DOMAIN_ERRORS[code];
      codesByStatus.set(s, (codesByStatus.get(s) ?? new Set()).add(code));
    }
    const responses: Record<string, unknown> = {
      [op.response.status]: {
        description: op.response.description,
        ...(op.response.schema ? { content: { 'application/json': { schema: jsonSchema(op.response.schema, 'output') } } } : {}),
      },
    };
    for (const [s, codes] of [...codesByStatus.entries()].sort((a, b) => a[0] - b[0])) {
      responses[s] = {
        description: `Problem: ${[...codes].join(', ')}`,
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
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
      parameters: [...parametersOf(op.params, 'path'), ...parametersOf(op.query, 'query')],
      ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(op.body, 'input') } } } } : {}),
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
