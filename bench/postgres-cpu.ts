import { readFileSync } from 'node:fs';
import { Client } from 'pg';

/**
 * CPU time the PostgreSQL backends of one database have used, read from `/proc/<pid>/stat` (the server runs on this
 * machine). Counting only the bench database's backends keeps other users of the shared server out of the figure,
 * so it shows what each variant costs the database even on a busy machine. Unavailable (undefined) when the server
 * is not local or /proc cannot be read.
 */
export class PostgresCpu {
  private readonly ticksPerSecond = 100;

  private constructor(
    private readonly client: Client,
    private readonly database: string,
  ) {}

  /** Connects with `options` (TypeORM's PostgreSQL options); undefined when /proc is not readable. */
  static async open(options: Record<string, any>): Promise<PostgresCpu | undefined> {
    try {
      readFileSync('/proc/self/stat');
    } catch {
      return undefined;
    }
    const client = new Client({
      host: options.host,
      port: options.port,
      user: options.username,
      password: options.password,
      database: options.database,
    });
    await client.connect();
    return new PostgresCpu(client, options.database);
  }

  /** CPU time so far (µs) of every backend connected to the database, by pid (this monitor's own left out). */
  async sample(): Promise<Map<number, number>> {
    const { rows } = await this.client.query(
      'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [this.database],
    );
    const cpu = new Map<number, number>();
    for (const { pid } of rows) {
      try {
        // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        cpu.set(pid, ((Number(fields[11]) + Number(fields[12])) * 1e6) / this.ticksPerSecond);
      } catch {
        // The backend exited meanwhile.
      }
    }
    return cpu;
  }

  /** CPU time (µs) the backends used between two samples (a backend that appeared counts from zero). */
  static between(before: Map<number, number>, after: Map<number, number>): number {
    let total = 0;
    for (const [pid, value] of after) total += value - (before.get(pid) ?? 0);
    return total;
  }

  close(): Promise<void> {
    return this.client.end();
  }
}
