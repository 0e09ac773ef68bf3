/**
 * `.env.example` and the README's configuration table are generated from the one table that declares every
 * variable (`SETTINGS` in src/config.ts; issue 18 part 6, issue 35): this generates both and compares them with
 * the files on disk, so neither can go stale. It never writes: `npm run env:example` does.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CONFIG_KEYS } from '../src/config';
import { configTableFiles, renderConfigTable, renderEnvExample, spliceConfigTable, TABLE_BEGIN, TABLE_END } from '../scripts/env-example';

const ROOT = path.resolve(__dirname, '..');

test('.env.example is what `npm run env:example` writes now (regenerate it after changing a setting)', () => {
  const onDisk = readFileSync(path.join(ROOT, '.env.example'), 'utf8');
  expect(onDisk).toBe(renderEnvExample());
  for (const k of CONFIG_KEYS) expect(onDisk).toContain(`\n#${k}=`);
});

test('the configuration table in the docs is what `npm run env:example` writes now', () => {
  const files = configTableFiles(ROOT);
  // README.md holds it today; a docs/ page may take it over (the markers move with it), but some file must.
  expect(files.length).toBeGreaterThan(0);
  for (const f of files) {
    const onDisk = readFileSync(f, 'utf8');
    expect({ file: path.relative(ROOT, f), text: onDisk }).toEqual({ file: path.relative(ROOT, f), text: spliceConfigTable(onDisk) });
  }
});

test('the generated table has one row per variable, between the markers', () => {
  const table = renderConfigTable();
  for (const k of CONFIG_KEYS) expect(table.split('\n').filter((row) => row.startsWith(`| \`${k}\` |`))).toHaveLength(1);
  const spliced = spliceConfigTable(`before\n${TABLE_BEGIN}\nstale\n${TABLE_END}\nafter\n`);
  expect(spliced).toBe(`before\n${TABLE_BEGIN}\n${table}\n${TABLE_END}\nafter\n`);
  expect(() => spliceConfigTable('no markers')).toThrow(/markers/);
});
