import type { LoggerService } from '@nestjs/common';

export interface CapturedLog {
  level: 'log' | 'error' | 'warn' | 'debug' | 'verbose' | 'fatal';
  context: string;
  message: string;
  at: number;
}

/**
 * A Nest logger that keeps every line (for assertions such as "the error log stayed bounded during the outage")
 * and prints nothing, except errors when `OUTBOX_FAULTS_VERBOSE` is set.
 */
export class CapturingLogger implements LoggerService {
  readonly lines: CapturedLog[] = [];

  log(message: unknown, ...rest: unknown[]) {
    this.push('log', message, rest);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.push('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]) {
    this.push('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]) {
    this.push('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]) {
    this.push('verbose', message, rest);
  }
  fatal(message: unknown, ...rest: unknown[]) {
    this.push('fatal', message, rest);
  }

  /** Error and warning lines written between `from` and `to` (epoch ms). */
  problems(from = 0, to = Infinity): CapturedLog[] {
    return this.lines.filter(
      (l) => (l.level === 'error' || l.level === 'warn' || l.level === 'fatal') && l.at >= from && l.at <= to,
    );
  }

  private push(level: CapturedLog['level'], message: unknown, rest: unknown[]) {
    const context = typeof rest[rest.length - 1] === 'string' ? (rest[rest.length - 1] as string) : '';
    const text =
      message instanceof Error
        ? `${message.name}: ${message.message}`
        : typeof message === 'string'
          ? message
          : JSON.stringify(message);
    this.lines.push({ level, context, message: text, at: Date.now() });
    if (process.env.OUTBOX_FAULTS_VERBOSE && (level === 'error' || level === 'fatal'))
      process.stderr.write(`[${context}] ${text}\n`);
  }
}
