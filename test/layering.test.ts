/**
 * The layers, enforced (issue 35). The README's map of rooms states who may import whom; until this test nothing
 * checked it, and it was broken in small ways (a domain writing SSE frames with src/http's types, a migration
 * importing live domain code, src/db importing a domain type). The rules:
 *
 * 1. A domain does not import src/http, except a domain's own `routes.ts`: routes are the HTTP edge of a domain,
 *    everything else in it (services, stores, schemas) is said without HTTP, so it serves a worker as well.
 * 2. src/lib, src/db and src/queue import no domain: they are below the domains, and a domain type there ties
 *    every domain (and every worker) to that one.
 * 3. A migration (src/db/migrations) imports nothing of ours outside src/db: it runs once on databases of every
 *    age and must do the same thing each time, so it cannot follow live code. Packages (kysely) are pinned by the
 *    lockfile, not by our edits, and stay allowed.
 * 4. No import circle among src and workers: a circle makes load order decide what is undefined at start.
 *
 * Imports are read with the TypeScript compiler's own pre-processor (`ts.preProcessFile`, test/helpers/imports.ts),
 * exactly: static imports and `import type`, `export … from`, side-effect imports, `import()` (in code and in types)
 * and `import x = require()`; nothing in comments or strings. Each rule is a pure function of the imports, first shown
 * to fail on a small in-memory tree with one breach put in on purpose, then run over the real one.
 */
import path from 'node:path';
import { importsOf, named, readTree, type Import, type Sources } from './helpers/imports';

const under = (p: string | null, dir: string) => p !== null && p.startsWith(`${dir}/`);

/** A domain's own routes file: src/domains/<domain>/routes.ts (not one in a folder of the domain). */
const isDomainRoutes = (file: string) => /^src\/domains\/[^/]+\/routes\.ts$/.test(file);

/** Rule 1: a domain imports src/http only from its routes.ts. */
export const domainsImportingHttp = (imports: readonly Import[]): string[] =>
  imports
    .filter((i) => under(i.file, 'src/domains') && !isDomainRoutes(i.file) && under(i.target, 'src/http'))
    .map((i) => `${named(i)}: a domain reaches src/http only from its routes.ts (say it without HTTP, or move it to the routes or src/http)`);

/** Rule 2: src/lib, src/db and src/queue import no domain. */
export const lowerLayersImportingDomains = (imports: readonly Import[]): string[] =>
  imports
    .filter((i) => ['src/lib', 'src/db', 'src/queue'].some((d) => under(i.file, d)) && under(i.target, 'src/domains'))
    .map((i) => `${named(i)}: src/lib, src/db and src/queue sit below the domains and import none (move the piece down, or take a structural type)`);

/** Rule 3: a migration imports nothing of ours outside src/db (packages are allowed). */
export const migrationsImportingOutsideDb = (imports: readonly Import[]): string[] =>
  imports
    .filter((i) => under(i.file, 'src/db/migrations') && i.target !== null && !under(i.target, 'src/db'))
    .map((i) => `${named(i)}: a migration never imports live code outside src/db (freeze the values into it as literals)`);

/**
 * Rule 4: import circles, each reported once as one concrete chain of imports (every import of it named) with
 * the circle's files when more files are caught in it. Tarjan's strongly connected components over the imports
 * that name a file of `sources`; a file importing itself is a circle too.
 */
export function importCircles(imports: readonly Import[], sources: Sources): string[] {
  const edges = new Map<string, Import[]>([...sources.keys()].map((f) => [f, []]));
  for (const i of imports) if (i.target !== null && sources.has(i.target)) edges.get(i.file)!.push(i);

  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const strong = (v: string) => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const { target: w } of edges.get(v)!) {
      if (!index.has(w!)) {
        strong(w!);
        low.set(v, Math.min(low.get(v)!, low.get(w!)!));
      } else if (onStack.has(w!)) low.set(v, Math.min(low.get(v)!, index.get(w!)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      const selfImport = edges.get(v)!.some((e) => e.target === v);
      if (component.length > 1 || selfImport) components.push(component.sort());
    }
  };
  for (const f of [...sources.keys()].sort()) if (!index.has(f)) strong(f);

  return components.map((component) => {
    // The shortest chain of imports from the circle's first file back to it, within the circle (breadth first).
    const inside = new Set(component);
    const start = component[0]!;
    const via = new Map<string, Import>();
    const queue = [start];
    let closing: Import | undefined;
    while (queue.length > 0 && closing === undefined) {
      const v = queue.shift()!;
      for (const e of edges.get(v)!) {
        if (e.target === start) {
          closing = e;
          break;
        }
        if (inside.has(e.target!) && !via.has(e.target!)) {
          via.set(e.target!, e);
          queue.push(e.target!);
        }
      }
    }
    const chain: Import[] = [closing!];
    while (chain[0]!.file !== start) chain.unshift(via.get(chain[0]!.file)!);
    const more = component.length > chain.length ? ` (${component.length} files in the circle: ${component.join(', ')})` : '';
    return `import circle: ${chain.map(named).join(' → ')}${more}`;
  });
}

