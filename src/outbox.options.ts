import { hostname } from 'node:os';
import type { InjectionToken } from '@nestjs/common';
import type { IdempotencyDefaults, ResolvedIdempotencyDefaults } from './idempotency/idempotency.options';
import type { OutboxRoute } from './destinations/outbox-route.types';
import type { OutboxTablesOptions } from './schema/outbox-tables.options';
import type { OutboxTransactionSource } from './transaction/transaction.types';
import type { OutboxRetryOptions, ResolvedOutboxRetry } from './retry.options';
import type { OutboxCircuitBreakerOptions, ResolvedCircuitBreakerOptions } from './publisher/circuit-breaker.options';

export { DEFAULT_RETRY_OPTIONS, type OutboxRetryOptions } from './retry.options';

/** Transports the publisher knows how to stamp with a message id. `auto` picks one from the client's class. */
export type OutboxTransportName = 'rmq' | 'tcp' | 'nats' | 'mqtt' | 'redis' | 'kafka';

/** Options of the publisher: the loop that relays unsent rows to the broker. */
export interface OutboxPublisherOptions {
  /**
   * Run the publisher in this process. Turn it off in processes that only write events (a CLI, a worker that
   * must not publish); rows then wait for a process where it is on.
   * @default true
   */
  enabled?: boolean;
  /**
   * Milliseconds between two polls for due messages. Commits through `OutboxService.transaction()` wake the
   * local publisher at once, so this bounds the latency only of rows written some other way.
   * @default 1000
   */
  pollingInterval?: number;
  /**
   * Most rows claimed and published in one pass. They are published concurrently and marked in one statement.
   * @default 500
   */
  batchSize?: number;
  /**
   * Milliseconds after which a broker's confirm of one publish is late. A late confirm is not a failure: while the
   * client stays connected the publisher keeps waiting for it (up to `maxConfirmWait`) — a confirm that comes late
   * still marks the message sent — extends the lease of the batch on the database clock, claims smaller batches
   * until confirms are prompt again, and logs that once (`OutboxPublisher.brokerSlow`, health, metrics). A publish
   * whose client is disconnected at that point has an unknown outcome: it is retried (the attempt not counted),
   * and consumers deduplicate by message id. No publish starts with less lease left than this.
   * @default a third of `leaseDuration`, at most 10000 (so 10000 with the default lease; 1000 with a lease of 3000)
   */
  publishTimeout?: number;
  /**
   * Longest wait, in milliseconds, for the confirm of one publish while its client stays connected. Past it the
   * outcome is unknown: the message is published again later, without counting the attempt (so slowness alone
   * never makes a message dead). Must be at least `publishTimeout`.
   * @default 300000 (5 minutes)
   */
  maxConfirmWait?: number;
  /**
   * Milliseconds a claimed batch stays reserved for this publisher, measured on the database clock. Another
   * publisher may take the rows over only after it expires. Must exceed `publishTimeout` by at least one second.
   * @default 30000, or 2 × `publishTimeout` + 1000 when a `publishTimeout` given leaves 30000 too short
   */
  leaseDuration?: number;
  /**
   * PostgreSQL only: `LISTEN` on one dedicated connection for other processes' notifications, and after a commit
   * that wrote outbox rows `NOTIFY` them when this process will not take the rows at once (its publisher is disabled,
   * stopping, or already has `maxBatchesInFlight` batches awaiting confirmations), so a replica's publisher wakes
   * without waiting for its poll. A latency hint: polling still guarantees delivery. Turn it off behind a
   * transaction-pooling proxy (PgBouncer in transaction mode), which drops LISTEN.
   * @default true
   */
  notify?: boolean;
  /**
   * Batches the loop may have awaiting broker confirmations at once: the next claim starts while earlier batches
   * are still being confirmed, which keeps commit-to-broker latency low and throughput high. Claimed rows stay
   * exclusive and per-key order holds whatever the value; 1 makes the loop strictly one batch at a time. In a WAL
   * mode the same bound applies to the streamed batches in hand (a key's rows still wait for the batch holding it).
   * @default 4
   */
  maxBatchesInFlight?: number;
  /**
   * Name of this publisher instance, stored with each failed attempt in the attempt history (with the pass's owner
   * token) so an operator sees which process failed. Up to 255 characters.
   * @default `${os.hostname()}:${process.pid}`
   */
  instanceId?: string;
  /**
   * What becomes of a message whose expiry (`emit()`'s `expiresIn` / `expiresAt`) passed before it was published —
   * it is never published either way, and never holds back the later messages of its key: `'dead'` makes it a dead
   * letter whose last error is `OutboxMessageExpiredError` (listed, counted and purged as the others); `'drop'`
   * deletes it. Both are counted by the metric `outbox.relay.expired`.
   * @default 'dead'
   */
  onExpired?: 'dead' | 'drop';
  /**
   * How new rows reach the relay. `'poll'`: claimed by polling (every database). `'wal'` (PostgreSQL): read from
   * the write-ahead log through logical decoding (`pgoutput`, a publication and a replication slot per outbox; one
   * reader per slot across replicas), polling only for retries and what the stream hands back; start-up fails with
   * `OutboxWalUnavailableError` when the database cannot stream (`wal_level` not `logical`, no `REPLICATION`
   * privilege, the slot cannot be made). `'wal-or-poll'`: the same, but logs why and polls instead. A slot dropped
   * while running makes either WAL mode log it and poll. Needs the `pg-logical-replication` package. See
   * docs/wal-relay.md.
   * @default 'poll'
   */
  mode?: 'poll' | 'wal' | 'wal-or-poll';
  /**
   * WAL modes: milliseconds after which a pending row that was never attempted is claimed by polling as well
   * (it is older than any row the stream reader still has in hand, unless the reader is stuck): the safety net
   * for rows written while no reader streamed. Retries, delayed rows and rows the reader handed back are polled
   * at once. Ignored with `mode: 'poll'`.
   * @default 30000
   */
  walHandoff?: number;
  /**
   * A circuit breaker per broker: after `failures` consecutive failed publishes to one broker, its messages pause
   * for `coolDown` ms (attempts not counted) while other brokers flow; then one probe decides. `true` takes the
   * defaults (`{ failures: 5, coolDown: 30000 }`), an object refines them. Off by default: an outage already gives
   * every attempt back (no message goes dead because a broker is down), and a breaker also pauses a healthy broker
   * after a run of messages it rejects for their own sake; turn it on for brokers that refuse or hang for a while
   * (a resource alarm, lost permissions). See `OutboxCircuitBreakerOptions`, docs/dead-letters.md.
   * @default false
   */
  circuitBreaker?: OutboxCircuitBreakerOptions | boolean;
}

