import { OutboxConfigurationError } from '../errors';

/** Metadata key of `@OnOutboxEvent()` (an array of registrations on the method). */
export const OUTBOX_EVENT_HANDLER_METADATA = 'nestjs-outbox:on-outbox-event';

/** Options of `@OnOutboxEvent()`. */
export interface OnOutboxEventOptions {
  /**
   * The handler's name: the scope of its deduplication records (`outbox-handler:<name>`, with the message id as
   * key) and the name in its errors and logs. Keep it stable: renaming it makes messages still in the outbox run
   * the handler again. Unique across the app; up to 200 characters.
   * @default `${ClassName}.${methodName}`
   */
  name?: string;
  /**
   * The outbox whose messages the handler runs for: the name of its TypeORM DataSource, as given to
   * `OutboxModule.forRoot({ dataSource })`. With several outboxes, each runs only the handlers bound to it.
   * @default the default DataSource's outbox
   */
  dataSource?: string;
}

/** One `@OnOutboxEvent()` on a method. */
export interface OutboxEventHandlerMetadata {
  pattern: string;
  name?: string;
  dataSource?: string;
}

/**
 * Runs the decorated provider method for every outbox message of `pattern`, from the outbox table after the
 * writing transaction committed: in a transaction of its own that also records (handler name, message id), so the
 * handler's effect is applied once however often the message is retried. The method receives the payload and an
 * `OutboxEventContext`; inside it `OutboxService.manager` and `emit()` join the handler's transaction. A throw rolls
 * it back and the handler's row is retried with the module's `retry` backoff, then dead-lettered; a key's messages
 * run in order. A message with several destinations (its broker and each handler) has one row each, delivered,
 * retried and dead-lettered on its own: a failing handler neither republishes to the broker nor holds back the other
 * destinations.
 *
 * ```ts
 * @Injectable()
 * class WelcomeEmails {
 *   @OnOutboxEvent('UserSignedUp')
 *   async send(payload: { email: string }, context: OutboxEventContext) { … }
 * }
 * ```
 */
export function OnOutboxEvent(pattern: string, options: OnOutboxEventOptions = {}): MethodDecorator {
  if (typeof pattern !== 'string' || pattern.length === 0) {
    throw new OutboxConfigurationError(
      `@OnOutboxEvent() needs the pattern of the messages to handle (a non-empty string), got ${String(pattern)}. ` +
        "Write @OnOutboxEvent('OrderPlaced').",
    );
  }
  if (options.name !== undefined && (typeof options.name !== 'string' || !/^.{1,200}$/s.test(options.name))) {
    throw new OutboxConfigurationError(
      `@OnOutboxEvent('${pattern}') option \`name\` must be a string of 1 to 200 characters. ` +
        'Leave it out for ClassName.methodName.',
    );
  }
  if (options.dataSource !== undefined && (typeof options.dataSource !== 'string' || options.dataSource === '')) {
    throw new OutboxConfigurationError(
      `@OnOutboxEvent('${pattern}') option \`dataSource\` must be the name of a DataSource with an outbox ` +
        "(OutboxModule.forRoot({ dataSource: 'billing' })). Leave it out for the default DataSource's outbox.",
    );
  }
  return (_target, _key, descriptor: PropertyDescriptor) => {
    const method = descriptor.value as object;
    const existing: OutboxEventHandlerMetadata[] = Reflect.getMetadata(OUTBOX_EVENT_HANDLER_METADATA, method) ?? [];
    Reflect.defineMetadata(
      OUTBOX_EVENT_HANDLER_METADATA,
      [...existing, { pattern, name: options.name, dataSource: options.dataSource }],
      method,
    );
    return descriptor;
  };
}
