/**
 * Jest for the Nest 12 job (.ci/nest12.sh). Nest 12's packages are ES modules only; Jest runs in CommonJS mode
 * and @swc/jest turns them (and their ESM-only dependencies) into CommonJS, while the library and its tests keep
 * going through ts-jest as in the main job. Runs the suites that must pass on Nest 12 + Node 24.
 */
const { join } = require('node:path');
const base = require('../jest.config.js');
const rootDir = join(__dirname, '..');

const esmPackages = ['@nestjs', 'file-type', 'strtok3', 'token-types', 'peek-readable', 'uint8array-extras', '@tokenizer', 'load-esm', 'uid'];
const swc = ['@swc/jest', { jsc: { parser: { syntax: 'ecmascript' }, target: 'es2022' }, module: { type: 'commonjs' } }];

const e2e = base.projects.find((p) => p.displayName === 'e2e');

module.exports = {
  rootDir,
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  testTimeout: base.testTimeout,
  maxWorkers: 2,
  verbose: true, // the log names each database, transport and platform that ran
  projects: [
    {
      ...e2e,
      displayName: 'e2e (Nest 12, Node 24)',
      rootDir,
      testMatch: [
        '<rootDir>/test/outbox-transaction.e2e-spec.ts',
        '<rootDir>/test/publisher.e2e-spec.ts',
        '<rootDir>/test/cls.e2e-spec.ts',
        '<rootDir>/test/package.e2e-spec.ts',
        '<rootDir>/test/health.e2e-spec.ts',
        '<rootDir>/test/tracing.e2e-spec.ts',
        '<rootDir>/test/tracing-events.e2e-spec.ts',
        '<rootDir>/test/testing-kit.e2e-spec.ts',
        '<rootDir>/test/idempotency-http.e2e-spec.ts',
        '<rootDir>/test/idempotency-cls.e2e-spec.ts',
        '<rootDir>/test/idempotency-messages.e2e-spec.ts',
      ],
      transform: { ...e2e.transform, '^.+\\.m?js$': swc },
      transformIgnorePatterns: [`/node_modules/(?!(${esmPackages.join('|')})/)`],
    },
  ],
};
