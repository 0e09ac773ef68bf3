/**
 * The OpenAPI document as a reader of one operation sees it. The document writes each shared parameter, header,
 * problem response and example once, under `components`, and references it (issue 35); the tests that read an
 * operation's parameters or responses read them with those references resolved. Schema references
 * (`#/components/schemas/…`) stay as they are: the tests check them as references.
 */
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
