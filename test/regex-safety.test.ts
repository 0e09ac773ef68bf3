/**
 * Every regular expression in src/ and workers/ is checked by recheck (a ReDoS checker: it decides whether
 * a pattern's matching time can grow super-linearly with its input, and builds the attack string when it
 * can). A vulnerable pattern added later fails here, named with its file, line and attack.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { checkSync } from 'recheck';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '..');

/**
 * `new RegExp(…)` built from something other than a string literal cannot be checked statically. Each one
 * is listed here with why its text is never a caller's; the expression must match exactly, so editing it
 * means looking at it again.
 */
const DYNAMIC_ALLOWED: Array<{ file: string; expression: string; why: string }> = [
  {
    file: 'src/app.ts',
    expression: "new RegExp(`^${expressPath(op.path).replace(/:[^/]+/g, '[^/]+')}/?$`)",
    why: 'built from the operation table paths (our own text): literal segments and [^/]+ between "/"',
  },
];

interface Found {
  where: string;
  source: string;
  flags: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(rel);
    return /\.(ts|js|mjs|cjs)$/.test(e.name) ? [rel] : [];
  });
}

function regexesIn(file: string): { found: Found[]; dynamic: Array<{ where: string; expression: string }> } {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: Found[] = [];
  const dynamic: Array<{ where: string; expression: string }> = [];
  const where = (n: ts.Node) => `${file}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}`;
  const visit = (n: ts.Node) => {
    if (ts.isRegularExpressionLiteral(n)) {
      const slash = n.text.lastIndexOf('/');
      found.push({ where: where(n), source: n.text.slice(1, slash), flags: n.text.slice(slash + 1) });
    }
    if ((ts.isNewExpression(n) || ts.isCallExpression(n)) && ts.isIdentifier(n.expression) && n.expression.text === 'RegExp') {
      const [pattern, flags] = n.arguments ?? [];
      const literal = (a: ts.Expression | undefined) => (a && (ts.isStringLiteral(a) || ts.isNoSubstitutionTemplateLiteral(a)) ? a.text : undefined);
      const source = literal(pattern);
      if (source !== undefined && (flags === undefined || literal(flags) !== undefined)) {
        found.push({ where: where(n), source, flags: literal(flags) ?? '' });
      } else {
        dynamic.push({ where: where(n), expression: n.getText() });
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return { found, dynamic };
}

const files = [...sourceFiles('src'), ...sourceFiles('workers')];
const all = files.map(regexesIn);
const literals = all.flatMap((r) => r.found);
const dynamic = all.flatMap((r) => r.dynamic);

describe('regular expressions in src/ and workers/', () => {
  test('the scan finds the patterns (it is not silently looking at nothing)', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(literals.length).toBeGreaterThan(50);
  });

  test('no pattern can backtrack super-linearly (recheck: every one is safe)', () => {
    const unsafe = literals
      .map((r) => ({ r, result: checkSync(r.source, r.flags, { timeout: 20_000 }) }))
      .filter(({ result }) => result.status !== 'safe')
      .map(({ r, result }) =>
        result.status === 'vulnerable'
          ? `${r.where} /${r.source}/${r.flags}: ${result.complexity.type} (${result.complexity.summary}), attack ${result.attack.pattern}`
          : `${r.where} /${r.source}/${r.flags}: recheck could not decide (${JSON.stringify(result)})`,
      );
    expect(unsafe).toEqual([]);
  }, 120_000);

  test('every RegExp built at run time is one listed with why it never sees caller text', () => {
    const unlisted = dynamic.filter((d) => !DYNAMIC_ALLOWED.some((a) => d.where.startsWith(`${a.file}:`) && d.expression === a.expression));
    expect(unlisted).toEqual([]);
  });
});
