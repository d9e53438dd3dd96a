import type { LoggerService } from '@nestjs/common';
import { OutboxCircuitOpenError } from '../errors';
import type { ResolvedCircuitBreakerOptions } from './circuit-breaker.options';

/** A broker breaker's state: `closed` (publishing), `open` (paused until its cool-down ends), `half-open` (probing). */
export type CircuitState = 'closed' | 'open' | 'half-open';

/** What a publish admitted by the breaker reports back: exactly one of these, once. */
export interface CircuitTicket {
  /** The broker confirmed the publish. */
  succeeded(): void;
  /** The publish failed in a way that counts against the broker. */
  failed(): void;
  /** The publish ended without a verdict on the broker (the message's own failure). */
  ignored(): void;
}

/** What the breaker tells its owner when it opens or closes (for a log line). */
export interface CircuitListener {
  opened(failures: number, coolDown: number): void;
  closed(): void;
}

/**
 * The circuit breaker of one broker: counts consecutive failed publishes, opens after `failures` of them for
 * `coolDown` ms (publishes are refused with `OutboxCircuitOpenError`), then lets one probe through: its success
 * closes the breaker, its failure opens it again. Publishes asked for while the probe runs wait for its outcome.
 * A success of any publish closes it. In-process state only (one per relay process).
 */
export class CircuitBreaker {
  private consecutive = 0;
  private openUntil = 0;
  private probe?: { done: Promise<void>; settle: () => void };
  private current: CircuitState = 'closed';

  constructor(
    private readonly options: ResolvedCircuitBreakerOptions,
    private readonly listener?: CircuitListener,
    private readonly now: () => number = Date.now,
  ) {}

  /** The state now (an open breaker whose cool-down ended reads `half-open`). */
  get state(): CircuitState {
    if (this.current === 'open' && this.now() >= this.openUntil) return 'half-open';
    return this.current;
  }

  /** Consecutive failed publishes so far. */
  get failures(): number {
    return this.consecutive;
  }

  /**
   * Admits one publish (`name` names the broker in the refusal): a ticket to report its outcome on, after the probe
   * in flight when there is one; rejects with `OutboxCircuitOpenError` while the breaker is open.
   */
  async admit(name: string): Promise<CircuitTicket> {
    for (;;) {
      if (this.current === 'closed') return this.ticket(false);
      if (this.probe) {
        await this.probe.done;
        continue;
      }
      const left = this.openUntil - this.now();
      if (left > 0) {
        throw new OutboxCircuitOpenError(
          `The circuit breaker of broker ${name} is open after ${this.options.failures} consecutive failed ` +
            `publishes: not sent, retried in ${left} ms without counting an attempt (publisher.circuitBreaker).`,
          left,
        );
      }
      let settle!: () => void;
      const done = new Promise<void>((resolve) => (settle = resolve));
      this.probe = { done, settle };
      this.current = 'half-open';
      return this.ticket(true);
    }
  }

  private ticket(probe: boolean): CircuitTicket {
    let used = false;
    const once = (outcome: () => void) => () => {
      if (used) return;
      used = true;
      outcome();
      if (probe) this.endProbe();
    };
    return {
      succeeded: once(() => this.succeeded()),
      failed: once(() => this.failed(probe)),
      // A probe without a verdict leaves the breaker open with its cool-down over: the next publish probes.
      ignored: once(() => {
        if (probe && this.current === 'half-open') this.current = 'open';
      }),
    };
  }

  private endProbe(): void {
    const probe = this.probe;
    this.probe = undefined;
    probe?.settle();
  }

  private succeeded(): void {
    this.consecutive = 0;
    if (this.current !== 'closed') {
      this.current = 'closed';
      this.listener?.closed();
    }
  }

  private failed(probe: boolean): void {
    this.consecutive++;
    if (probe || (this.current === 'closed' && this.consecutive >= this.options.failures)) {
      this.current = 'open';
      this.openUntil = this.now() + this.options.coolDown;
      this.listener?.opened(this.consecutive, this.options.coolDown);
    }
  }
}

/** One broker breaker's state as the metrics and the console show it. */
export interface BrokerCircuit {
  /** The broker's client token name (its rows' destination is `broker:<name>`). */
  broker: string;
  state: CircuitState;
  /** Consecutive failed publishes so far. */
  failures: number;
}

/** The breakers of an outbox's brokers (`publisher.circuitBreaker`), made on first use, one per broker name. */
export class BrokerBreakers {
  private readonly byName = new Map<string, CircuitBreaker>();

  constructor(
    private readonly options: ResolvedCircuitBreakerOptions | false,
    private readonly listener: (broker: string) => CircuitListener,
  ) {}

  /** The breaker of the broker `name`, or undefined when breakers are off. */
  of(name: string): CircuitBreaker | undefined {
    if (!this.options) return undefined;
    let breaker = this.byName.get(name);
    if (!breaker) this.byName.set(name, (breaker = new CircuitBreaker(this.options, this.listener(name))));
    return breaker;
  }

  /** Every breaker used so far, by broker name. */
  states(): BrokerCircuit[] {
    return [...this.byName].map(([broker, b]) => ({ broker, state: b.state, failures: b.failures }));
  }
}

/** The publisher's log lines of each broker's breaker: a warning when it opens, a line when it closes. */
export function breakerLog(logger: LoggerService): (broker: string) => CircuitListener {
  return (broker) => ({
    opened: (failures, coolDown) =>
      logger.warn(
        `Circuit breaker of broker ${broker} opened after ${failures} consecutive failed publishes: its messages ` +
          `wait ${coolDown} ms (attempts not counted), then one probe publish decides (publisher.circuitBreaker).`,
      ),
    closed: () => logger.log(`Circuit breaker of broker ${broker} closed: a publish was confirmed.`),
  });
}
