/** Jest: unit tests beside the code (src/**\/*.spec.ts), integration suites under test/ against real services. */
const transform = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', isolatedModules: true, diagnostics: false }],
};

module.exports = {
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  testTimeout: 120_000,
  maxWorkers: 2,
  // Under CI every test's name is printed (each names its database and services), and a last line counts the tests
  // per service (`services: PostgreSQL 212 passed · …`).
  verbose: process.env.CI === 'true',
  reporters: ['default', '<rootDir>/test/helpers/service-summary-reporter.js'],
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      roots: ['<rootDir>/src'],
      testMatch: ['**/*.spec.ts'],
      transform,
    },
    {
      displayName: 'e2e',
      testEnvironment: 'node',
      roots: ['<rootDir>/test'],
      testMatch: ['**/*.e2e-spec.ts'],
      transform,
      // The sample imports the library by its package name, as an installed app would; tests map it to src.
      moduleNameMapper: {
        '^nestjs-outbox$': '<rootDir>/src/index.ts',
        '^nestjs-outbox/console$': '<rootDir>/src/console/index.ts',
        '^nestjs-outbox/testing$': '<rootDir>/src/testing/index.ts',
      },
    },
  ],
};
