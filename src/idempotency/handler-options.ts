import { type ExecutionContext, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { OutboxConfigurationError } from '../errors';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import {
  IDEMPOTENT_OPTIONS,
  type IdempotentOptions,
  type ResolvedIdempotencyDefaults,
  type ResolvedIdempotentOptions,
} from './idempotency.options';
import { resolveIdempotencyDefaults } from './idempotency.options-validation';
import { PATH_METADATA } from '@nestjs/common/constants';
import { PATTERN_HANDLER_METADATA } from '@nestjs/microservices/constants';
import { isDefaultDataSource } from '../outbox.constants';
import { assertAckMode } from '../transports/consumer-ack-mode';
import { IdempotencyService } from './idempotency.service';

/**
 * The options of each `@Idempotent()` handler: the module's `idempotency` defaults ← the controller's options ← the
 * method's, checked and resolved once per handler (the call-specific functions `scope`, `key` and `fingerprint`
 * are taken as given).
 */
export class HandlerOptionsResolver {
  /** Per handler function. */
  private readonly resolved = new WeakMap<object, ResolvedIdempotentOptions>();

  /**
   * `defaults` is read when a handler is first resolved (the module's `idempotency` options); `dataSource` names
   * the DataSource the records go to.
   */
  constructor(
    private readonly reflector: Reflector,
    private readonly defaults: () => ResolvedIdempotencyDefaults,
    private readonly dataSource: () => string = () => 'default',
    /** `manualAck` of a handler from the one given (undefined: not set): `RpcServers.ackModeOf`. */
    private readonly ackMode: (consumer: string, handler: Function, given: boolean | undefined) => boolean = (
      _consumer,
      _handler,
      given,
    ) => given ?? false,
  ) {}

  /** The resolved options of the context's handler (cached per handler). */
  resolve(context: ExecutionContext): ResolvedIdempotentOptions {
    const handler = context.getHandler();
    let resolved = this.resolved.get(handler);
    if (!resolved) {
      resolved = this.merge(context);
      this.resolved.set(handler, resolved);
    }
    return resolved;
  }

  private merge(context: ExecutionContext): ResolvedIdempotentOptions {
    const controller = context.getClass();
    const handler = context.getHandler();
    const merged: IdempotentOptions = {
      ...(this.reflector.get<IdempotentOptions>(IDEMPOTENT_OPTIONS, controller) ?? {}),
      ...(this.reflector.get<IdempotentOptions>(IDEMPOTENT_OPTIONS, handler) ?? {}),
    };
    const { scope, key, fingerprint, dataSource: _dataSource, mode = 'process', ...defaults } = merged;
    let base = resolveIdempotencyDefaults(
      Object.fromEntries(Object.entries(defaults).filter(([, v]) => v !== undefined)),
      this.defaults(),
    );
    if (mode !== 'process' && mode !== 'accept-first') {
      throw new OutboxConfigurationError(
        `OutboxModule option \`mode\` must be 'process' or 'accept-first', got ${JSON.stringify(mode)}. ` +
          "Pass mode: 'accept-first' to ack a consumer's messages before its handler runs, or leave it out.",
      );
    }
    if (mode === 'accept-first' && !base.retry) {
      // The broker no longer redelivers an accepted message: its row must be retried, with the defaults if need be.
      if (merged.retry === false) {
        throw new OutboxConfigurationError(
          "OutboxModule option `retry: false` contradicts mode: 'accept-first': the message is acked before its " +
            'handler runs, so only the retries of its inbox row can run it again after a failure. Leave `retry` ' +
            'out (the default retry options) or give a policy, or drop `accept-first`.',
        );
      }
      base = resolveIdempotencyDefaults({ retry: true }, base);
    }
    const consumer = `${controller.name}.${handler.name}`;
    return {
      ...base,
      mode,
      manualAck: this.ackMode(consumer, handler, base.manualAck),
      scope,
      key,
      fingerprint,
      headerKey: base.header.toLowerCase(),
      consumer,
      dataSource: this.dataSource(),
    };
  }
}

/** The options of `@Idempotent()` that take a function, when given. */
const FUNCTION_OPTIONS = ['scope', 'key', 'fingerprint'] as const;

/**
 * Checks every `@Idempotent()` handler of the app when it boots, so that a wrong option fails `app.init()` with an
 * `OutboxConfigurationError` naming the handler, the option and the fix — not the first request or message (a
 * message refused at its first delivery is never acked, and its queue stops behind it). Each outbox checks the
 * handlers that record in it, merged with its module's `idempotency` defaults as a call would be. (A `dataSource`
 * naming no outbox of the app fails earlier: Nest cannot inject that outbox's `IdempotencyService`.)
 *
 * Message handlers are also checked against the RabbitMQ consumers that deliver them (`transports/consumer-ack-mode.ts`): a
 * `manualAck` that contradicts the consumer's `noAck` fails with an `OutboxAckModeError` (`OUTBOX_ACK_MODE`), and a
 * consumer whose ack mode cannot be read is warned about once. The servers are known by then: a hybrid app's
 * `connectMicroservice()` registers its handlers at once, and a microservice registers them before its init hooks.
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
    let given: boolean | undefined; // the resolved handler's `manualAck` as given (undefined: derived)
    const resolver = new HandlerOptionsResolver(
      this.reflector,
      () => this.idempotency.defaults,
      () => own,
      (_consumer, _handler, manualAck) => {
        given = manualAck;
        return manualAck ?? false;
      },
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
      refuseMisplacedMode(where, handler, options);
      const mode = this.idempotency.rpcServers.ackModeOf(where, handler, given);
      assertAckMode(mode);
      if (mode.unknown) new Logger('Idempotency').warn(mode.unknown);
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

/**
 * `mode: 'accept-first'` is for `@EventPattern` consumers only: an HTTP client and a `@MessagePattern` caller wait
 * for the handler's answer, which an accepted message has not got yet.
 */
function refuseMisplacedMode(where: string, handler: Function, options: IdempotentOptions): void {
  if (options.mode === undefined || options.mode === 'process') return;
  const kind: number | undefined = Reflect.getMetadata(PATTERN_HANDLER_METADATA, handler);
  if (kind === EVENT_HANDLER) return;
  const what = kind === undefined ? 'an HTTP route' : 'a @MessagePattern handler (its caller waits for the answer)';
  throw new OutboxConfigurationError(
    `${where}: option \`mode: '${String(options.mode)}'\` is only for @EventPattern consumers, and this is ${what}. ` +
      "Remove `mode` here; on a controller's @Idempotent(), put @Idempotent({ mode: 'accept-first' }) on its " +
      '@EventPattern methods instead.',
  );
}

const EVENT_HANDLER = 2; // PatternHandler.EVENT of @nestjs/microservices