/** Removal of published rows: at once, or after a retention period by a scheduled cleanup in small batches. */
export interface OutboxCleanupOptions {
  /**
   * Run the scheduled cleanup in this process (sent outbox rows past `retention`, plus every registered
   * `OutboxCleanupTask`, such as expired idempotency records). Safe on several replicas: batches skip rows another
   * replica is deleting.
   * @default true
   */
  enabled?: boolean;
  /**
   * Delete a row as soon as it is published (in the statement that would mark it sent) instead of keeping it.
   * @default false
   */
  deleteOnPublish?: boolean;
  /**
   * Milliseconds a sent row is kept (for audits and replays) before the scheduled cleanup deletes it. Dead rows are
   * never deleted by the cleanup: requeue or purge them with `OutboxDeadLetters`.
   * @default 86400000 (24 hours)
   */
  retention?: number;
  /** Milliseconds between two cleanup runs. @default 60000 */
  interval?: number;
  /** Rows deleted per statement (one short transaction each) by the cleanup. @default 1000 */
  batchSize?: number;
}

/** Options of `OutboxModule.forRoot()` and the object returned by `forRootAsync()`'s factory. */
export interface OutboxModuleOptions {
  /**
   * Injection token of the `ClientProxy` that events are published through, as registered by the app with
   * `ClientsModule.register([{ name: TOKEN, transport, options }])`. Leave it out (and `route`) when the outbox
   * only feeds in-process `@OnOutboxEvent()` handlers; one of `client`, `route` or a handler is required while the
   * publisher is enabled (checked at startup).
   * @default none
   */
  client?: InjectionToken;
  /**
   * Several clients instead of one: `select()` picks each message's client among `clients`, all resolved at
   * startup. Exclusive with `client`. See `OutboxRoute`.
   * @default none
   */
  route?: OutboxRoute;
  /**
   * The client's transport, which decides how the message id travels (AMQP property, NATS header, …). With `route`
   * it applies to every client; leave it out to detect each client's own.
   * @default 'auto' (detected from the client's class)
   */
  transport?: OutboxTransportName | 'auto';
  /** The publisher; see `OutboxPublisherOptions`. */
  publisher?: OutboxPublisherOptions;
  /** Retries of failed publishes; see `OutboxRetryOptions`. */
  retry?: OutboxRetryOptions;
  /** Removal of published rows; see `OutboxCleanupOptions`. */
  cleanup?: OutboxCleanupOptions;
  /** Module-wide defaults of `@Idempotent()` (header, required, ttl, …); see `IdempotencyDefaults`. */
  idempotency?: IdempotencyDefaults;
  /**
   * What `OutboxDeadLetters` may do beyond requeue and purge.
   *
   * `allowEdit` (default `false`): allow `OutboxDeadLetters.editAndRequeue()` — a corrected copy of a dead letter
   * (new message id, edited payload and/or headers, header `x-outbox-replaces` naming the original) requeued in the
   * original's place in its key's order, the original kept with status `replaced` and an audit of the edit (who,
   * when, why, what changed). Off, the call throws `OutboxEditDisabledError` and the console shows no Edit button.
   * Turn it on only where operators may change what a producer wrote. See docs/dead-letters.md.
   * @default { allowEdit: false }
   */
  deadLetters?: {
    /** Allow `editAndRequeue()` (and the console's Edit). @default false */
    allowEdit?: boolean;
  };
  /**
   * Where the ambient transaction that `emit()`, `OutboxService.manager` and `@Idempotent()` join comes from:
   * `'builtin'` — the library's own (opened by `OutboxService.transaction()`); `'cls'` — the `TransactionHost` of
   * `@nestjs-cls/transactional` with its TypeORM adapter (`@Transactional()` methods included; the packages are
   * loaded only then); or an `OutboxTransactionSource` such as `new ClsTransactionSource({ connectionName })`.
   * @default 'builtin'
   */
  transactions?: 'builtin' | 'cls' | OutboxTransactionSource;
  /**
   * Check at startup (while the module initializes, before the app listens) that the tables the library needs exist
   * with their columns: the outbox table, the idempotency records' table (when `IdempotencyRecord` is an entity of
   * the DataSource) and, on MySQL/MariaDB, the key locks. One catalog query per table; a gap fails `app.init()` with
   * `OutboxSchemaError`. Turn it off only when the migrations run after the app has started.
   * @default true
   */
  schemaCheck?: boolean;
  /**
   * OpenTelemetry metrics of the relay and of idempotency keys (meter `nestjs-outbox`; names in
   * docs/observability.md), through `@opentelemetry/api` when it is installed — nothing at all without it, and
   * nothing measured until the app registers a `MeterProvider` (the global one, set before the app initializes, or
   * `meterProvider` here). `false` turns them off; an object sets them up.
   * @default true
   */
  metrics?: boolean | OutboxMetricsOptions;
  /**
   * CloudEvents 1.0 binary content mode on published messages, so consumers outside Nest can read them with a
   * CloudEvents SDK: the attributes `specversion`, `id` (the message id), `type` (the pattern), `source` and `time`
   * travel in the transport's headers, named as its binding names them (RabbitMQ and NATS `ce-id`, Kafka `ce_id`,
   * MQTT 5 user property `id`); the content type is `application/json`. TCP and Redis carry no headers: startup
   * fails with `OutboxConfigurationError`. See docs/cloudevents.md.
   * @default false
   */
  cloudEvents?: OutboxCloudEventsOptions | false;
}

