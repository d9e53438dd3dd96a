/**
 * The import rules of src/ (run by `npm run deps:check`, in CI): no circle, and no import that runs up the layers.
 * Layers, lowest first; a file may import its own layer and any lower one:
 *   0 foundation  errors, constants, options, events, util, scheduling
 *   1 schema      entities, column transformers, migrations
 *   2 dialects    the database hub and one dialect per database
 *   3 transaction the ambient transaction: contract, context, runner, sources
 *   4 transports  per-transport message building, message ids, client resolution
 *   5 idempotency keys: stores per database, service, interceptor
 *   6 relay       publisher loop and pass, failure reporting, cleanup
 *   7 operating   OutboxService, dead letters, health, tracing, testing kit
 *   8 module      outbox.module.ts, index.ts
 */
const LAYERS = [
  ['^src/(errors|outbox\\.constants|outbox\\.options|outbox\\.options-validation|outbox\\.module-definition)\\.ts$', '^src/(events|util|scheduling)/'],
  ['^src/schema/'],
  ['^src/dialects/'],
  ['^src/transaction/'],
  ['^src/transports/'],
  ['^src/idempotency/'],
  ['^src/(publisher|cleanup)/'],
  ['^src/(outbox|health|tracing|testing)/'],
  ['^src/(outbox\\.module|index)\\.ts$'],
];

const upward = [];
LAYERS.forEach((lower, i) => {
  LAYERS.slice(i + 1).forEach((higher, j) => {
    upward.push({
      name: `no-upward-${i}-to-${i + 1 + j}`,
      comment: 'An import runs up the layers (see the list at the top of .dependency-cruiser.cjs): move the file down or the code up.',
      severity: 'error',
      from: { path: lower.join('|'), pathNot: '\\.spec\\.ts$' },
      to: { path: higher.join('|') },
    });
  });
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Import circles make load order fragile and the code hard to read: break the circle with a types file.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...upward,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.spec\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.build.json' },
  },
};
