import fc from 'fast-check';
import { describeError, describeFailure } from './describe-error';
import { redactSecrets } from './redact-secrets';

/** Secrets drawn from characters that never occur in the surrounding fixed text, so "absent" is a real check. */
const secret = fc.stringMatching(/^[A-Z0-9!$%*+~_-]{4,24}$/).map((s) => `Q${s}Z`);
const user = fc.stringMatching(/^[a-z][a-z0-9._-]{0,11}$/);
const scheme = fc.constantFrom(
  'amqp',
  'amqps',
  'nats',
  'mqtt',
  'mqtts',
  'redis',
  'rediss',
  'postgres',
  'mysql',
  'http',
  'tls',
);
const host = fc.constantFrom('127.0.0.1', 'broker.internal', 'rabbit-0.rabbit.svc.cluster.local', '[::1]');
const port = fc.integer({ min: 1, max: 65535 });
const fieldName = fc.constantFrom(
  'password',
  'Password',
  'passwd',
  'pass',
  'pwd',
  'token',
  'accessToken',
  'refresh_token',
  'secret',
  'clientSecret',
  'client_secret',
  'authorization',
  'Authorization',
  'apiKey',
  'api_key',
  'x-api-key',
  'dbPassword',
  'credentials',
);
const around = fc.constantFrom(
  ['', ''],
  ['connect failed (', ') retrying'],
  ['{"err":{},"url":"', '"}'],
  ['url=', ' host=x'],
);

describe('redactSecrets', () => {
  it('removes the password of any URL and keeps scheme, host and port', () => {
    fc.assert(
      fc.property(scheme, user, secret, host, port, around, (s, u, pw, h, p, [before, after]) => {
        const text = `${before}${s}://${u}:${pw}@${h}:${p}/vhost${after}`;
        const out = redactSecrets(text);
        expect(out).not.toContain(pw);
        expect(out).toBe(`${before}${s}://***@${h}:${p}/vhost${after}`);
      }),
    );
  });

  it('removes a password-only user-info (redis://:secret@host) and one that contains an @', () => {
    fc.assert(
      fc.property(secret, host, (pw, h) => {
        expect(redactSecrets(`redis://:${pw}@${h}:6379`)).toBe(`redis://***@${h}:6379`);
        expect(redactSecrets(`amqp://u:${pw}@x@${h}`)).toBe(`amqp://***@${h}`);
      }),
    );
  });

  it('removes the value of secret fields in key=value, key: value, JSON and quoted forms', () => {
    fc.assert(
      fc.property(fieldName, secret, (name, value) => {
        for (const [text, expected] of [
          [`${name}=${value}&x=1`, `${name}=***&x=1`],
          [`${name}: ${value}, next`, `${name}: ***, next`],
          [`{"${name}":"${value}","host":"h"}`, `{"${name}":"***","host":"h"}`],
          [`{ ${name}: '${value}' }`, `{ ${name}: '***' }`],
          [`?user=u&${name}=${value}`, `?user=u&${name}=***`],
        ]) {
          const out = redactSecrets(text);
          expect(out).not.toContain(value);
          expect(out).toBe(expected);
        }
      }),
    );
  });

  it('keeps the scheme of an Authorization header and drops its credential', () => {
    expect(redactSecrets('Authorization: Bearer eyJhbGciOi.eyJzdWIi.sig')).toBe('Authorization: Bearer ***');
    expect(redactSecrets('authorization=Basic dXNlcjpwYXNz')).toBe('authorization=Basic ***');
  });

  it('removes user:pass@host without a scheme (NATS servers, connection strings)', () => {
    fc.assert(
      fc.property(user, secret, host, port, (u, pw, h, p) => {
        const out = redactSecrets(`servers: ["${u}:${pw}@${h}:${p}"]`);
        expect(out).not.toContain(pw);
        expect(out).toContain(`${h}:${p}`);
      }),
    );
  });

  it('is idempotent and leaves text without credentials unchanged', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        const once = redactSecrets(text);
        expect(redactSecrets(once)).toBe(once);
      }),
    );
    for (const text of [
      'connect ECONNREFUSED 127.0.0.1:5672',
      'No confirmation within 2000 ms (outcome unknown; will retry)',
      'password authentication failed for user "app"',
      'amqp://127.0.0.1:5672/vhost',
      'Channel closed by server: 404 (NOT-FOUND) with message "NOT_FOUND - no exchange \'x\'"',
    ]) {
      expect(redactSecrets(text)).toBe(text);
    }
  });
});

describe('describeError / describeFailure', () => {
  it("redacts amqp-connection-manager's { err, url } and keeps the cause and the host", () => {
    const err = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const rejected = { err, url: 'amqp://guest:Sup3rSecret@127.0.0.1:1' };
    expect(describeError(rejected)).toBe('connect ECONNREFUSED 127.0.0.1:1 (amqp://***@127.0.0.1:1)');
    expect(describeFailure(rejected)).toBe('Error: connect ECONNREFUSED 127.0.0.1:1 (amqp://***@127.0.0.1:1)');
  });

  it('adds a chained error and redacts whatever is thrown: errors, strings, objects', () => {
    const nats = Object.assign(new Error('CONNECTION_REFUSED'), {
      name: 'NatsError',
      chainedError: new Error('connect ECONNREFUSED 127.0.0.1:4222'),
    });
    expect(describeFailure(nats)).toBe('NatsError: CONNECTION_REFUSED (connect ECONNREFUSED 127.0.0.1:4222)');
    expect(describeError('Error: Connection lost. Trying to reconnect...')).toBe(
      'Error: Connection lost. Trying to reconnect...',
    );
    expect(describeError({ password: 'hunter22', host: 'h' })).toBe('{"password":"***","host":"h"}');
    expect(describeError(new Error('bad url mqtt://me:hunter22@h:1883'))).toBe('bad url mqtt://***@h:1883');
    expect(describeError(undefined)).toBe('undefined');
  });
});
