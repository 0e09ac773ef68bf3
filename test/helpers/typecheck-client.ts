import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ts from 'typescript';

/**
 * The diagnostics of type-checking `source` as a consumer's client.ts, beside the generated api.ts in `dir`, in
 * strict mode; each as `file:line message`. `extra` adds compiler options (module paths, a base URL).
 */
export async function typeCheckClient(dir: string, source: string, extra: ts.CompilerOptions = {}): Promise<string[]> {
  const file = join(dir, 'client.ts');
  await writeFile(file, source);
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
    // node_modules' own declarations are theirs to check; api.ts (generated) and client.ts are checked.
    skipLibCheck: true,
    types: [],
    ...extra,
  });
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? `${d.file.fileName.replace(dir, '')}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : '';
    return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}
