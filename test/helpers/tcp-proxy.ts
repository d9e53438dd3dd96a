import { createServer, Server, Socket } from 'node:net';

/**
 * A TCP proxy owned by a test, to simulate an outage of a shared service without stopping it: `cut()` drops every
 * connection and refuses new ones; `restore()` lets traffic through again. `delay(ms)` holds every chunk that
 * passes, both ways, for `ms` before forwarding it (in order): a slow link, with the connection kept.
 */
export class TcpProxy {
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  private open = true;
  private delayMs = 0;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(): Promise<this> {
    this.server = createServer((client) => {
      if (!this.open) {
        client.destroy();
        return;
      }
      const upstream = new Socket();
      this.track(client);
      this.track(upstream);
      upstream.connect(this.targetPort, this.targetHost);
      this.forward(client, upstream);
      this.forward(upstream, client);
      const close = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server!.address() as { port: number }).port;
    return this;
  }

  /** Drops all connections and refuses new ones. */
  cut(): void {
    this.open = false;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  restore(): void {
    this.open = true;
  }

  /** From now on, every chunk waits `ms` before it is forwarded (0: at once). Open connections stay open. */
  delay(ms: number): void {
    this.delayMs = ms;
  }

  /** Copies `from` to `to`, each chunk after the delay in force when it arrived, in arrival order. */
  private forward(from: Socket, to: Socket): void {
    let last = 0;
    from.on('data', (chunk: Buffer) => {
      if (this.delayMs === 0 && last <= Date.now()) {
        if (!to.destroyed) to.write(chunk);
        return;
      }
      // Never before an earlier chunk: order on the wire is kept when the delay changes.
      const due = Math.max(Date.now() + this.delayMs, last);
      last = due;
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, due - Date.now());
    });
    from.on('end', () => {
      const wait = Math.max(0, last - Date.now());
      setTimeout(() => to.end(), wait);
    });
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
  }
}
