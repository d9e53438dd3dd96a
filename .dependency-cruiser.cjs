/**
 * The import rules of src/ (run by `npm run deps:check`, in CI): no circle, and no import that runs up the layers.
 * Layers, lowest first; a file may import its own layer and any lower one:
 *   0 foundation   errors, constants, module definition, events (channels + payload types), util, scheduling
 *                  (intervals, the cleanup-task and relay registries) — and, wherever they sit, the declarations below
 *   1 schema       entities, column transformers, migrations; integrations with optional peers that read only
 *                  declarations (integrations/: the OpenAPI contract for @nestjs/swagger)
 *   2 dialects     the database hub, the shared SQL base, the contract and resolver, one folder per database — and
 *                  transaction/connection-transaction.ts, the transactions the dialects open on a connection of
 *                  theirs (no ambient context): transaction/ owns it, this layer holds it so the dialects may call it
 *   3 transaction  the ambient transaction: context, runner, source registry, sources
 *   4 transports   per-transport message building, incoming message ids, client resolution
 *   5 destinations where messages go: brokers and their clients, routes, destination names, the @OnOutboxEvent()
 *                  handlers found in the app (handlers/: registry, decorator, context)
 *   6 idempotency  keys: decorator, interceptor (HTTP) and message calls, service (stores: dialects/<db>/)
 *   7 write        OutboxService (emit, transaction, once), dead letters, schema check (outbox/): it reaches the
 *                  relay only through the relay registry of layer 0, never by importing it
 *   8 relay        publisher loop and pass, row delivery, running in-process handlers (handlers/), failure reporting,
 *                  cleanup
 *   9 operating    the provider list, health, tracing, observability (metrics: they read the publisher's events and
 *                  the dialect's stats), testing kit, console
 *  10 module       outbox.module.ts, index.ts
 *
 * Declarations are layer 0 wherever they sit: option files (`*.options.ts`, `*.options-validation.ts`) and contract
 * types files (`*.types.ts`). The module's options (src/outbox.options.ts, layer 0 because every layer reads them)
 * embed the options of features above (`idempotency`, `transactions`), and those declarations are kept beside their
 * feature for the reader. They count as foundation, so they may import only foundation: an option or contract file
 * that reached for a service, a store or a dialect would be reported like any other upward import.
 */
const DECLARATIONS = '^src/.+\\.(options|options-validation|types)\\.ts$';
const SPEC = '\\.spec\\.ts$';
/** The files of handlers/ that find the @OnOutboxEvent() handlers (destinations); the rest run them (relay). */
const HANDLER_DISCOVERY = '(outbox-handler-registry|on-outbox-event\\.decorator|outbox-event-context)\\.ts$';
/** The file of transaction/ that the dialects call: transactions on a connection of theirs, no ambient context. */
const CONNECTION_TRANSACTION = '^src/transaction/connection-transaction\\.ts$';

const LAYERS = [
  ['^src/(errors|outbox\\.constants|outbox\\.module-definition)\\.ts$', '^src/(events|util|scheduling)/', DECLARATIONS],
  ['^src/schema/', '^src/integrations/'],
  ['^src/dialects/', CONNECTION_TRANSACTION],
  ['^src/transaction/(?!connection-transaction\\.ts$)'],
  ['^src/transports/'],
  ['^src/destinations/', `^src/handlers/${HANDLER_DISCOVERY}`],
  ['^src/idempotency/'],
  ['^src/outbox/'],
  ['^src/(publisher|cleanup)/', `^src/handlers/(?!${HANDLER_DISCOVERY})`],
  ['^src/outbox\\.providers\\.ts$', '^src/(health|tracing|observability|testing|console)/'],
  ['^src/(outbox\\.module|index)\\.ts$'],
];

const upward = [];
LAYERS.forEach((lower, i) => {
  LAYERS.slice(i + 1).forEach((higher, j) => {
    upward.push({
      name: `no-upward-${i}-to-${i + 1 + j}`,
      comment:
        'An import runs up the layers (see the list at the top of .dependency-cruiser.cjs): move the file down or the code up.',
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
