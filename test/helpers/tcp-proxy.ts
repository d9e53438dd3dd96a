import { createServer, Server, Socket } from 'node:net';

/**
 * A TCP proxy owned by a test, to simulate an outage of a shared service without stopping it: `cut()` drops every
 * connection and refuses new ones; `restore()` lets traffic through again. `delay(ms)` holds every chunk that
 * passes, both ways, for `ms` before forwarding it (in order): a slow link, with the connection kept. `stall()`
 * holds every chunk (new connections are still accepted) until `resume()` forwards them, in order: a database that
 * stops answering without closing its connections (a network partition, a frozen server).
 */
export class TcpProxy {
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  private open = true;
  private delayMs = 0;
  /** While stalled: what arrived, to forward on `resume()` in arrival order. */
  private held?: Array<() => void>;
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

  /** From now on nothing is forwarded, either way; connections stay open and new ones are accepted. */
  stall(): void {
    this.held ??= [];
  }

  /** Forwards everything held since `stall()`, in order, and traffic flows again. */
  resume(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const forward of held) forward();
  }

  /** Copies `from` to `to`, each chunk after the delay in force when it arrived, in arrival order. */
  private forward(from: Socket, to: Socket): void {
    let last = 0;
    const onData = (chunk: Buffer) => {
      if (this.held) {
        this.held.push(() => onData(chunk));
        return;
      }
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
    };
    const onEnd = () => {
      if (this.held) {
        this.held.push(onEnd);
        return;
      }
      const wait = Math.max(0, last - Date.now());
      setTimeout(() => to.end(), wait);
    };
    from.on('data', onData);
    from.on('end', onEnd);
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
