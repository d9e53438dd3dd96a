import { CreateOutboxTables1764374400000 } from './1764374400000-outbox-tables';
import { CreateIdempotencyKeys1764460800000 } from './1764460800000-idempotency-keys';
import { AddOutboxAttempts1765152000000 } from './1765152000000-outbox-attempts';
import { CreateIdempotencySteps1765411200000 } from './1765411200000-idempotency-steps';
import { AddOutboxDestinations1765497600000 } from './1765497600000-outbox-destinations';

/**
 * Every migration the library ships, oldest first: `migrations: [...OUTBOX_MIGRATIONS, ...yours]`. A new release
 * that adds a migration adds it here, so an app that lists this array runs it without changing its configuration
 * (the startup schema check names any migration still missing).
 */
export const OUTBOX_MIGRATIONS = [
  CreateOutboxTables1764374400000,
  CreateIdempotencyKeys1764460800000,
  AddOutboxAttempts1765152000000,
  CreateIdempotencySteps1765411200000,
  AddOutboxDestinations1765497600000,
] as const;
