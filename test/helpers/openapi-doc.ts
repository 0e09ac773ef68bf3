/**
 * The OpenAPI document as a reader of one operation sees it. The document writes each shared parameter, header,
 * problem response and example once, under `components`, and references it (issue 35); the tests that read an
 * operation's parameters or responses read them with those references resolved. Schema references
 * (`#/components/schemas/…`) stay as they are: the tests check them as references. A success body whose example
 * is its schema's sample is shown that sample (`shownExample`), as a docs renderer shows it.
 */
import { sample } from 'openapi-sampler';

type Json = Record<string, unknown>;

const SHARED = /^#\/components\/(parameters|headers|responses|examples)\/(.+)$/;

/** A copy of `doc` with every reference to a shared parameter, header, response or example replaced by what it names. */
export function inlineShared<T>(doc: T): T {
  const components = ((doc as Json).components ?? {}) as Record<string, Record<string, unknown>>;
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    const ref = (node as Json).$ref;
    const shared = typeof ref === 'string' ? SHARED.exec(ref) : null;
    if (shared) {
      const target = components[shared[1]!]?.[decodeURIComponent(shared[2]!)];
      if (target === undefined) throw new Error(`OpenAPI: ${String(ref)} names no component`);
      return walk(target);
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, walk(v)]));
  };
  return walk(doc) as T;
}

/**
 * The example a reader is shown for a JSON body: the media type's own, else openapi-sampler's sample of its schema
 * in `doc`. The document writes a success body's example only where it is not that sample (issue 35: the sample
 * comes from the component schemas' own `examples`, written once); Redoc samples a body with openapi-sampler.
 */
export function shownExample(doc: unknown, media: { schema?: unknown; example?: unknown } | undefined): unknown {
  if (media?.example !== undefined) return media.example;
  if (media?.schema === undefined) return undefined;
  return sample(media.schema as Parameters<typeof sample>[0], { skipNonRequired: false, quiet: true }, doc as object);
}
