import { z } from 'zod';
import type { HandlerResult } from '../operation';

/** A response schema without the fields a handler answered already rendered (one per operation and set of fields). */
const partialSchemas = new WeakMap<z.ZodType, Map<string, z.ZodType>>();
function withoutRendered(schema: z.ZodType | undefined, fields: string[]): z.ZodType {
  if (!(schema instanceof z.ZodObject)) throw new Error('rendered fields need an object response schema');
  let bySet = partialSchemas.get(schema);
  if (!bySet) partialSchemas.set(schema, (bySet = new Map()));
  const key = fields.join(',');
  let partial = bySet.get(key);
  if (!partial) {
    partial = schema.omit(Object.fromEntries(fields.map((f) => [f, true])) as never);
    bySet.set(key, partial);
  }
  return partial;
}

/** The answer's bytes: the checked rest of the body as JSON, each rendered field put in before its closing brace. */
function splice(head: string, rendered: Record<string, Buffer>): Buffer {
  const parts: Buffer[] = [Buffer.from(head.slice(0, -1))];
  let separator = head === '{}' ? '' : ',';
  for (const [field, json] of Object.entries(rendered)) {
    parts.push(Buffer.from(`${separator}${JSON.stringify(field)}:`), json);
    separator = ',';
  }
  parts.push(Buffer.from('}'));
  return Buffer.concat(parts);
}

/** A read's answer as JSON bytes: checked against the schema, with its rendered fields (already checked) spliced in. */
export function readAnswer(schema: z.ZodType | undefined, result: Pick<HandlerResult, 'body' | 'rendered'>): Buffer {
  if (!result.rendered) return Buffer.from(JSON.stringify(schema ? schema.parse(result.body) : result.body));
  return splice(JSON.stringify(withoutRendered(schema, Object.keys(result.rendered)).parse(result.body)), result.rendered);
}
