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
  /** Whether its dead letters may be edited (`deadLetters.allowEdit`): the page offers Edit only then. */
  allowEdit: boolean;
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
    outboxes.map(async ({ name, outbox, deadLetters }, index): Promise<ConsoleOutboxView> => {
      const isDefault = index === 0; // the default DataSource's comes first, else the first named one
      const allowEdit = deadLetters.editAllowed;
      try {
        return { name, default: isDefault, allowEdit, stats: await outbox.stats() };
      } catch (error) {
        logger.warn(`Could not read the stats of the outbox '${name}': ${describeError(error)}`);
        const failed = 'The stats query failed; see the server log.';
        return { name, default: isDefault, allowEdit, stats: null, error: failed };
      }
    }),
  );
}
