import type { Logger } from '@nestjs/common';
import { describeError } from '../util/describe-error';
import type { IdempotencyAttempt } from './held-attempt';

/**
 * Rolls an attempt back after its handler failed. A rollback that fails too (the connection is gone) is logged as a
 * warning and not thrown, so the caller answers with the handler's error rather than the rollback's.
 */
export async function rollbackQuietly(attempt: IdempotencyAttempt, logger: Pick<Logger, 'warn'>): Promise<void> {
  try {
    await attempt.rollback();
  } catch (error) {
    logger.warn(`Rollback failed: ${describeError(error)}`);
  }
}
