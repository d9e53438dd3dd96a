import type { ModuleRef } from '@nestjs/core';
import type { ClientProxy } from '@nestjs/microservices';
import type { Subscription } from 'rxjs';
import { OutboxConfigurationError } from '../errors';
import type { ResolvedOutboxOptions } from '../outbox.options';
import type { OutboxTransport } from '../transports/outbox-transport';
import { withCloudEvents } from '../transports/cloud-events.transport';
import { resolveTransport } from '../transports/resolve-transport';
import { isDisconnectedStatus } from '../transports/transport-unreachable';

/**
 * The `ClientProxy` the publisher sends through: looked up once by the `client` token (anywhere in the app), checked,
 * paired with its transport (`transport` option or detected), and watched for its connection status (Nest 11+
 * `ClientProxy.status`), which tells a publish timeout of a disconnected client from one of a connected client.
 */
export class BrokerClient {
  private client?: ClientProxy;
  private outboxTransport?: OutboxTransport;
  /** The client's last reported connection status, when it reports one. */
  private status?: string;
  private statusSubscription?: Subscription;

  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly options: Pick<ResolvedOutboxOptions, 'client' | 'transport'> &
      Partial<Pick<ResolvedOutboxOptions, 'cloudEvents'>>,
    /** How errors name the option the token came from (`route.clients[1]` for a routed client). */
    private readonly optionName = 'client',
  ) {}

  /** The client, looked up on first use; throws `OutboxConfigurationError` naming the fix when it cannot be. */
  resolve(): ClientProxy {
    if (this.client) return this.client;
    const token = this.options.client;
    if (token === undefined) {
      throw new OutboxConfigurationError(
        'OutboxModule has no `client` to publish through. ' +
          'Pass `client: <token of a ClientsModule client>` to forRoot().',
      );
    }
    let client: ClientProxy;
    try {
      client = this.moduleRef.get(token, { strict: false });
    } catch {
      const name = String(typeof token === 'function' ? token.name : token);
      throw new OutboxConfigurationError(
        `OutboxModule option \`${this.optionName}\` names ${name}, but no provider with that token exists. Register it with ` +
          'ClientsModule.register([{ name: <token>, transport, options }]) in a module the app imports.',
      );
    }
    if (typeof (client as ClientProxy)?.emit !== 'function') {
      const kind = (client as object)?.constructor?.name ?? typeof client;
      throw new OutboxConfigurationError(
        `OutboxModule option \`${this.optionName}\` resolves to ${kind}, which is not a ClientProxy.`,
      );
    }
    this.outboxTransport = withCloudEvents(resolveTransport(this.options.transport, client), this.options.cloudEvents);
    this.client = client;
    this.watchStatus(client);
    return client;
  }

  /** How messages are built for the client's transport; known once `resolve()` has found the client. */
  get transport(): OutboxTransport | undefined {
    return this.outboxTransport;
  }

  /** Whether the client reports itself connected; `undefined` when it reports no status. */
  get connected(): boolean | undefined {
    return this.status === undefined ? undefined : !isDisconnectedStatus(this.status);
  }

  /** Stops watching the client's status (the client itself is closed by `ClientsModule`). */
  close(): void {
    this.statusSubscription?.unsubscribe();
  }

  private watchStatus(client: ClientProxy): void {
    type StatusSource = { subscribe?(next: (status: unknown) => void): Subscription };
    const status = (client as unknown as { status?: StatusSource }).status;
    if (typeof status?.subscribe !== 'function') return;
    this.statusSubscription = status.subscribe((value) => {
      this.status = typeof value === 'string' ? value : undefined;
    });
  }
}
