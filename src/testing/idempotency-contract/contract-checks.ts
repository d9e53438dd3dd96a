import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { ContractHttp, ContractResponse, describeResponse } from './contract-http';
import type {
  IdempotencyContractCheck,
  IdempotencyContractOptions,
  IdempotencyContractRequest,
} from './idempotency-contract.options';

/** A check that found the contract broken: the message says what was expected, what came and the likely cause. */
export class ContractViolation extends Error {
  name = 'ContractViolation';
}

/** A check that cannot run with the options given: the message says which option it needs. */
export class ContractCheckSkipped extends Error {
  name = 'ContractCheckSkipped';
}

/** What every check gets: the route's client, the options and a few helpers. */
export interface CheckContext {
  http: ContractHttp;
  options: IdempotencyContractOptions;
  /** The key header's name, for messages. */
  header: string;
}

interface Check {
  title: string;
  run(context: CheckContext): Promise<void>;
}

const newKey = () => `contract-${randomUUID()}`;

const is2xx = (r: ContractResponse) => r.status >= 200 && r.status < 300;
const replayed = (r: ContractResponse) => r.headers.get('idempotent-replayed') === 'true';
const isProblem = (r: ContractResponse) => /^application\/problem\+json/i.test(r.headers.get('content-type') ?? '');
const codeOf = (r: ContractResponse) => (r.json as { code?: unknown } | undefined)?.code;
const sameBody = (a: ContractResponse, b: ContractResponse) =>
  a.json !== undefined || b.json !== undefined ? isDeepStrictEqual(a.json, b.json) : a.text === b.text;

async function count(context: CheckContext): Promise<number> {
  return Number(await context.options.effects());
}

/** Asserts that `effects()` moved by `delta` since `before`; `why` explains what a difference means. */
async function expectEffects(context: CheckContext, before: number, delta: number, after: string, why: string) {
  const now = await count(context);
  if (now !== before + delta) {
    throw new ContractViolation(`effects() went from ${before} to ${now} ${after}; expected ${before + delta}. ${why}`);
  }
}

/** Sends a new operation with a new key and checks that it ran once: 2xx, not replayed, one effect. */
async function firstRun(context: CheckContext, key: string, request: IdempotencyContractRequest) {
  const before = await count(context);
  const first = await context.http.send(key, request);
  if (!is2xx(first)) {
    throw new ContractViolation(
      `a new operation (request() with a new ${context.header}) must succeed, got ${describeResponse(first)}. ` +
        'Check that request() returns a valid request for a new operation, and the headers the route needs.',
    );
  }
  if (replayed(first)) {
    throw new ContractViolation(`a first request was answered as a replay: ${describeResponse(first)}.`);
  }
  await expectEffects(
    context,
    before,
    1,
    'after the first request',
    'A first request must commit exactly one effect: check that effects() counts what this route writes.',
  );
  return { first, before: before + 1 };
}

/** Asserts that `retry` is the replay of `first`: same status and body, `Idempotent-Replayed: true`. */
function expectReplay(first: ContractResponse, retry: ContractResponse, what: string, cause: string): void {
  if (retry.status !== first.status || !sameBody(first, retry) || !replayed(retry)) {
    throw new ContractViolation(
      `${what} must get the first response again, marked Idempotent-Replayed: true. ` +
        `First: ${describeResponse(first)}. ${what[0].toUpperCase()}${what.slice(1)}: ${describeResponse(retry)}. ${cause}`,
    );
  }
}

/** Reverses the order of the properties of every object in `value` (arrays keep theirs). */
export function reorderProperties(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reorderProperties);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([k, v]) => [k, reorderProperties(v)]),
  );
}

