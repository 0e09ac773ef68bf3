/**
 * `.env.example` lists every variable the service reads, with its default and meaning (issue 18, part 6):
 * generated from the config schema and the README's table, and checked here so it cannot go stale.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CONFIG_KEYS } from '../src/config';
import { readmeMeanings, renderEnvExample } from '../scripts/env-example';

const ROOT = path.resolve(__dirname, '..');
const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

test('every variable the config schema reads has a meaning in the README\'s configuration table', () => {
  const meanings = readmeMeanings(readme);
  expect(CONFIG_KEYS.filter((k) => !meanings.has(k))).toEqual([]);
});

test('.env.example is what `npm run env:example` writes now (regenerate it after changing a variable)', () => {
  const onDisk = readFileSync(path.join(ROOT, '.env.example'), 'utf8');
  expect(onDisk).toBe(renderEnvExample(readme));
  for (const k of CONFIG_KEYS) expect(onDisk).toContain(`\n#${k}=`);
});
