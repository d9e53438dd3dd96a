import type { InjectionToken } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import type { ClientProxy } from '@nestjs/microservices';
import { OutboxConfigurationError, OutboxRouteError } from '../errors';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { checkBrokerSetup } from '../transports/broker-setup';
import { longestDelay } from '../util/retry-policy';
import { describeError } from '../util/describe-error';
import { BrokerClient } from './broker-client';
import type { OutboxRouteMessage } from './outbox-route.types';
import { tokenName } from './route.options-validation';

/** Longest client token name a row can name as its destination (`broker:<name>` in 255 characters). */
const MAX_TOKEN_NAME = 240;

/** One broker a message can be published to: a `ClientProxy` and its state. */
export interface BrokerDestination {
  readonly token: InjectionToken;
  readonly client: BrokerClient;
  /**
   * Consecutive batches in which this broker could not be reached and took no message: the backoff of such
   * failures grows with it. Kept per broker, so one broker's outage does not reset (or grow) another's.
   */
  unreachableStreak: number;
}

/**
 * The brokers of an outbox: none (in-process handlers only), the one `client`, or the `route.clients` among which
 * `route.select()` picks per message. Every client is looked up and checked by `resolveAll()` (at startup).
 */
export class BrokerDestinations {
  private readonly list: BrokerDestination[];
  private readonly byToken = new Map<InjectionToken, BrokerDestination>();

  constructor(
    moduleRef: ModuleRef,
    private readonly options: Pick<ResolvedOutboxOptions, 'client' | 'transport' | 'route'> &
      Partial<Pick<ResolvedOutboxOptions, 'cloudEvents' | 'publisher' | 'retry'>>,
  ) {
    const { client, route, transport, cloudEvents } = options;
    const tokens: Array<[InjectionToken, string]> = route
      ? route.clients.map((token, i) => [token, `route.clients[${i}]`])
      : client !== undefined
        ? [[client, 'client']]
        : [];
    this.list = tokens.map(([token, optionName]) => ({
      token,
      client: new BrokerClient(moduleRef, { client: token, transport, cloudEvents }, optionName),
      unreachableStreak: 0,
    }));
    const names = new Map<string, string>();
    for (const [token, optionName] of tokens) {
      // Rows name their broker by the token's name (`broker:<name>`): two clients must not share one.
      const name = tokenName(token);
      const other = names.get(name);
      if (other !== undefined) {
        throw new OutboxConfigurationError(
          `OutboxModule option \`${optionName}\` and \`${other}\` are both named ${name}: outbox rows name their ` +
            'broker by its token name, so the names must differ. Give one client a token of another name.',
        );
      }
      if (name.length > MAX_TOKEN_NAME) {
        throw new OutboxConfigurationError(
          `OutboxModule option \`${optionName}\` names a client token of ${name.length} characters; outbox rows ` +
            `store it (as broker:<name>) in a column of 255, so keep it to ${MAX_TOKEN_NAME}. Use a shorter token.`,
        );
      }
      names.set(name, optionName);
    }
    for (const destination of this.list) this.byToken.set(destination.token, destination);
  }

  /** True when the outbox publishes to at least one broker. */
  get configured(): boolean {
    return this.list.length > 0;
  }

  /** The `client`, or the first of `route.clients`; undefined without a broker. */
  get primary(): BrokerDestination | undefined {
    return this.list[0];
  }

  /** Every broker. */
  get all(): readonly BrokerDestination[] {
    return this.list;
  }

  /** Looks up and checks every client (throws `OutboxConfigurationError` naming the option and the fix). */
  resolveAll(): void {
    for (const destination of this.list) destination.client.resolve();
  }

  /** Loads what each client's transport needs (optional peer packages) before the first record is built. */
  async ready(): Promise<void> {
    this.resolveAll();
    for (const destination of this.list) await destination.client.transport?.ready?.();
    await this.checkSetup();
  }

  /** Lets each client check its broker's setup against the relay's timing (a JetStream stream's duplicate window). */
  async checkSetup(): Promise<void> {
    const leaseDuration = this.options.publisher?.leaseDuration ?? 0;
    // The longest delay of any pattern's policy: a message of that pattern may wait that long before its retry.
    const timing = { leaseDuration, maxRetryDelay: this.options.retry ? longestDelay(this.options.retry) : 0 };
    for (const destination of this.list) await checkBrokerSetup(destination.client.resolve(), timing);
  }

  /**
   * The broker of one message: the only one, or the one `route.select()` names (`null`: none, the message stays in
   * the process). Throws `OutboxRouteError` when select() throws or returns a token not in `route.clients`.
   */
  select(message: OutboxRouteMessage): BrokerDestination | null {
    const route = this.options.route;
    if (!route) return this.list[0];
    let token: InjectionToken | null;
    try {
      token = route.select(message);
    } catch (error) {
      throw new OutboxRouteError(
        `OutboxModule route.select() threw for message ${message.messageId} (pattern '${message.pattern}'): ` +
          `${describeError(error)}. Fix select(), then requeue the message if it went dead.`,
      );
    }
    if (token === null) return null;
    const destination = this.byToken.get(token);
    if (!destination) {
      const known = route.clients.map(tokenName).join(', ');
      throw new OutboxRouteError(
        `OutboxModule route.select() returned ${describeToken(token)} for message ${message.messageId} ` +
          `(pattern '${message.pattern}'), which is not in route.clients (${known}). Return one of those tokens, or ` +
          'add the client to route.clients (or return null to keep it in the process); the message is retried and, after retry.maxAttempts, dead-lettered.',
      );
    }
    return destination;
  }

  /**
   * The broker of a message as the relay delivers it: `null` when it has none (no `client` nor `route`, or
   * `route.select()` returned null); the `OutboxRouteError` itself (reported as the broker's failure) when select()
   * failed.
   */
  brokerOf(message: OutboxRouteMessage): BrokerDestination | OutboxRouteError | null {
    if (!this.configured) return null;
    const { messageId, pattern, key, headers } = message;
    try {
      return this.select({ messageId, pattern, key, headers });
    } catch (error) {
      if (error instanceof OutboxRouteError) return error;
      throw error;
    }
  }

  /** The resolved `ClientProxy` of a destination. */
  clientOf(destination: BrokerDestination): ClientProxy {
    return destination.client.resolve();
  }

  /** Stops watching the clients' status (the clients themselves are closed by `ClientsModule`). */
  close(): void {
    for (const destination of this.list) destination.client.close();
  }
}

function describeToken(token: unknown): string {
  if (token === undefined || token === null) return String(token);
  if (typeof token === 'string') return `'${token}'`;
  if (typeof token === 'symbol' || typeof token === 'function') return tokenName(token as InjectionToken);
  return `a ${typeof token}`;
}
