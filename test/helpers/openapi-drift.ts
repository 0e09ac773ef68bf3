/**
 * Checks recorded answers (test/helpers/answer-recorder.ts) against the OpenAPI document with Ajv (JSON Schema
 * 2020-12, the dialect of OpenAPI 3.1): each answer is matched to its operation by method and path template,
 * the status must be documented for that operation, the media type must be one the status documents, and a
 * JSON body must validate against that media type's schema. Every mismatch is one line naming the operation,
 * the status and Ajv's error, so a failing test lists all the drift at once.
 */
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { RecordedAnswer } from './answer-recorder';
import { inlineShared } from './openapi-doc';

type Json = Record<string, unknown>;
interface MediaDoc {
  schema?: Json;
}
interface ResponseDoc {
  description: string;
  content?: Record<string, MediaDoc>;
}
interface OperationDoc {
  operationId: string;
  responses: Record<string, ResponseDoc>;
}

/** Where the components are registered for Ajv; every `#/components/schemas/…` reference is pointed there. */
const ROOT = 'https://helpdesk.invalid/openapi.json';

const isJson = (type: string) => type === 'application/json' || type.endsWith('+json');

export interface DriftReport {
  /** One line per answer that is not what the document says. */
  drift: string[];
  /** Answers checked against an operation, by operation id and status ("get_ticket 200"). */
  checked: Map<string, number>;
  /** Answers to paths the document does not describe (/health, /metrics, /docs, unknown routes). */
  unmatched: number;
  /** Undocumented 500s (internal_error), counted apart from drift. */
  faults: number;
}

export function createDriftChecker(served: unknown) {
  const doc = inlineShared(served) as { paths: Record<string, Record<string, OperationDoc>>; components: { schemas: Record<string, Json> } };
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true, logger: false });
  addFormats(ajv);
  // OpenAPI's own format for a byte stream (an attachment's content): nothing to check in a JSON sense.
  ajv.addFormat('binary', true);
  ajv.addSchema({ $id: ROOT, components: { schemas: pointed(doc.components.schemas) } });

  // Literal segments first, so `/v1/tickets/search` would win over `/v1/tickets/{ticket_id}`.
  const templates = Object.keys(doc.paths)
    .map((template) => ({
      template,
      params: (template.match(/\{/g) ?? []).length,
      regex: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}|\{[^}]+\}/g, '[^/]+')}$`),
    }))
    .sort((a, b) => a.params - b.params);

  const validators = new Map<string, ValidateFunction>();
  const validatorFor = (key: string, schema: Json) => {
    let v = validators.get(key);
    if (!v) {
      v = ajv.compile(pointed(schema) as Json);
      validators.set(key, v);
    }
    return v;
  };

  return (answers: RecordedAnswer[]): DriftReport => {
    const report: DriftReport = { drift: [], checked: new Map(), unmatched: 0, faults: 0 };
    for (const a of answers) {
      const match = templates.find((t) => t.regex.test(a.path) && doc.paths[t.template]![a.method]);
      if (!match) {
        report.unmatched += 1;
        continue;
      }
      const op = doc.paths[match.template]![a.method]!;
      const where = `${op.operationId} ${a.status} (${a.method.toUpperCase()} ${a.url})`;
      report.checked.set(`${op.operationId} ${a.status}`, (report.checked.get(`${op.operationId} ${a.status}`) ?? 0) + 1);
      const response = op.responses[String(a.status)] ?? op.responses[`${String(a.status)[0]}XX`] ?? op.responses.default;
      // An undocumented 500 is a fault, not the contract: the fault suites (test/faults) cause them on purpose.
      if (!response && a.status === 500) {
        report.faults += 1;
        continue;
      }
      if (!response) {
        report.drift.push(`${where}: status ${a.status} is not documented (documented: ${Object.keys(op.responses).join(', ')})${a.body ? `; body ${JSON.stringify(a.body).slice(0, 300)}` : ''}`);
        continue;
      }
      if (a.unreadable) {
        report.drift.push(`${where}: the ${a.type} body could not be read as JSON`);
        continue;
      }
      const content = response.content ?? {};
      if (!a.type) {
        if (a.body !== undefined) report.drift.push(`${where}: a body with no media type`);
        continue;
      }
      // The exact media type, else a range that covers it (`image/*`, `*/*`).
      const media = content[a.type] ?? content[`${a.type.split('/')[0]}/*`] ?? content['*/*'];
      if (!media) {
        // A bodiless answer (204, 304, a HEAD) may carry a type header from a default; only a sent body counts.
        if (a.body !== undefined || !isJson(a.type)) report.drift.push(`${where}: media type ${a.type} is not documented (documented: ${Object.keys(content).join(', ') || 'no body'})`);
        continue;
      }
      if (!isJson(a.type) || !media.schema) continue;
      if (a.body === undefined) {
        report.drift.push(`${where}: ${a.type} documented with a schema, but the answer has no body`);
        continue;
      }
      const validate = validatorFor(`${op.operationId} ${a.status} ${a.type}`, media.schema);
      if (!validate(a.body)) {
        const errors = (validate.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || '(root)'} ${e.message}${e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ''}`);
        report.drift.push(`${where}: ${errors.join('; ')}`);
      }
    }
    return report;
  };
}

/** A copy of `node` whose `#/components/schemas/…` references point at the components registered for Ajv. */
function pointed(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(pointed);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' && v.startsWith('#/components/') ? `${ROOT}${v}` : pointed(v)]),
  );
}