/** Options of `cloudEvents`. */
export interface OutboxCloudEventsOptions {
  /**
   * The CloudEvents `source` of every event: a URI-reference naming the producer, such as `urn:acme:orders`,
   * `https://orders.acme.example` or `/orders`. Required.
   */
  source: string;
}

/** Options of `metrics`. */
export interface OutboxMetricsOptions {
  /** Record the metrics. @default true */
  enabled?: boolean;
  /**
   * The `MeterProvider` (of `@opentelemetry/api` / `@opentelemetry/sdk-metrics`) to get the meter from.
   * @default the global provider (`metrics.getMeterProvider()`) when the module initializes
   */
  meterProvider?: OutboxMeterProviderLike;
}

/** Structural type of an OpenTelemetry `MeterProvider` (so the option needs no import of the optional peer). */
export interface OutboxMeterProviderLike {
  /** Returns the meter named `name` (the library asks for `nestjs-outbox`). */
  getMeter(name: string, version?: string, options?: object): unknown;
}

/**
 * Options read when the module is defined (for `forRootAsync()` too), beside the ones above.
 */
export interface OutboxModuleExtras {
  /** Register the module globally, so every module can inject `OutboxService`. @default false */
  isGlobal?: boolean;
  /**
   * Name of the TypeORM DataSource (connection) the outbox table lives in, as given to
   * `TypeOrmModule.forRoot({ name })`. Business writes must use the same DataSource to share its transactions.
   * @default the default DataSource
   */
  dataSource?: string;
  /**
   * Names of this outbox's tables: a `prefix` before every table (and index) name, and/or a PostgreSQL `schema`,
   * so that several outboxes keep their tables apart in one database. List the same names in the DataSource's
   * `entities` (`...outboxEntities(tables)`, or `autoLoadEntities: true`) and `migrations`
   * (`...outboxMigrations(tables)`). Read when the module is defined, also by `forRootAsync()`.
   *
   * ```ts
   * OutboxModule.forRoot({ dataSource: 'billing', tables: { prefix: 'billing_' }, client: 'BILLING_BROKER' })
   * ```
   * @default the shipped names: `outbox_messages`, `outbox_attempts`, `outbox_key_locks`, `idempotency_keys`,
   * `idempotency_steps`, in the DataSource's schema
   */
  tables?: OutboxTablesOptions;
}

