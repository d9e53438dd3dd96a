/**
 * Jest for the fault suite (`npm run test:faults`): crashes, outages, storms and fuzzed input against the real
 * services. Kept apart from `npm test` (its own match pattern, `*.fault-spec.ts`) because it kills processes and
 * cuts connections for minutes. Suites run one at a time so that kills and outages hit a known moment, and a
 * global teardown prints the table and the `{"faults": …}` JSON line from the figures every suite recorded.
 */
const transform = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', isolatedModules: true, diagnostics: false }],
};

module.exports = {
  rootDir: '../..',
  displayName: 'faults',
  testEnvironment: 'node',
  roots: ['<rootDir>/test/faults'],
  testMatch: ['**/*.fault-spec.ts'],
  transform,
  globalSetup: '<rootDir>/test/faults/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/faults/support/global-teardown.ts',
  testTimeout: 300_000,
  maxWorkers: 1,
};
