import { Logger } from '@nestjs/common';
import type { OutboxStats } from '../dialects/outbox-dialect';
import { describeError } from '../util/describe-error';
import type { ConsoleOutbox } from './console-outboxes';

/** One outbox in `GET <path>/api/outboxes`: its name and its backlog, or why the backlog could not be read. */
export interface ConsoleOutboxView {
  /** The DataSource's name: what `?outbox=` takes. */
  name: string;
  /** True for the outbox the console shows without `?outbox=`: the default DataSource's (else the first named). */
  default: boolean;
  /** `OutboxService.stats()`, or null when it failed (the error is logged, not sent). */
  stats: OutboxStats | null;
  /** Why `stats` is null. */
  error?: string;
}

const logger = new Logger('OutboxConsole');

/**
 * The outboxes with their backlogs, read together; one that cannot be read (its database down) is listed with
 * `stats: null` instead of failing the others.
 */
export function readOutboxList(outboxes: readonly ConsoleOutbox[]): Promise<ConsoleOutboxView[]> {
  return Promise.all(
    outboxes.map(async ({ name, outbox }, index): Promise<ConsoleOutboxView> => {
      const isDefault = index === 0; // the default DataSource's comes first, else the first named one
      try {
        return { name, default: isDefault, stats: await outbox.stats() };
      } catch (error) {
        logger.warn(`Could not read the stats of the outbox '${name}': ${describeError(error)}`);
        return { name, default: isDefault, stats: null, error: 'The stats query failed; see the server log.' };
      }
    }),
  );
}
