import { hostname } from 'node:os';
import type { InjectionToken } from '@nestjs/common';
import type { IdempotencyDefaults, ResolvedIdempotencyDefaults } from './idempotency/idempotency.options';
import type { OutboxRoute } from './publisher/destinations/outbox-route.types';
import type { OutboxTablesOptions } from './schema/outbox-tables.options';
import type { OutboxTransactionSource } from './transaction/transaction.types';

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
   * @default 10000
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
   * @default 30000
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
   * exclusive and per-key order holds whatever the value; 1 makes the loop strictly one batch at a time.
   * @default 4
   */
  maxBatchesInFlight?: number;
  /**
   * Name of this publisher instance, stored with each failed attempt in the attempt history (with the pass's owner
   * token) so an operator sees which process failed. Up to 255 characters.
   * @default `${os.hostname()}:${process.pid}`
   */
  instanceId?: string;
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

/** How failed publishes are retried: exponential backoff with jitter, then the dead state. */
export interface OutboxRetryOptions {
  /**
   * Attempts before a message is marked dead. An attempt counts when it starts, so a message that crashes the
   * process is counted too. A failure to reach the broker (connection refused, reset or lost, DNS, a client not
   * connected, a publish timeout while the client reports itself disconnected) gives its attempt back: the message
   * waits with backoff capped at `maxDelay` and never goes dead because of an outage. Failures of the message itself
   * (rejected or nacked by the broker, unserializable, a timeout while connected) count.
   * @default 10
   */
  maxAttempts?: number;
  /** Milliseconds before the first retry. @default 1000 */
  initialDelay?: number;
  /** Multiplier of the delay after each failed attempt. @default 2 */
  factor?: number;
  /** Upper bound of the delay in milliseconds. @default 300000 (5 minutes) */
  maxDelay?: number;
  /** Fraction (0–1) of the delay randomized, so retries of many messages spread out. @default 0.2 */
  jitter?: number;
  /**
   * Failed attempts kept per message in the attempt history (`outbox_attempts`, shown by
   * `OutboxDeadLetters.get()`): the newest ones, with their time, redacted error, owner token and publisher. Written
   * in the same transaction that reschedules the message or marks it dead; deleted with the message. 0 keeps none
   * (and writes nothing). An integer from 0 to 1000.
   * @default 10
   */
  historyLimit?: number;
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
  publisher: Required<OutboxPublisherOptions>;
  retry: Required<OutboxRetryOptions>;
  cleanup: Required<OutboxCleanupOptions>;
  idempotency: ResolvedIdempotencyDefaults;
  transactions: 'builtin' | 'cls' | OutboxTransactionSource;
  schemaCheck: boolean;
  metrics: { enabled: boolean; meterProvider?: OutboxMeterProviderLike };
  cloudEvents: OutboxCloudEventsOptions | false;
}

export const DEFAULT_PUBLISHER_OPTIONS: Readonly<Required<OutboxPublisherOptions>> = Object.freeze({
  enabled: true,
  pollingInterval: 1000,
  batchSize: 500,
  publishTimeout: 10_000,
  maxConfirmWait: 300_000,
  leaseDuration: 30_000,
  notify: true,
  maxBatchesInFlight: 4,
  instanceId: `${hostname()}:${process.pid}`,
});

export const DEFAULT_CLEANUP_OPTIONS: Readonly<Required<OutboxCleanupOptions>> = Object.freeze({
  enabled: true,
  deleteOnPublish: false,
  retention: 86_400_000,
  interval: 60_000,
  batchSize: 1000,
});

export const DEFAULT_RETRY_OPTIONS: Readonly<Required<OutboxRetryOptions>> = Object.freeze({
  maxAttempts: 10,
  initialDelay: 1000,
  factor: 2,
  maxDelay: 300_000,
  jitter: 0.2,
  historyLimit: 10,
});
