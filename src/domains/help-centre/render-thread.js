'use strict';
/**
 * Entry of the render pool's worker threads. A worker thread starts a fresh module loader: under jest
 * (TypeScript compiled in-process by @swc/jest) it could not load a .ts file, so this plain JavaScript entry
 * registers tsx's CommonJS hook (tsx is a runtime dependency; under `tsx src/server.ts` the hook is simply
 * registered again) and then loads the TypeScript module.
 */
require('tsx/cjs/api').register();
module.exports = require('./render.ts').renderInThread;
