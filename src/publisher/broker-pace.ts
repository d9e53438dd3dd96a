import type { LoggerService } from '@nestjs/common';
import type { ResolvedOutboxOptions } from '../outbox.options';

/** What the publisher says when its broker's confirms become late, and when they are prompt again. */
export interface BrokerPaceReport {
  slow: boolean;
  /** Rows the next claims take. */
  batchSize: number;
  /** How long the episode lasted (when it ends). */
  durationMs?: number;
}

/**
 * The relay's pace while the broker confirms late (past `publishTimeout`, on a connected client): each batch that
 * had a late confirm halves the rows the next claims take (down to a sixteenth of `batchSize`), each batch without
 * one doubles them back. An episode starts with the first late confirm and ends when the size is back to
 * `batchSize`; each start is logged once as a warning, each end as one line (or told to `report`, in tests).
 */
export class BrokerPace {
  private size: number;
  private since?: number;

  private readonly fullSize: number;
  private readonly report: (report: BrokerPaceReport) => void;

  constructor(
    publisher: Pick<ResolvedOutboxOptions['publisher'], 'batchSize' | 'publishTimeout' | 'maxConfirmWait'>,
    logger: Pick<LoggerService, 'warn' | 'log'> | ((report: BrokerPaceReport) => void),
  ) {
    this.fullSize = publisher.batchSize;
    this.size = this.fullSize;
    this.report = typeof logger === 'function' ? logger : (report) => logPace(logger, publisher, report);
  }

  /** Rows the next claim takes. */
  get batchSize(): number {
    return this.size;
  }

  /** True while confirms are late (from the first late confirm until batches of full size are prompt again). */
  get slow(): boolean {
    return this.since !== undefined;
  }

  /** A confirm was late on a connected client. */
  confirmLate(): void {
    if (this.since !== undefined) return;
    this.since = Date.now();
    this.report({ slow: true, batchSize: this.smaller() });
  }

  /** A batch's publishes are over: `late` tells whether one of its confirms was late; `sent` how many confirmed. */
  batchDone(late: boolean, sent: number): void {
    if (late) {
      this.size = this.smaller();
      return;
    }
    if (this.since === undefined || sent === 0) return;
    this.size = Math.min(this.fullSize, this.size * 2);
    if (this.size < this.fullSize) return;
    const durationMs = Date.now() - this.since;
    this.since = undefined;
    this.report({ slow: false, batchSize: this.size, durationMs });
  }

  private smaller(): number {
    return Math.max(Math.ceil(this.fullSize / 16), Math.floor(this.size / 2), 1);
  }
}

/** One warning when confirms become late, one line when they are prompt again. */
function logPace(
  logger: Pick<LoggerService, 'warn' | 'log'>,
  { publishTimeout, maxConfirmWait }: Pick<ResolvedOutboxOptions['publisher'], 'publishTimeout' | 'maxConfirmWait'>,
  { slow, batchSize, durationMs }: BrokerPaceReport,
): void {
  if (slow) {
    logger.warn(
      `The broker confirms late: a publish has waited more than publisher.publishTimeout (${publishTimeout} ms) ` +
        'for its confirm while the client is connected. Waiting for the confirms (up to publisher.maxConfirmWait, ' +
        `${maxConfirmWait} ms; a late confirm still marks the message sent and spends no attempt), extending the ` +
        `leases of the batches waiting, and claiming at most ${batchSize} rows per batch until confirms are prompt ` +
        'again. If the broker is this slow normally, raise publisher.publishTimeout.',
    );
  } else {
    const seconds = Math.round((durationMs ?? 0) / 1000);
    logger.log(`The broker confirms promptly again after ${seconds} s: batches of ${batchSize} rows.`);
  }
}