const CHECKS: Record<IdempotencyContractCheck, Check> = {
  'missing-key': {
    title: 'a request without a key is refused with 400 problem+json, and the handler does not run',
    async run(context) {
      const before = await count(context);
      const response = await context.http.send(undefined, context.options.request());
      if (response.status !== 400 || !isProblem(response) || codeOf(response) !== 'idempotency-key-missing') {
        throw new ContractViolation(
          `a request without ${context.header} must get 400 application/problem+json with code ` +
            `"idempotency-key-missing", got ${describeResponse(response)}. Is the route decorated with @Idempotent() ` +
            `(and the key required)? For a route with required: false, skip this check.`,
        );
      }
      await expectEffects(context, before, 0, 'after a request without a key', 'The handler ran without a key.');
    },
  },

  replay: {
    title:
      'a retry with the same key and body gets the stored response (Idempotent-Replayed: true) and no second effect',
    async run(context) {
      const key = newKey();
      const request = context.options.request();
      const { first, before } = await firstRun(context, key, request);
      const retry = await context.http.send(key, request);
      expectReplay(first, retry, 'a retry with the same key and body', 'The route does not replay its responses.');
      await expectEffects(context, before, 0, 'after the retry', 'The retry ran the handler again.');
    },
  },

  'reordered-body': {
    title: 'a retry whose JSON properties come in another order is the same request: a replay, not a 422',
    async run(context) {
      const key = newKey();
      const request = context.options.request();
      const reordered = { ...request, body: reorderProperties(request.body) };
      if (JSON.stringify(reordered.body) === JSON.stringify(request.body)) {
        throw new ContractCheckSkipped(
          'request() must return a JSON object body with at least two properties at some level to reorder them.',
        );
      }
      const { first, before } = await firstRun(context, key, request);
      const retry = await context.http.send(key, reordered);
      expectReplay(
        first,
        retry,
        'a retry with the same key and the body reordered',
        'The fingerprint depends on the order of the JSON properties: hash a stable serialization (sorted keys).',
      );
      await expectEffects(context, before, 0, 'after the reordered retry', 'The retry ran the handler again.');
    },
  },

  mismatch: {
    title: 'the same key with a different body is refused with 422 problem+json, and the handler does not run',
    async run(context) {
      const key = newKey();
      const request = context.options.request();
      const other = context.options.request();
      if (isDeepStrictEqual(request.body, other.body)) {
        throw new ContractViolation(
          'request() returned the same body twice: it must return a new operation on each call (a fresh reference, ' +
            'e-mail …), which this check sends with a used key.',
        );
      }
      const { before } = await firstRun(context, key, request);
      const response = await context.http.send(key, other);
      if (response.status !== 422 || !isProblem(response) || codeOf(response) !== 'idempotency-key-reused') {
        throw new ContractViolation(
          `a used ${context.header} with a different body must get 422 application/problem+json with code ` +
            `"idempotency-key-reused", got ${describeResponse(response)}. The fingerprint ignores the body ` +
            '(a custom fingerprint option?), or the key is not checked against its request.',
        );
      }
      await expectEffects(
        context,
        before,
        0,
        'after the mismatched request',
        'The mismatched request ran the handler.',
      );
    },
  },

  'concurrent-duplicates': {
    title: 'concurrent duplicates commit one effect; the others are replays or 409 problem+json with Retry-After',
    async run(context) {
      const key = newKey();
      const request = context.options.request();
      const n = context.options.concurrency ?? 8;
      const before = await count(context);
      const responses = await Promise.all(Array.from({ length: n }, () => context.http.send(key, request)));
      const successes = responses.filter(is2xx);
      const odd = responses.filter(
        (r) => !is2xx(r) && !(r.status === 409 && isProblem(r) && r.headers.get('retry-after') !== null),
      );
      if (odd.length > 0) {
        throw new ContractViolation(
          `${n} concurrent duplicates must each get the response or 409 problem+json with Retry-After; ` +
            `${odd.length} got ${describeResponse(odd[0])}.`,
        );
      }
      const originals = successes.filter((r) => !replayed(r));
      if (originals.length !== 1) {
        throw new ContractViolation(
          `${n} concurrent duplicates must get exactly one original response (the others replays or 409), ` +
            `got ${originals.length} not marked Idempotent-Replayed. The key is not taken before the handler runs.`,
        );
      }
      const differing = successes.find((r) => r.status !== originals[0].status || !sameBody(r, originals[0]));
      if (differing) {
        throw new ContractViolation(
          `a replay of a concurrent duplicate differs from the original: ${describeResponse(differing)} against ` +
            `${describeResponse(originals[0])}.`,
        );
      }
      await expectEffects(
        context,
        before,
        1,
        `after ${n} concurrent duplicates`,
        'Duplicates ran the handler side by side: the key must be taken in the transaction of the effect, before it.',
      );
    },
  },

  'rollback-frees-key': {
    title: 'a handler that fails rolls back its effect with its key: the same key runs again afterwards',
    async run(context) {
      const failure = context.options.failure;
      if (!failure) {
        throw new ContractCheckSkipped(
          'pass `failure: { failNext }` or `failure: { failingRequest }` to make the handler fail once.',
        );
      }
      const key = newKey();
      const request = context.options.request();
      const before = await count(context);
      let failed: ContractResponse;
      if ('failNext' in failure) {
        await failure.failNext();
        failed = await context.http.send(key, request);
      } else {
        failed = await context.http.send(key, failure.failingRequest());
      }
      if (is2xx(failed)) {
        throw new ContractViolation(
          `the request meant to fail succeeded: ${describeResponse(failed)}. ` +
            ('failNext' in failure
              ? "failNext() must make the route's next handler run throw."
              : 'failingRequest() must return a request the handler fails on.'),
        );
      }
      await expectEffects(
        context,
        before,
        0,
        `after a request that failed with ${failed.status}`,
        "The failed request's effect was committed: the handler writes outside the transaction that records the " +
          'key (write through OutboxService.manager, transaction() or emit()).',
      );
      const retry = await context.http.send(key, request);
      if (!is2xx(retry) || replayed(retry)) {
        throw new ContractViolation(
          `after a failure the same ${context.header} must run the handler again, got ${describeResponse(retry)}. ` +
            (retry.status === 422 || retry.status === 409 || replayed(retry)
              ? 'The key was kept although the handler failed: it must roll back with the handler.'
              : ''),
        );
      }
      await expectEffects(
        context,
        before,
        1,
        'after the retry of the failed request',
        'The retry must commit one effect.',
      );
    },
  },

  'replayed-failure': {
    title: 'a final error (a 4xx the handler throws) is kept: a retry gets it again, replayed, without a second run',
    async run(context) {
      const finalFailure = context.options.finalFailure;
      if (!finalFailure) {
        throw new ContractCheckSkipped(
          'pass `finalFailure: () => request` (a request the handler answers with a 4xx).',
        );
      }
      const key = newKey();
      const request = finalFailure();
      const before = await count(context);
      const first = await context.http.send(key, request);
      if (first.status < 400 || first.status > 499 || replayed(first)) {
        throw new ContractViolation(
          `finalFailure() must be answered with a 4xx error by the handler, got ${describeResponse(first)}.`,
        );
      }
      await expectEffects(
        context,
        before,
        0,
        'after a request that failed',
        "The failed request's effect was committed.",
      );
      const retry = await context.http.send(key, request);
      expectReplay(
        first,
        retry,
        'a retry of a request that failed with a final error',
        'The error was not kept as the outcome of the key (replayErrors: false, or a status a retry may change: ' +
          '408, 409, 425, 429).',
      );
      await expectEffects(
        context,
        before,
        0,
        'after the retry of the failed request',
        'The retry ran the handler again.',
      );
    },
  },
};

/** The check named `name`. */
export function contractCheck(name: IdempotencyContractCheck): Check {
  return CHECKS[name];
}
