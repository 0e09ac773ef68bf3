/**
 * Every place a service process is started runs it with the same V8 flags (src/lib/node-options.ts): the image,
 * the npm start scripts, `npm run up`, and (through the helpers) the tests' and benches' real processes.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { SERVICE_NODE_OPTIONS } from '../src/lib/node-options';

const read = (f: string) => readFileSync(path.join(__dirname, '..', f), 'utf8');

test('the Dockerfile, the npm start scripts and npm run up all start services with SERVICE_NODE_OPTIONS', () => {
  expect(read('Dockerfile')).toContain(`ENV NODE_OPTIONS="${SERVICE_NODE_OPTIONS}"`);
  const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
  expect(scripts['start:api']).toBe(`NODE_OPTIONS=${SERVICE_NODE_OPTIONS} tsx src/server.ts`);
  expect(scripts['start:workers']).toBe(`NODE_OPTIONS=${SERVICE_NODE_OPTIONS} tsx workers/index.ts`);
  expect(read('scripts/up.sh')).toContain(`export NODE_OPTIONS="${SERVICE_NODE_OPTIONS}"`);
  expect(read('test/helpers/processes.ts')).toContain('NODE_OPTIONS: SERVICE_NODE_OPTIONS');
  expect(read('bench/processes.ts')).toContain('NODE_OPTIONS: SERVICE_NODE_OPTIONS');
});
