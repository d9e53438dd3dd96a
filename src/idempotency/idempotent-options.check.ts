import { Injectable, OnModuleInit } from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants';
import type { ExecutionContext } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { PATTERN_HANDLER_METADATA } from '@nestjs/microservices/constants';
import { OutboxConfigurationError } from '../errors';
import { isDefaultDataSource } from '../outbox.constants';
import { HandlerOptionsResolver } from './handler-options.resolver';
import { IDEMPOTENT_OPTIONS } from './idempotency.constants';
import type { IdempotentOptions } from './idempotency.options';
import { IdempotencyService } from './idempotency.service';

/** The options of `@Idempotent()` that take a function, when given. */
const FUNCTION_OPTIONS = ['scope', 'key', 'fingerprint'] as const;

/**
 * Checks every `@Idempotent()` handler of the app when it boots, so that a wrong option fails `app.init()` with an
 * `OutboxConfigurationError` naming the handler, the option and the fix — not the first request or message (a
 * message refused at its first delivery is never acked, and its queue stops behind it). Each outbox checks the
 * handlers that record in it, merged with its module's `idempotency` defaults as a call would be. (A `dataSource`
 * naming no outbox of the app fails earlier: Nest cannot inject that outbox's `IdempotencyService`.)
 */
@Injectable()
export class IdempotentOptionsCheck implements OnModuleInit {
  constructor(
    private readonly idempotency: IdempotencyService,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
  ) {}

  onModuleInit(): void {
    const own = nameOf(this.idempotency.dataSourceName);
    const resolver = new HandlerOptionsResolver(
      this.reflector,
      () => this.idempotency.defaults,
      () => own,
    );
    for (const { controller, method, handler, options } of this.idempotentHandlers()) {
      const where = `@Idempotent() on ${controller.name}.${method}`;
      const dataSource = nameOf(options.dataSource);
      if (dataSource !== own) continue;
      for (const name of FUNCTION_OPTIONS) {
        const value = options[name];
        if (value !== undefined && typeof value !== 'function') {
          throw new OutboxConfigurationError(
            `${where}: option \`${name}\` must be a function, got ${value === null ? 'null' : typeof value}. ` +
              `Pass e.g. \`${name}: (context) => …\`, or leave it out.`,
          );
        }
      }
      try {
        resolver.resolve({ getClass: () => controller, getHandler: () => handler } as ExecutionContext);
      } catch (error) {
        if (!(error instanceof OutboxConfigurationError)) throw error;
        throw new OutboxConfigurationError(`${where}: ${error.message.replace(/^OutboxModule option /, 'option ')}`);
      }
    }
  }

  /** Every controller method `@Idempotent()` applies to (its own or its class's), with the merged options. */
  private *idempotentHandlers(): Generator<{
    controller: Function;
    method: string;
    handler: Function;
    options: IdempotentOptions;
  }> {
    for (const wrapper of this.discovery.getControllers()) {
      const controller = wrapper.metatype as Function | undefined;
      if (typeof controller !== 'function' || !controller.prototype) continue;
      const classOptions: IdempotentOptions | undefined = Reflect.getMetadata(IDEMPOTENT_OPTIONS, controller);
      for (const method of this.scanner.getAllMethodNames(controller.prototype)) {
        const handler = (controller.prototype as Record<string, unknown>)[method];
        if (typeof handler !== 'function') continue;
        const own: IdempotentOptions | undefined = Reflect.getMetadata(IDEMPOTENT_OPTIONS, handler);
        const isHandler =
          Reflect.getMetadata(PATH_METADATA, handler) !== undefined ||
          Reflect.getMetadata(PATTERN_HANDLER_METADATA, handler) !== undefined;
        if (own === undefined && (classOptions === undefined || !isHandler)) continue;
        yield { controller, method, handler, options: { ...classOptions, ...own } };
      }
    }
  }
}

/** A DataSource name as the outboxes are told apart: 'default' for the default DataSource. */
function nameOf(dataSource: string | undefined): string {
  return isDefaultDataSource(dataSource) ? 'default' : dataSource!;
}
