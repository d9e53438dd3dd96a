import { OutboxCircuitOpenError, OutboxConfigurationError } from '../errors';
import { CircuitBreaker } from './circuit-breaker';
import { resolveCircuitBreaker } from './circuit-breaker.options';

describe('CircuitBreaker', () => {
  let now = 0;
  const events: string[] = [];
  const make = () =>
    new CircuitBreaker(
      { failures: 3, coolDown: 1000 },
      { opened: (n) => events.push(`opened ${n}`), closed: () => events.push('closed') },
      () => now,
    );
  beforeEach(() => {
    now = 0;
    events.length = 0;
  });

  it('opens after K consecutive failures, a success in between resets the count', async () => {
    const breaker = make();
    (await breaker.admit('B')).failed();
    (await breaker.admit('B')).failed();
    (await breaker.admit('B')).succeeded();
    (await breaker.admit('B')).failed();
    (await breaker.admit('B')).failed();
    expect(breaker.state).toBe('closed');
    (await breaker.admit('B')).failed();
    expect(breaker.state).toBe('open');
    expect(events).toEqual(['opened 3']);
    now = 400;
    const refused = await breaker.admit('B').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OutboxCircuitOpenError);
    expect((refused as OutboxCircuitOpenError).retryAfterMs).toBe(600);
    expect((refused as OutboxCircuitOpenError).message).toMatch(/broker B is open/);
  });

  it('lets one probe through after the cool-down; the others wait for it; its success closes', async () => {
    const breaker = make();
    for (let i = 0; i < 3; i++) (await breaker.admit('B')).failed();
    now = 1000;
    expect(breaker.state).toBe('half-open');
    const probe = await breaker.admit('B');
    let waited = false;
    const waiting = breaker.admit('B').then((ticket) => {
      waited = true;
      return ticket;
    });
    await new Promise((r) => setImmediate(r));
    expect(waited).toBe(false);
    probe.succeeded();
    (await waiting).succeeded();
    expect(breaker.state).toBe('closed');
    expect(breaker.failures).toBe(0);
    expect(events).toEqual(['opened 3', 'closed']);
  });

  it('opens again for a whole cool-down when the probe fails; the waiting publishes are refused', async () => {
    const breaker = make();
    for (let i = 0; i < 3; i++) (await breaker.admit('B')).failed();
    now = 1500;
    const probe = await breaker.admit('B');
    const waiting = breaker.admit('B').catch((e: unknown) => e);
    probe.failed();
    expect(await waiting).toBeInstanceOf(OutboxCircuitOpenError);
    expect(breaker.state).toBe('open');
    now = 2499;
    await expect(breaker.admit('B')).rejects.toBeInstanceOf(OutboxCircuitOpenError);
    now = 2500;
    expect(breaker.state).toBe('half-open');
  });

  it('a probe with no verdict (the message’s own failure) hands the probe to the next publish', async () => {
    const breaker = make();
    for (let i = 0; i < 3; i++) (await breaker.admit('B')).failed();
    now = 1000;
    (await breaker.admit('B')).ignored();
    expect(breaker.state).toBe('half-open');
    (await breaker.admit('B')).succeeded();
    expect(breaker.state).toBe('closed');
  });
});

describe('publisher.circuitBreaker', () => {
  it('is off by default, true takes the defaults, an object refines them', () => {
    expect(resolveCircuitBreaker(undefined)).toBe(false);
    expect(resolveCircuitBreaker(true)).toEqual({ failures: 5, coolDown: 30_000 });
    expect(resolveCircuitBreaker({ failures: 2 })).toEqual({ failures: 2, coolDown: 30_000 });
  });

  it('names the bad field and the fix', () => {
    expect(() => resolveCircuitBreaker({ failures: 0 })).toThrow(
      /`publisher.circuitBreaker.failures` must be an integer from 1 to 1000, got 0/,
    );
    expect(() => resolveCircuitBreaker({ cooldown: 5 })).toThrow(/`publisher.circuitBreaker.cooldown` is not a known/);
    expect(() => resolveCircuitBreaker('on')).toThrow(OutboxConfigurationError);
  });
});
