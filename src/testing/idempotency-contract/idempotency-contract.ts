import { IDEMPOTENCY_CONTRACT_CHECKS } from './idempotency-contract.options';
import type {
  IdempotencyContractCheck,
  IdempotencyContractCheckResult,
  IdempotencyContractOptions,
  IdempotencyContractReport,
} from './idempotency-contract.options';
import { ContractCheckSkipped, contractCheck, ContractViolation } from './contract-checks';
import { baseUrlOf, ContractHttp } from './contract-http';

/**
 * Checks the idempotency contract (IETF draft-ietf-httpapi-idempotency-key-header, as `@Idempotent()` implements
 * it) on one route of your app, with real requests: missing key, replay, reordered body, mismatch, concurrent
 * duplicates (one effect), rollback frees the key, replayed failure. Resolves with one result per check; it throws
 * only for unusable options. Works with any test framework (see `assertIdempotencyContract` and
 * `describeIdempotencyContract`).
 */
export async function checkIdempotencyContract(
  options: IdempotencyContractOptions,
  only: readonly IdempotencyContractCheck[] = IDEMPOTENCY_CONTRACT_CHECKS,
): Promise<IdempotencyContractReport> {
  const method = (options.method ?? 'POST').toUpperCase();
  const header = options.header ?? 'Idempotency-Key';
  const route = `${method} ${options.path}`;
  if (!options.path?.startsWith('/')) {
    throw new TypeError(`checkIdempotencyContract(): path must start with '/', got ${JSON.stringify(options.path)}.`);
  }
  if (typeof options.request !== 'function' || typeof options.effects !== 'function') {
    throw new TypeError(
      'checkIdempotencyContract(): `request` (a new operation per call) and `effects` (counts what the route ' +
        'commits) are required functions.',
    );
  }
  const http = new ContractHttp(await baseUrlOf(options.app), method, options.path, header, options.headers ?? {});
  const context = { http, options, header };
  const results: IdempotencyContractCheckResult[] = [];
  for (const check of IDEMPOTENCY_CONTRACT_CHECKS) {
    if (!only.includes(check)) continue;
    const { title, run } = contractCheck(check);
    if (options.skip?.includes(check)) {
      results.push({ check, title, status: 'skipped', message: 'left out by the `skip` option.' });
      continue;
    }
    try {
      await run(context);
      results.push({ check, title, status: 'passed' });
    } catch (error) {
      if (error instanceof ContractCheckSkipped) {
        results.push({ check, title, status: 'skipped', message: error.message });
      } else if (error instanceof ContractViolation) {
        results.push({ check, title, status: 'failed', message: error.message });
      } else {
        const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
        results.push({ check, title, status: 'failed', message: `the check could not run: ${reason}` });
      }
    }
  }
  return { route, passed: results.every((r) => r.status !== 'failed'), results };
}

/** One line per failed check: `✗ POST /payments replay: …`. */
export function formatContractFailures(report: IdempotencyContractReport): string {
  return report.results
    .filter((r) => r.status === 'failed')
    .map((r) => `✗ ${report.route} ${r.check}: ${r.message}`)
    .join('\n');
}

/**
 * `checkIdempotencyContract()`, then throws an `Error` listing every failed check (any test framework: a thrown
 * error fails the test). Resolves with the report when none failed.
 */
export async function assertIdempotencyContract(
  options: IdempotencyContractOptions,
): Promise<IdempotencyContractReport> {
  const report = await checkIdempotencyContract(options);
  if (!report.passed) {
    throw new Error(`The idempotency contract of ${report.route} is broken:\n${formatContractFailures(report)}`);
  }
  return report;
}

type TestRegistrar = (name: string, fn: () => Promise<void>, timeout?: number) => void;

/**
 * Jest (or Vitest with globals, or Mocha): a `describe` block with one test per check, run against the options
 * `options()` returns when the tests run (so the app can be started in `beforeAll`). A skipped check passes and
 * says why in its title's test output.
 *
 * ```ts
 * describeIdempotencyContract('POST /payments', () => ({ app, path: '/payments', request, effects }));
 * ```
 */
export function describeIdempotencyContract(
  title: string,
  options: () => IdempotencyContractOptions,
  settings: { timeout?: number } = {},
): void {
  const globals = globalThis as unknown as { describe?: (name: string, body: () => void) => void; it?: TestRegistrar };
  if (typeof globals.describe !== 'function' || typeof globals.it !== 'function') {
    throw new Error(
      'describeIdempotencyContract() needs the global describe() and it() of Jest, Vitest (globals: true) or Mocha; ' +
        'elsewhere call checkIdempotencyContract() or assertIdempotencyContract().',
    );
  }
  const { describe, it } = globals as Required<typeof globals>;
  describe(`idempotency contract of ${title}`, () => {
    for (const check of IDEMPOTENCY_CONTRACT_CHECKS) {
      it(
        `${check}: ${contractCheck(check).title}`,
        async () => {
          const report = await checkIdempotencyContract(options(), [check]);
          const [result] = report.results;
          if (result?.status === 'failed') throw new Error(`${report.route} ${check}: ${result.message}`);
          if (result?.status === 'skipped') console.warn(`${report.route} ${check} skipped: ${result.message}`);
        },
        settings.timeout,
      );
    }
  });
}
