import type { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { describeError } from '../../../util/describe-error';
import { pgConnectionConfig, pgModule } from '../postgres.connection';
import type { PostgresOutboxDialect } from '../postgres.dialect';
import { handleWalBatch, type WalBatchSettings, type WalRelayHost } from './wal-batch';
import { WalPipeline } from './wal-pipeline';
import { WalTransactionQueue } from './wal-transactions';

/** Settings of the reader of one outbox's slot. */
export interface WalReaderSettings extends WalBatchSettings {
  /** The slot and publication (`OutboxResourceNames.replicationSlot`). */
  slot: string;
  /** Most rows published as one batch. */
  batchSize: number;
  /** Most batches in hand at once (`publisher.maxBatchesInFlight`, as for polling). */
  maxBatchesInFlight: number;
  /** Milliseconds between two tries for the reader's lock (a standby) or to stream again after an error. */
  retryMs: number;
}

/** pgoutput's errors that mean the slot cannot be read any more: it was dropped (42704) or invalidated (55000). */
const SLOT_GONE = /replication slot .* does not exist|can no longer get changes from replication slot|invalidated/i;

/**
 * Reads one outbox's replication slot in exactly one process: each replica tries a session advisory lock named
 * after the slot (on a connection of its own); the holder streams, the others retry every `retryMs` and one takes
 * over once the holder's session ends (it stopped, crashed or lost its connection). PostgreSQL itself lets only one
 * connection read a slot, a second guard. The stream (`pg-logical-replication`, `pgoutput`) is read in batches
 * of whole transactions (`handleWalBatch()`), up to `maxBatchesInFlight` in hand at once (`WalPipeline`: a key's
 * rows wait for the batch in hand that has the same key), and the slot is told a commit is done (acknowledged) only
 * once every row up to it was confirmed by the broker, written back as failed, or handed to polling. A process killed between two acknowledgements reads the unacknowledged rows again: they are
 * published again (consumers deduplicate by message id), never lost. A slot that is gone ends the reader for good
 * (`WalRelayHost.fellBack()`): polling takes everything.
 */
export class PostgresWalReader {
  /** True while this process holds the slot and streams. */
  streaming = false;
  private stopped = false;
  private session?: { stop(): Promise<void>; done: Promise<void> };
  private loop?: Promise<void>;
  private wakeSleep?: () => void;

  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: PostgresOutboxDialect,
    private readonly settings: WalReaderSettings,
    private readonly host: WalRelayHost,
    private readonly logger: Logger,
  ) {}

  /** Starts competing for the slot (in the background). */
  start(): void {
    this.loop = this.run();
  }

  /** Stops streaming (the batch in hand is finished and acknowledged first) and releases the lock. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeSleep?.();
    await this.session?.stop();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let fellBack = false;
      const { Client } = pgModule(this.dataSource);
      const lock = new Client(pgConnectionConfig(this.dataSource, 'nestjs-outbox-wal-lock'));
      lock.on('error', () => undefined);
      try {
        await lock.connect();
        const { rows } = await lock.query('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS locked', [
          `nestjs-outbox:wal:${this.settings.slot}`,
        ]);
        if (rows[0]?.locked === true && !this.stopped) {
          this.logger.log(`Streaming new outbox rows from the replication slot ${this.settings.slot} (WAL relay).`);
          await this.stream(lock);
        }
      } catch (error) {
        if (SLOT_GONE.test(String((error as Error)?.message))) {
          fellBack = true;
          this.host.fellBack(
            `The replication slot ${this.settings.slot} is gone (${describeError(error)}); the WAL relay stops and ` +
              'polling publishes every row from now on. Restart the app to make the slot again (rows written ' +
              'meanwhile are polled, none is lost); set max_slot_wal_keep_size with room for the longest outage.',
          );
        } else if (!this.stopped) {
          this.logger.warn(`The WAL relay stopped streaming and will try again: ${describeError(error)}`);
        }
      } finally {
        this.streaming = false;
        await lock.end().catch(() => undefined);
      }
      if (fellBack) return;
      await this.sleep(this.settings.retryMs);
    }
  }

  /** One streaming session on the slot, while `lock` holds the reader's lock. Rejects with what ended it. */
  private async stream(lock: { on(event: string, listener: () => void): void }): Promise<void> {
    const { LogicalReplicationService, PgoutputPlugin } = loadClient();
    const service = new LogicalReplicationService(pgConnectionConfig(this.dataSource, 'nestjs-outbox-wal'), {
      acknowledge: { auto: false, timeoutSeconds: 0 },
      flowControl: { enabled: true },
    });
    const queue = new WalTransactionQueue(this.settings.batchSize * (this.settings.maxBatchesInFlight + 1));
    let confirmed: string | undefined;
    let acknowledged: string | undefined;
    let failure: unknown;
    let endSession!: () => void;
    const ended = new Promise<void>((resolve) => (endSession = resolve));
    const end = (error?: unknown) => {
      failure ??= error;
      queue.close();
      endSession();
    };
    const pipeline = new WalPipeline(
      this.settings.maxBatchesInFlight,
      async (batch) => void (await handleWalBatch(this.dataSource, this.dialect, this.settings, this.host, batch)),
      async (lsn) => {
        confirmed = maxLsn(confirmed, lsn);
        acknowledged = confirmed;
        await service.acknowledge(beforeLsn(confirmed));
      },
    );
    service.on('data', (_lsn: string, message: { tag: string }) => queue.take(message as any));
    service.on('heartbeat', (lsn: string, _time: number, respond: boolean) => {
      // Nothing in hand: every commit before this keepalive is done, so the slot may move on (WAL of other tables
      // and databases), which keeps the retained WAL small while the outbox is quiet.
      if (pipeline.idle && queue.idle && clientIdle(service)) confirmed = maxLsn(confirmed, lsn);
      if (confirmed && (respond || confirmed !== acknowledged)) {
        acknowledged = confirmed;
        void service.acknowledge(beforeLsn(confirmed)).catch(() => undefined);
      }
    });
    service.on('start', () => (this.streaming = true));
    service.on('error', (error: unknown) => end(error));
    lock.on('end', () => end(new Error('the connection holding the WAL reader lock ended')));
    const plugin = new PgoutputPlugin({ protoVersion: 1, publicationNames: [this.settings.slot] });
    void service.subscribe(plugin, this.settings.slot).then(
      () => end(),
      (error: unknown) => end(error),
    );
    const work = (async () => {
      for (;;) {
        const batch = await queue.next(this.settings.batchSize);
        if (!batch) break;
        await pipeline.push(batch);
      }
      await pipeline.drain(); // stopping: the batches in hand are finished and acknowledged
    })().catch((error: unknown) => end(error));
    this.session = {
      stop: async () => {
        queue.close();
        await work;
        end();
      },
      done: ended,
    };
    await ended;
    queue.close();
    await work;
    await service.stop().catch(() => undefined);
    this.session = undefined;
    if (failure) throw failure;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wakeSleep = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/** `pg-logical-replication`, an optional peer dependency, loaded when a WAL mode starts. */
export function loadClient(): {
  LogicalReplicationService: new (config: object, options: object) => any;
  PgoutputPlugin: new (options: object) => any;
} {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('pg-logical-replication');
}

/**
 * True when the client has handed every message it received to the relay: with flow control it queues them
 * (`_messageQueue`, drained one by one while `_processing`) but emits keepalives at once, so a keepalive's LSN may
 * be ahead of rows still in its queue. Fields of pg-logical-replication 2.5; if they are missing, `false` (a
 * keepalive then never moves the slot: safe, only more WAL retained while the outbox is quiet).
 */
function clientIdle(service: { _messageQueue?: unknown[]; _processing?: boolean }): boolean {
  return Array.isArray(service._messageQueue) && service._messageQueue.length === 0 && service._processing === false;
}

/** An LSN as a 64-bit number. */
function lsnValue(lsn: string): bigint {
  const [hi, lo] = lsn.split('/');
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`);
}

function maxLsn(a: string | undefined, b: string): string {
  return a === undefined || lsnValue(b) > lsnValue(a) ? b : a;
}

/**
 * The LSN just before `lsn`: `pg-logical-replication`'s `acknowledge()` reports the LSN it is given plus one as
 * flushed, and a commit record that starts exactly there would then count as done.
 */
function beforeLsn(lsn: string): string {
  const value = lsnValue(lsn) - 1n;
  return `${(value >> 32n).toString(16).toUpperCase()}/${(value & 0xffffffffn).toString(16).toUpperCase()}`;
}
