import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** Repository root (the child runs with it as working directory, so `tsconfig.json` is found). */
export const REPO_ROOT = join(__dirname, '..', '..', '..');

/** Prefix of the lines a child app writes for the test (the rest of its output is its log). */
export const SIGNAL_PREFIX = '@fault ';

/** A line a child app wrote for the test: `@fault {"type": "...", ...}`. */
export interface ChildSignal {
  type: string;
  [field: string]: unknown;
}

/**
 * Writes a signal line for the test. Stdout is a pipe, which Node writes synchronously on Linux, so a line written
 * before a SIGKILL is never lost.
 */
export function signal(type: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${SIGNAL_PREFIX}${JSON.stringify({ type, ...fields })}\n`);
}

/** Reads the JSON config a child app was started with (`OUTBOX_FAULT_CONFIG`). */
export function childConfig<T>(): T {
  const raw = process.env.OUTBOX_FAULT_CONFIG;
  if (!raw) throw new Error('OUTBOX_FAULT_CONFIG is not set: start this file through ChildApp');
  return JSON.parse(raw) as T;
}

/**
 * A Nest app in a child process (TypeScript through ts-node, transpile only), which a fault test can SIGKILL at
 * any moment and start again. The child reports progress with `signal()` lines; everything else it prints is kept
 * as its log (the last lines are shown when it fails to start).
 */
export class ChildApp {
  private child?: ChildProcess;
  private exited?: Promise<void>;
  private readonly listeners = new Set<(s: ChildSignal) => void>();
  /** Every signal of every incarnation, in order. */
  readonly signals: ChildSignal[] = [];
  /** Log lines (not signals) of every incarnation. */
  readonly log: string[] = [];
  /** SIGKILLs sent so far. */
  kills = 0;
  /** Processes started so far. */
  starts = 0;

  constructor(
    /** Entry file, relative to test/faults/apps. */
    private readonly entry: string,
    private readonly config: unknown,
    readonly name = entry,
  ) {}

  get running(): boolean {
    return this.child !== undefined;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Calls `listener` for every signal from now on. Returns a function that removes it. */
  onSignal(listener: (s: ChildSignal) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Starts the process and resolves once it signals `ready` (rejects if it exits first or takes too long). */
  async start(timeoutMs = 90_000): Promise<void> {
    if (this.child) throw new Error(`${this.name} is already running`);
    const child = spawn(
      process.execPath,
      ['-r', 'ts-node/register/transpile-only', join(__dirname, '..', 'apps', this.entry)],
      {
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          NO_COLOR: '1',
          OUTBOX_FAULT_CONFIG: JSON.stringify(this.config),
          TS_NODE_PROJECT: join(REPO_ROOT, 'tsconfig.json'),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.child = child;
    this.starts++;
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.name} did not signal ready within ${timeoutMs} ms\n${this.tail()}`)),
        timeoutMs,
      );
      const off = this.onSignal((s) => {
        if (s.type === 'ready') {
          clearTimeout(timer);
          off();
          resolve();
        }
      });
      child.once('exit', (code, sig) => {
        clearTimeout(timer);
        off();
        reject(new Error(`${this.name} exited (${sig ?? code}) before it was ready\n${this.tail()}`));
      });
    });
    this.exited = new Promise<void>((resolve) =>
      child.once('exit', () => {
        if (this.child === child) this.child = undefined;
        resolve();
      }),
    );
    createInterface({ input: child.stdout! }).on('line', (line) => this.take(line));
    createInterface({ input: child.stderr! }).on('line', (line) => this.log.push(line));
    await ready;
  }

  /** SIGKILL: no shutdown hook runs, nothing is flushed, claims and transactions are left as they were. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.kills++;
    child.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM (graceful), escalating to SIGKILL (not counted as a kill) after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** Resolves with the first signal (already received, or from now on) that `match` accepts. */
  waitForSignal(match: (s: ChildSignal) => boolean, timeoutMs = 60_000): Promise<ChildSignal> {
    const past = this.signals.find(match);
    if (past) return Promise.resolve(past);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        reject(new Error(`${this.name}: no matching signal within ${timeoutMs} ms\n${this.tail()}`));
      }, timeoutMs);
      const off = this.onSignal((s) => {
        if (match(s)) {
          clearTimeout(timer);
          off();
          resolve(s);
        }
      });
    });
  }

  /** The last log lines, for error messages. */
  tail(lines = 30): string {
    return this.log
      .slice(-lines)
      .map((l) => `  [${this.name}] ${l}`)
      .join('\n');
  }

  private take(line: string): void {
    if (!line.startsWith(SIGNAL_PREFIX)) {
      this.log.push(line);
      return;
    }
    let parsed: ChildSignal;
    try {
      parsed = JSON.parse(line.slice(SIGNAL_PREFIX.length)) as ChildSignal;
    } catch {
      this.log.push(line);
      return;
    }
    this.signals.push(parsed);
    for (const listener of [...this.listeners]) listener(parsed);
  }
}