/** Every rule's breaches, in rule order. */
const allBreaches = (sources: Sources): string[] => {
  const imports = importsOf(sources);
  return [...domainsImportingHttp(imports), ...lowerLayersImportingDomains(imports), ...migrationsImportingOutsideDb(imports), ...importCircles(imports, sources)];
};

describe('the rules, on a small in-memory tree', () => {
  /** A tree that keeps every rule: what the real one looks like, in little. */
  const clean: Sources = new Map([
    ['src/lib/feed.ts', 'export interface Feed { send(): boolean }\n'],
    ['src/lib/params.ts', "import { z } from 'zod';\nexport const intParam = z.string();\n"],
    ['src/http/result.ts', 'export interface StreamWriter { write(chunk: string): boolean }\n'],
    ['src/http/sse.ts', "import type { Feed } from '../lib/feed';\nimport type { StreamWriter } from './result';\nexport const sse = (w: StreamWriter): Feed => ({ send: () => w.write('') });\n"],
    ['src/db/index.ts', "import { Kysely } from 'kysely';\nexport type Db = Kysely<unknown>;\n"],
    ['src/db/reads.ts', "import type { Db } from './index';\nexport interface ReadCaller { tenantId: string }\nexport type Reads = (db: Db, c: ReadCaller) => void;\n"],
    ['src/db/migrations/0001_foundation.ts', "import { type Kysely, sql } from 'kysely';\nimport type { Db } from '../index';\n"],
    ['src/queue/jobs.ts', "import { z } from 'zod';\nimport type { Db } from '../db';\n"],
    ['src/domains/events/schemas.ts', "import { intParam } from '../../lib/params';\nexport const q = intParam;\n"],
    ['src/domains/events/service.ts', "import type { Feed } from '../../lib/feed';\nimport type { Db } from '../../db';\nimport { q } from './schemas';\n"],
    // The exception: a domain's routes.ts is its HTTP edge.
    ['src/domains/events/routes.ts', "import { sse } from '../../http/sse';\nimport * as service from './service';\n"],
    ['workers/index.ts', "import * as events from '../src/domains/events/service';\nimport { jobs } from '../src/queue/jobs.js';\n"],
  ]);
  const withFile = (file: string, text: string): Sources => new Map([...clean, [file, text]]);

  test('the clean tree breaks no rule, and its imports resolve to its files (folder index and .js included)', () => {
    expect(allBreaches(clean)).toEqual([]);
    const imports = importsOf(clean);
    const relative = imports.filter((i) => i.target !== null);
    expect(relative.length).toBe(13);
    expect(relative.filter((i) => !clean.has(i.target!))).toEqual([]);
    expect(imports.find((i) => i.file === 'src/queue/jobs.ts' && i.spec === '../db')?.target).toBe('src/db/index.ts');
    expect(imports.find((i) => i.file === 'workers/index.ts' && i.spec.endsWith('.js'))?.target).toBe('src/queue/jobs.ts');
  });

  test('rule 1: a domain file other than its routes.ts importing src/http is named, with the import and its line', () => {
    const broken = withFile('src/domains/events/service.ts', "import type { Feed } from '../../lib/feed';\nimport type { StreamWriter } from '../../http/result';\n");
    expect(domainsImportingHttp(importsOf(broken))).toEqual([
      "src/domains/events/service.ts:2 imports '../../http/result' (src/http/result.ts): a domain reaches src/http only from its routes.ts (say it without HTTP, or move it to the routes or src/http)",
    ]);
    // Every way of importing counts; a comment or a string does not.
    const ways = [
      "export { sse } from '../../http/sse';",
      "export * from '../../http/sse';",
      "import '../../http/sse';",
      "const m = import('../../http/sse');",
      "type S = typeof import('../../http/sse');",
      "import sse = require('../../http/sse');",
    ];
    for (const way of ways) expect(domainsImportingHttp(importsOf(withFile('src/domains/events/schemas.ts', way)))).toHaveLength(1);
    const mentions = "// import { sse } from '../../http/sse';\nconst s = `import { sse } from '../../http/sse'`;\n";
    expect(domainsImportingHttp(importsOf(withFile('src/domains/events/schemas.ts', mentions)))).toEqual([]);
    // Only a domain's own routes.ts is its edge: one in a folder of the domain is not.
    expect(domainsImportingHttp(importsOf(withFile('src/domains/events/adapters/routes.ts', "import { sse } from '../../../http/sse';")))).toEqual([
      "src/domains/events/adapters/routes.ts:1 imports '../../../http/sse' (src/http/sse.ts): a domain reaches src/http only from its routes.ts (say it without HTTP, or move it to the routes or src/http)",
    ]);
  });

  test.each(['src/lib/paging.ts', 'src/db/reads.ts', 'src/queue/jobs.ts'])('rule 2: %s importing a domain is named', (file) => {
    const spec = `${path.posix.relative(path.posix.dirname(file), 'src/domains/events')}/service`;
    const broken = withFile(file, `import { z } from 'zod';\nimport type { Feed } from '../lib/feed';\nimport type { EventService } from '${spec}';\n`);
    expect(lowerLayersImportingDomains(importsOf(broken))).toEqual([
      `${file}:3 imports '${spec}' (src/domains/events/service.ts): src/lib, src/db and src/queue sit below the domains and import none (move the piece down, or take a structural type)`,
    ]);
    expect(allBreaches(broken)).toHaveLength(1);
  });

  test('rule 3: a migration importing live code outside src/db is named; src/db and packages are not', () => {
    const broken = withFile(
      'src/db/migrations/0002_tickets.ts',
      "import { type Kysely, sql } from 'kysely';\nimport type { Db } from '../index';\nimport { DEFAULT_SLA_TARGETS } from '../../domains/sla/targets';\nimport { config } from '../../config';\n",
    );
    expect(migrationsImportingOutsideDb(importsOf(broken))).toEqual([
      "src/db/migrations/0002_tickets.ts:3 imports '../../domains/sla/targets' (src/domains/sla/targets): a migration never imports live code outside src/db (freeze the values into it as literals)",
      "src/db/migrations/0002_tickets.ts:4 imports '../../config' (src/config): a migration never imports live code outside src/db (freeze the values into it as literals)",
    ]);
  });

  test('rule 4: an import circle is named as its chain of imports, whatever kind of import closes it', () => {
    // lib/feed → lib/params → http/result → lib/feed, two of them type-only: counted as the import-cycles tool counts
    // them, since a circle of types still ties each file's layer to the others'.
    let broken = withFile('src/lib/feed.ts', "import { intParam } from './params';\n");
    broken = new Map([...broken, ['src/lib/params.ts', "import { z } from 'zod';\nimport type { StreamWriter } from '../http/result';\n"]]);
    broken = new Map([...broken, ['src/http/result.ts', "import type { Feed } from '../lib/feed';\n"]]);
    const imports = importsOf(broken);
    expect(importCircles(imports, broken)).toEqual([
      "import circle: src/http/result.ts:1 imports '../lib/feed' (src/lib/feed.ts) → src/lib/feed.ts:1 imports './params' (src/lib/params.ts) → src/lib/params.ts:2 imports '../http/result' (src/http/result.ts)",
    ]);
    // Two files that import each other inside a larger circle: the shortest chain, and every file caught in it.
    const wider = withFile('src/domains/events/schemas.ts', "import { intParam } from '../../lib/params';\nimport * as s from './service';\n");
    expect(importCircles(importsOf(wider), wider)).toEqual([
      "import circle: src/domains/events/schemas.ts:2 imports './service' (src/domains/events/service.ts) → src/domains/events/service.ts:3 imports './schemas' (src/domains/events/schemas.ts)",
    ]);
    const three = new Map([
      ['a.ts', "import './b';\nimport './c';\n"],
      ['b.ts', "import './a';\n"],
      ['c.ts', "import './b';\n"],
    ]);
    expect(importCircles(importsOf(three), three)).toEqual(["import circle: a.ts:1 imports './b' (b.ts) → b.ts:1 imports './a' (a.ts) (3 files in the circle: a.ts, b.ts, c.ts)"]);
    const self = withFile('src/lib/feed.ts', "export * from './feed';\n");
    expect(importCircles(importsOf(self), self)).toEqual(["import circle: src/lib/feed.ts:1 imports './feed' (src/lib/feed.ts)"]);
  });
});

describe('the tree', () => {
  const sources = readTree('src', 'workers');
  const imports = importsOf(sources);

  test('is read whole: every import of ours resolves to a file read here (else a rule could pass by missing it)', () => {
    expect(sources.size).toBeGreaterThan(100);
    expect(imports.filter((i) => i.target !== null && !sources.has(i.target)).map(named)).toEqual([]);
  });

  test('rule 1: no domain imports src/http outside its routes.ts', () => {
    expect(domainsImportingHttp(imports)).toEqual([]);
  });

  test('rule 2: src/lib, src/db and src/queue import no domain', () => {
    expect(lowerLayersImportingDomains(imports)).toEqual([]);
  });

  test('rule 3: migrations import nothing of ours outside src/db', () => {
    expect(migrationsImportingOutsideDb(imports)).toEqual([]);
  });

  test('rule 4: no import circle among src and workers', () => {
    expect(importCircles(imports, sources)).toEqual([]);
  });
});
