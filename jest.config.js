/** Component tests against real PostgreSQL and Redis; see test/helpers/context.ts. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.(t|j)sx?$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  // jose, uuid, base-x, file-type (with its readers) and stream-json (with stream-chain) ship ESM only; swc turns them into CommonJS for jest's
  // module loader (Node itself loads them with require()).
  transformIgnorePatterns: ['/node_modules/(?!(jose|uuid|base-x|file-type|strtok3|token-types|@tokenizer|uint8array-extras|@borewit|stream-json|stream-chain)/)'],
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  testTimeout: 30000,
  maxWorkers: 2,
};
