/**
 * The service runs on Node 24 LTS (package.json engines, the Dockerfile's base image). Where the system's Node
 * is older, `npm test` and `npm run up` run on the `node` dev dependency's binary (node_modules/.bin/node, first
 * on PATH): the suite itself, the API and worker processes it spawns (test/helpers/processes.ts: this process's
 * node with tsx's loader) and the commands it starts through PATH (node, tsx, npm scripts) must all be on it.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(__dirname, '..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');
const run = promisify(execFile);
const major = (version: string) => Number(version.trim().replace(/^v/, '').split('.')[0]);
// As the helpers spawn processes: from the project root, with this process's PATH and HOME only.
const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' };
const PRINT_VERSION = 'console.log(process.versions.node)';

test('runs on Node 24 LTS or newer', () => {
  expect(major(process.versions.node)).toBeGreaterThanOrEqual(24);
});

test('the API and worker processes the suite spawns run on Node 24 LTS or newer', async () => {
  // spawnService: process.execPath with tsx's loader.
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '-e', PRINT_VERSION], { cwd: ROOT, env });
  expect(major(stdout)).toBeGreaterThanOrEqual(24);
});

test.each([
  ['node', 'node', ['-e', PRINT_VERSION]],
  ['tsx (node_modules/.bin/tsx, as the CLI and rollups tests run it)', TSX, ['-e', PRINT_VERSION]],
])('%s found through the PATH the suite passes on runs on Node 24 LTS or newer', async (_name, bin, args) => {
  const { stdout } = await run(bin, args, { cwd: ROOT, env });
  expect(major(stdout)).toBeGreaterThanOrEqual(24);
});

test('node started through npm, as test/demo.test.ts starts `npm run -s demo`, runs on Node 24 LTS or newer', async () => {
  // npm puts node_modules/.bin first on PATH for what it runs, as for a script.
  const { stdout } = await run('npm', ['exec', '--offline', '--', 'node', '-e', PRINT_VERSION], { cwd: ROOT, env, timeout: 60_000 });
  expect(major(stdout)).toBeGreaterThanOrEqual(24);
});
