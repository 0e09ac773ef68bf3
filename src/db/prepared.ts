import { CompiledQuery, type Compilable } from 'kysely';
import type { Executor } from './index';

/**
 * A query of fixed shape, built and compiled once instead of on every call. Kysely builds an operation tree
 * and compiles it to SQL each time a query runs, which the hot paths (every request's credential read, a
 * ticket's detail read) paid for on every request. `build` is called once with a unique placeholder for
 * each argument; the compiled SQL is kept, and each call sends it with the placeholders replaced by the
 * arguments. Only for queries whose SQL does not depend on their arguments: each argument must reach the
 * query as one bound parameter, as it is (no branching on it, no list of varying length, no transformation).
 */
export function prepared<A extends string[], R>(arity: A['length'], build: (exec: Executor, ...args: A) => Compilable<R>) {
  const marks = Array.from({ length: arity }, (_, i) => `\u0000prepared-argument-${i}\u0000`);
  let compiled: { sql: string; slots: (number | { value: unknown })[] } | null = null;
  return async (exec: Executor, ...args: A): Promise<R[]> => {
    if (!compiled) {
      const q = build(exec, ...(marks as A)).compile();
      const slots = q.parameters.map((p) => (typeof p === 'string' && marks.includes(p) ? marks.indexOf(p) : { value: p }));
      // Every argument must appear as a parameter, or the shape assumption is wrong: fail loudly, once.
      for (let i = 0; i < arity; i++) if (!slots.includes(i)) throw new Error(`prepared query: argument ${i} is not a bound parameter`);
      compiled = { sql: q.sql, slots };
    }
    const { sql, slots } = compiled;
    const parameters = slots.map((s) => (typeof s === 'number' ? args[s] : s.value));
    return (await exec.executeQuery(CompiledQuery.raw(sql, parameters))).rows as R[];
  };
}
