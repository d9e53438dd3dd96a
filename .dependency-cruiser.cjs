/**
 * The import rules of src/ (run by `npm run deps:check`, in CI): no circle, and no import that runs up the layers.
 * Layers, lowest first; a file may import its own layer and any lower one:
 *   0 foundation  errors, constants, module definition, events (channels + payload types), util, scheduling
 *                 (intervals, the cleanup-task registry) — and, wherever they sit, the declarations below
 *   1 schema      entities, column transformers, migrations
 *   2 dialects    the database hub, the shared SQL base, the contract and resolver, one folder per database
 *   3 transaction the ambient transaction: context, runner, source registry, sources
 *   4 transports  per-transport message building, incoming message ids, client resolution
 *   5 idempotency keys: stores per database (idempotency/stores/), service, interceptor
 *   6 relay       publisher loop and pass, its destinations, in-process handlers (handlers/), failure reporting,
 *                 cleanup
 *   7 operating   OutboxService, dead letters, schema check, health, tracing, observability (metrics: they read the
 *                 publisher's events and the dialect's stats), testing kit, console
 *   8 module      outbox.module.ts, index.ts
 *
 * Declarations are layer 0 wherever they sit: option files (`*.options.ts`, `*.options-validation.ts`) and contract
 * types files (`*.types.ts`). The module's options (src/outbox.options.ts, layer 0 because every layer reads them)
 * embed the options of features above (`idempotency`, `transactions`), and those declarations are kept beside their
 * feature for the reader. They count as foundation, so they may import only foundation: an option or contract file
 * that reached for a service, a store or a dialect would be reported like any other upward import.
 */
const DECLARATIONS = '^src/.+\\.(options|options-validation|types)\\.ts$';
const SPEC = '\\.spec\\.ts$';

const LAYERS = [
  [
    '^src/(errors|outbox\\.constants|outbox\\.module-definition)\\.ts$',
    '^src/(events|util|scheduling)/',
    DECLARATIONS,
  ],
  ['^src/schema/'],
  ['^src/dialects/'],
  ['^src/transaction/'],
  ['^src/transports/'],
  ['^src/idempotency/'],
  ['^src/(publisher|cleanup|handlers)/'],
  ['^src/(outbox|health|tracing|observability|testing|console)/'],
  ['^src/(outbox\\.module|index)\\.ts$'],
];

const upward = [];
LAYERS.forEach((lower, i) => {
  LAYERS.slice(i + 1).forEach((higher, j) => {
    upward.push({
      name: `no-upward-${i}-to-${i + 1 + j}`,
      comment: 'An import runs up the layers (see the list at the top of .dependency-cruiser.cjs): move the file down or the code up.',
      severity: 'error',
      // A declaration under a feature's folder belongs to layer 0 only, not also to its folder's layer.
      from: { path: lower.join('|'), pathNot: i === 0 ? SPEC : [SPEC, DECLARATIONS] },
      to: { path: higher.join('|'), pathNot: DECLARATIONS },
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
    {
      name: 'in-a-layer',
      comment: 'Every file of src/ belongs to a layer: add a new folder to LAYERS in .dependency-cruiser.cjs.',
      severity: 'error',
      from: { path: '^src/', pathNot: [SPEC, ...LAYERS.flat()] },
      to: {},
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