/** The options after validation, with every default applied. */
export interface ResolvedOutboxOptions {
  client?: InjectionToken;
  route?: OutboxRoute;
  transport: OutboxTransportName | 'auto';
  publisher: Required<Omit<OutboxPublisherOptions, 'circuitBreaker'>> & {
    circuitBreaker: ResolvedCircuitBreakerOptions | false;
  };
  retry: ResolvedOutboxRetry;
  cleanup: Required<OutboxCleanupOptions>;
  idempotency: ResolvedIdempotencyDefaults;
  deadLetters: { allowEdit: boolean };
  transactions: 'builtin' | 'cls' | OutboxTransactionSource;
  schemaCheck: boolean;
  metrics: { enabled: boolean; meterProvider?: OutboxMeterProviderLike };
  cloudEvents: OutboxCloudEventsOptions | false;
}

export const DEFAULT_PUBLISHER_OPTIONS: Readonly<ResolvedOutboxOptions['publisher']> = Object.freeze({
  enabled: true,
  pollingInterval: 1000,
  batchSize: 500,
  publishTimeout: 10_000,
  maxConfirmWait: 300_000,
  leaseDuration: 30_000,
  notify: true,
  maxBatchesInFlight: 4,
  instanceId: `${hostname()}:${process.pid}`,
  onExpired: 'dead',
  mode: 'poll',
  walHandoff: 30_000,
  circuitBreaker: false,
});

export const DEFAULT_CLEANUP_OPTIONS: Readonly<Required<OutboxCleanupOptions>> = Object.freeze({
  enabled: true,
  deleteOnPublish: false,
  retention: 86_400_000,
  interval: 60_000,
  batchSize: 1000,
});
