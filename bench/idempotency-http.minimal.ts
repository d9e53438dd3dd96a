/**
 * The baseline `idempotency-http` measures `@Idempotent()` against: a hand-written interceptor that does the minimum
 * for the same guarantees on PostgreSQL, with as many round trips as the plain handler (three):
 *
 * 1. `BEGIN; SELECT pg_try_advisory_xact_lock(key), pg_try_advisory_xact_lock(key+fingerprint); SELECT <record>` —
 *    key first: a duplicate never runs the handler; a concurrent one gets 409 at once (422 when its body differs);
 *    a stored record is replayed (422 for another body).
 * 2. The handler's statements, in that transaction (it is made ambient the way the library does it, so the same
 *    handler body joins it).
 * 3. `INSERT <record>; COMMIT` — the unique constraint on (scope, key) decides; a loser replays the winner.
 *
 * It skips everything a library must offer and a benchmark does not exercise: options, scopes by principal, custom
 * extractors, sf-string keys, stored headers, streams, class-transformer, metrics, error replays, 503 mapping.
 */
import { createHash } from 'node:crypto';
import {
  BadRequestException,
  CallHandler,
  ConflictException,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  UnprocessableEntityException,
} from '@nestjs/common';
import type { PoolClient } from 'pg';
import { lastValueFrom, Observable, of } from 'rxjs';
import { DataSource } from 'typeorm';
import { runInTransactionContext } from '../src/transaction/transaction-context';

const TABLE = 'idempotency_keys';
const NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint';
const TTL_MS = 24 * 3600 * 1000;

/** JSON with sorted object keys (the fingerprint must not depend on key order). */
function stable(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(stable).join(',')}]`;
  const object = value as Record<string, unknown>;
  return `{${Object.keys(object)
    .sort()
    .filter((k) => object[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${stable(object[k])}`)
    .join(',')}}`;
}

@Injectable()
export class MinimalIdempotencyInterceptor implements NestInterceptor {
  constructor(private readonly dataSource: DataSource) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const http = context.switchToHttp();
    const request = http.getRequest();
    const key = request.headers['idempotency-key'];
    if (typeof key !== 'string' || key.length === 0 || key.length > 255) {
      throw new BadRequestException('Idempotency-Key required');
    }
    const hash = createHash('sha256')
      .update(stable([request.method, request.path, request.body]))
      .digest();
    const fingerprint = hash.toString('hex');
    const keyLock = createHash('sha256').update(`${TABLE}\u0000\u0000${key}`).digest().readBigInt64BE(0);
    const requestLock = BigInt.asIntN(64, keyLock ^ hash.readBigInt64BE(0));

    const runner = this.dataSource.createQueryRunner();
    const client = (await runner.connect()) as PoolClient;
    const where = `scope = '' AND idempotency_key = ${client.escapeLiteral(key)}`;
    const state = runner as unknown as { isTransactionActive: boolean; transactionDepth: number };
    const end = async (sql: string) => {
      state.isTransactionActive = false;
      state.transactionDepth = 0;
      try {
        await client.query(sql);
      } finally {
        await runner.release();
      }
    };
    const results = (await client.query(
      `BEGIN; SELECT pg_try_advisory_xact_lock(${keyLock}) AS locked, pg_try_advisory_xact_lock(${requestLock}) AS same;
      SELECT fingerprint, response_status, response_body FROM ${TABLE} WHERE ${where} AND expires_at > ${NOW}`,
    )) as unknown as Array<{ rows: any[] }>;
    const { locked, same } = results[1].rows[0];
    const found = results[2].rows[0];
    if (found || !locked) {
      await end('ROLLBACK');
      if (found) return this.replay(context, found, fingerprint);
      throw same ? new ConflictException('in flight') : new UnprocessableEntityException('key reused');
    }
    state.isTransactionActive = true;
    state.transactionDepth = 1;
    let value: unknown;
    try {
      const ambient = { dataSource: this.dataSource, manager: runner.manager, afterCommit: [] };
      value = await runInTransactionContext(ambient, () => lastValueFrom(next.handle(), { defaultValue: undefined }));
    } catch (error) {
      await end('ROLLBACK');
      throw error;
    }
    const body = value === undefined ? 'NULL' : client.escapeLiteral(JSON.stringify(value));
    try {
      await end(
        `INSERT INTO ${TABLE} (scope, idempotency_key, fingerprint, response_status, response_body, created_at, expires_at)
        SELECT '', ${client.escapeLiteral(key)}, '${fingerprint}', 201, ${body}, n.ms, n.ms + ${TTL_MS}
        FROM (SELECT ${NOW} AS ms) AS n; COMMIT`,
      );
    } catch (error) {
      if ((error as { code?: string }).code !== '23505') throw error;
      const { rows } = await this.dataSource.query(
        `SELECT fingerprint, response_status, response_body FROM ${TABLE} WHERE ${where}`,
      );
      return this.replay(context, rows[0], fingerprint);
    }
    return of(value);
  }

  private replay(context: ExecutionContext, found: any, fingerprint: string): Observable<unknown> {
    if (found.fingerprint !== fingerprint) throw new UnprocessableEntityException('key reused');
    const response = context.switchToHttp().getResponse();
    response.status(found.response_status);
    response.header('Idempotent-Replayed', 'true');
    return of(found.response_body === null ? undefined : JSON.parse(found.response_body));
  }
}
