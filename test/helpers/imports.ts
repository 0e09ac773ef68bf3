/**
 * Our import graph, read from the source (test/layering.test.ts, test/process-services.test.ts). Imports are read
 * with the TypeScript compiler's own pre-processor (`ts.preProcessFile`), exactly: static imports and `import type`,
 * `export … from`, side-effect imports, `import()` (in code and in types) and `import x = require()`; nothing in
 * comments or strings. `runtimeImportsOf` keeps only what a process loads: the file compiled the way tsx, swc and
 * tsc compile ours (one file at a time), so imports only types use are gone, then read the same way.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as ts from 'typescript';

/** Files' text by their path from the repository root ('/' separators). */
export type Sources = ReadonlyMap<string, string>;

/** One import of one file. */
export interface Import {
  file: string;
  /** 1-based, in the file as written. */
  line: number;
  /** As written: './service', 'kysely'. */
  spec: string;
  /**
   * The path it names from the repository root: the file when one of `sources` matches, else the path as written
   * (an import of something not scanned still names where it points). Null for a package.
   */
  target: string | null;
}

const isRelative = (spec: string) => spec === '.' || spec === '..' || spec.startsWith('./') || spec.startsWith('../');

/** What a relative import resolves to, the way Node and tsc resolve ours: the file, `.ts`, `.mts`, a folder's index, `.js` for `.ts`. */
function resolve(from: string, spec: string, sources: Sources): string {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
  const candidates = [base, `${base}.ts`, `${base}.mts`, `${base}/index.ts`];
  if (base.endsWith('.js')) candidates.push(`${base.slice(0, -3)}.ts`);
  return candidates.find((c) => sources.has(c)) ?? base;
}

function importsIn(file: string, text: string, sources: Sources): Import[] {
  return ts.preProcessFile(text, true, true).importedFiles.map((ref) => ({
    file,
    line: text.slice(0, ref.pos).split('\n').length,
    spec: ref.fileName,
    target: isRelative(ref.fileName) ? resolve(file, ref.fileName, sources) : null,
  }));
}

/** Every import of every file, in file order. */
export function importsOf(sources: Sources): Import[] {
  return [...sources].flatMap(([file, text]) => importsIn(file, text, sources));
}

const COMPILE: ts.CompilerOptions = { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, isolatedModules: true };
/** Compiled texts by file and source text: a test comparing trees that differ in one file compiles the rest once. */
const compiledTexts = new Map<string, string>();
function compiled(file: string, text: string): string {
  const key = `${file}\0${text}`;
  let out = compiledTexts.get(key);
  if (out === undefined) {
    out = ts.transpileModule(text, { compilerOptions: COMPILE, fileName: file }).outputText;
    compiledTexts.set(key, out);
  }
  return out;
}

/** Every import of every file that survives compilation: what loading the file loads (`import type`, and imports only types use, are not). */
export function runtimeImportsOf(sources: Sources): Import[] {
  return [...sources].flatMap(([file, text]) =>
    importsIn(file, compiled(file, text), sources).map((i) => {
      // The line of the import as written (the compiled text's lines are not the file's).
      const at = [`'${i.spec}'`, `"${i.spec}"`].map((q) => text.indexOf(q)).filter((n) => n >= 0).sort((a, b) => a - b)[0];
      return at === undefined ? i : { ...i, line: text.slice(0, at).split('\n').length };
    }),
  );
}

/**
 * The files `entry` reaches through `imports`, each with the chain of imports that reaches it first (breadth first,
 * so the chain is a shortest one): an entry's own file has an empty chain.
 */
export function reachableFrom(entry: string, imports: readonly Import[]): Map<string, Import[]> {
  const edges = new Map<string, Import[]>();
  for (const i of imports) if (i.target !== null) edges.set(i.file, [...(edges.get(i.file) ?? []), i]);
  const chains = new Map<string, Import[]>([[entry, []]]);
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const i of edges.get(file) ?? []) {
      if (chains.has(i.target!)) continue;
      chains.set(i.target!, [...chains.get(file)!, i]);
      queue.push(i.target!);
    }
  }
  return chains;
}

/** `src/a.ts:3 imports './b' (src/b.ts)`. */
export const named = (i: Import) => `${i.file}:${i.line} imports '${i.spec}'${i.target !== null && i.target !== i.spec ? ` (${i.target})` : ''}`;

/** The TypeScript sources (not declarations) under the given folders of the repository, by path from its root. */
export function readTree(...dirs: string[]): Map<string, string> {
  const root = path.resolve(__dirname, '..', '..');
  const sources = new Map<string, string>();
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(rel);
      else if (/\.m?ts$/.test(e.name) && !e.name.endsWith('.d.ts')) sources.set(rel, fs.readFileSync(path.join(root, rel), 'utf8'));
    }
  };
  for (const dir of dirs) walk(dir);
  return sources;
}
