import { Injectable, type Type } from '@nestjs/common';
import { DiscoveryService, ModuleRef } from '@nestjs/core';
import { OutboxConfigurationError } from '../errors';
import { getOutboxToken } from '../outbox.constants';
import { OutboxDeadLetters } from '../outbox/outbox-dead-letters.service';
import { findOutboxes } from '../outbox/outbox-directory';
import type { OutboxService } from '../outbox/outbox.service';
import { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxPublisher } from '../publisher/outbox-publisher';
import { badRequest, unknownOutbox } from './console-problem';

/** One outbox as the console reads and steers it. */
export interface ConsoleOutbox {
  /** Its DataSource's name (`'default'` for the default one). */
  name: string;
  outbox: OutboxService;
  deadLetters: OutboxDeadLetters;
  publisher: OutboxPublisher;
  /** Its DataSource, dialect and entities, for the console's own read-only queries (pending rows, keys). */
  database: OutboxDatabase;
}

/**
 * The outboxes the console shows: every `OutboxModule` import of the app (one per DataSource), found among its
 * providers when first asked for (after every provider exists), so they need not be global. A request names one
 * with `?outbox=<DataSource name>`; without it, the default DataSource's outbox (or, in an app whose outboxes are
 * all named, the first by name).
 */
@Injectable()
export class ConsoleOutboxes {
  private found?: Map<string, ConsoleOutbox>;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly moduleRef: ModuleRef,
  ) {}

  /** Every outbox, the default one first, then by name. */
  all(): ConsoleOutbox[] {
    return [...this.byName().values()];
  }

  /** The names of `all()`. */
  names(): string[] {
    return [...this.byName().keys()];
  }

  /** The outbox a request's `outbox` query parameter names; 400 when it is not one name, 404 when unknown. */
  resolve(raw: unknown): ConsoleOutbox {
    const outboxes = this.byName();
    if (raw === undefined || raw === '') return outboxes.values().next().value!;
    if (typeof raw !== 'string') {
      throw badRequest(`"outbox" must be one DataSource name, e.g. ?outbox=${this.names()[0]}.`);
    }
    const found = outboxes.get(raw);
    if (found) return found;
    throw unknownOutbox(
      `This app has no outbox named ${JSON.stringify(raw)}. Its outboxes: ${this.names().join(', ')} ` +
        '(the DataSource names given to OutboxModule.forRoot(); "default" for the default DataSource).',
    );
  }

  private byName(): Map<string, ConsoleOutbox> {
    if (this.found) return this.found;
    const services = findOutboxes(this.discovery);
    if (services.size === 0) {
      throw new OutboxConfigurationError(
        'OutboxConsoleModule found no outbox in the app: import OutboxModule.forRoot() (once per DataSource) in ' +
          'the same application as the console.',
      );
    }
    const get = <T>(type: Type<T>, name: string): T =>
      this.moduleRef.get<T>(getOutboxToken(type, name), { strict: false });
    this.found = new Map(
      [...services].map(([name, outbox]) => [
        name,
        {
          name,
          outbox,
          deadLetters: get(OutboxDeadLetters, name),
          publisher: get(OutboxPublisher, name),
          database: get(OutboxDatabase, name),
        },
      ]),
    );
    return this.found;
  }
}
