import { CompiledQuery, type Compilable, type RawBuilder } from 'kysely';
import type { Executor } from './index';
import { nameStatement } from './named-statements';

/** Compiled SQL and, for each of its parameters, the argument it comes from or the constant it is. */
interface Template {
  sql: string;
  slots: (number | { value: unknown })[];
}

const mark = (i: number) => `\u0000prepared-argument-${i}\u0000`;

/**
 * Compiles `query`, built with `marks` where its arguments go, into a template. Every mark must reach the
 * query as one bound parameter, or the shape assumption is wrong: it fails loudly, once per shape.
 */
function template(query: Compilable<unknown>, marks: string[]): Template {
  const q = query.compile();
  const slots = q.parameters.map((p) => (typeof p === 'string' && marks.includes(p) ? marks.indexOf(p) : { value: p }));
  for (let i = 0; i < marks.length; i++) if (!slots.includes(i)) throw new Error(`prepared query: argument ${i} is not a bound parameter`);
  // Sent as a server-side prepared statement where the pool allows it (src/db/named-statements.ts).
  nameStatement(q.sql);
  return { sql: q.sql, slots };
}

async function run<R>(exec: Executor, t: Template, args: readonly unknown[]): Promise<R[]> {
  const parameters = t.slots.map((s) => (typeof s === 'number' ? args[s] : s.value));
  return (await exec.executeQuery(CompiledQuery.raw(t.sql, parameters))).rows as R[];
}

/**
 * A query of fixed shape, built and compiled once instead of on every call. Kysely builds an operation tree
 * and compiles it to SQL each time a query runs, which the hot paths (every request's credential read, a
 * ticket's detail read) paid for on every request. `build` is called once with a unique placeholder for
 * each argument; the compiled SQL is kept, and each call sends it with the placeholders replaced by the
 * arguments, as a named server-side prepared statement in session pooling (parsed and planned once per
 * connection, src/db/named-statements.ts). Only for queries whose SQL does not depend on their arguments:
 * each argument must reach the query as one bound parameter, as it is (no branching on it, no list of
 * varying length, no transformation). `build` gets a placeholder in each argument's place, whatever the
 * argument's type; the value itself is bound at each call.
 */
export function prepared<A extends unknown[], R>(arity: A['length'], build: (exec: Executor, ...args: A) => Compilable<R>) {
  const marks = Array.from({ length: arity }, (_, i) => mark(i));
  let compiled: Template | null = null;
  return async (exec: Executor, ...args: A): Promise<R[]> => {
    compiled ??= template(build(exec, ...(marks as A)), marks);
    return run<R>(exec, compiled, args);
  };
}

/** Past this many shapes a `preparedShapes` query compiles on every call instead of keeping more templates. */
const MAX_SHAPES = 64;

/**
 * Like `prepared`, for a query whose SQL depends only on which fields an object argument holds (an UPDATE of
 * the columns a patch names): one template per set of field names, each field's value one bound parameter as
 * it is (never an SQL expression). A field whose value is undefined is absent.
 */
export function preparedShapes<A extends unknown[], F extends object, R>(arity: A['length'], build: (exec: Executor, fields: F, ...args: A) => Compilable<R>) {
  const shapes = new Map<string, { keys: string[]; t: Template }>();
  return async (exec: Executor, fields: F, ...args: A): Promise<R[]> => {
    const keys = Object.keys(fields)
      .filter((k) => (fields as Record<string, unknown>)[k] !== undefined)
      .sort();
    const shape = keys.join(',');
    let s = shapes.get(shape);
    if (!s) {
      const marks = Array.from({ length: arity + keys.length }, (_, i) => mark(i));
      const fieldMarks = Object.fromEntries(keys.map((k, i) => [k, marks[arity + i]])) as F;
      const t = template(build(exec, fieldMarks, ...(marks.slice(0, arity) as A)), marks);
      s = { keys, t };
      if (shapes.size < MAX_SHAPES) shapes.set(shape, s);
    }
    const { keys: order, t } = s;
    const values = order.map((k) => (fields as Record<string, unknown>)[k]);
    // A field holding SQL (`sql\`now()\``) would be sent as a value: refuse it instead of misrunning.
    for (const v of values) if (typeof (v as { toOperationNode?: unknown })?.toOperationNode === 'function') throw new Error('prepared query: a field holds an SQL expression, not a value');
    return run<R>(exec, t, [...args, ...values]);
  };
}

const NAMED_MAX_ROWS = 4;

/**
 * Runs a query that takes one of a few shapes (an INSERT of one or two rows) as a named prepared statement,
 * one per shape (src/db/named-statements.ts bounds how many). Unlike `prepared` it is compiled on every
 * call; what it saves is PostgreSQL's parse and plan, the larger cost.
 */
export async function named<R>(exec: Executor, query: Compilable<R>, opts: { rows?: number } = {}): Promise<R[]> {
  const q = query.compile();
  // A multi-row INSERT has one shape per row count: only the few-row ones (a write's own) are worth a name;
  // a batch's would fill the bound with shapes that seldom repeat.
  if ((opts.rows ?? 1) <= NAMED_MAX_ROWS) nameStatement(q.sql);
  return (await exec.executeQuery(q)).rows;
}

/** A raw `sql` query as `prepared` takes it (a raw builder compiles against an executor). */
export const compilable = <R>(exec: Executor, query: RawBuilder<R>): Compilable<R> => ({ compile: () => query.compile(exec) });
