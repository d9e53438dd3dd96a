import { createHash } from 'node:crypto';
import { applyDecorators, Body, Controller, ExecutionContext, Injectable, Post, SetMetadata, UseInterceptors } from '@nestjs/common';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { IdempotencyProblemException, OutboxService } from '../src';
import { IDEMPOTENT_OPTIONS, type ResolvedIdempotentOptions, type StoredResponse } from '../src/idempotency/idempotency.options';
import { IdempotencyInterceptor } from '../src/idempotency/idempotency.interceptor';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import type { StoredIdempotencyRecord } from '../src/dialects/key-store';
import type { IdempotencyAttempt } from '../src/idempotency/held-attempt';
import { TestOrder } from './fixtures/order.entity';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

/** The steps the subclass saw, in order (one app at a time). */
const steps: string[] = [];

/**
 * An extender's interceptor, as the README describes it: scoped by an API client header, a fingerprint that ignores
 * the body's `nonce`, a stored response marked as such, a replay header of its own — and a trace of the steps the
 * base class calls, so a step that is no longer called through `this` is noticed.
 */
@Injectable()
class ApiClientInterceptor extends IdempotencyInterceptor {
  protected principalOf(context: ExecutionContext): string | undefined {
    steps.push('principalOf');
    return context.switchToHttp().getRequest().headers['x-api-client'];
  }

  protected fingerprintHttp(context: ExecutionContext, req: any, options: ResolvedIdempotentOptions): string {
    steps.push('fingerprintHttp');
    return createHash('sha256').update(`${req.method} ${options.consumer} ${req.body?.reference}`).digest('hex');
  }

  protected toStoredResponse(
    context: ExecutionContext,
    value: unknown,
    options: ResolvedIdempotentOptions,
  ): StoredResponse | undefined {
    steps.push('toStoredResponse');
    const stored = super.toStoredResponse(context, value, options)!;
    return { ...stored, body: JSON.stringify({ ...JSON.parse(stored.body!), fromStore: true }) };
  }

  protected replay(context: ExecutionContext, record: StoredIdempotencyRecord) {
    steps.push('replay');
    context.switchToHttp().getResponse().setHeader('x-replayed-by', 'ApiClientInterceptor');
    return super.replay(context, record);
  }

  protected runHandler(handler: () => Promise<unknown>, attempt: IdempotencyAttempt): Promise<unknown> {
    steps.push('runHandler');
    return super.runHandler(handler, attempt);
  }

  protected async rollbackQuietly(attempt: IdempotencyAttempt): Promise<void> {
    steps.push('rollbackQuietly');
    return super.rollbackQuietly(attempt);
  }

  protected reject(context: ExecutionContext, problem: IdempotencyProblemException): IdempotencyProblemException {
    steps.push(`reject ${problem.problem.code}`);
    return super.reject(context, problem);
  }
}

/** Applied as docs/idempotency.md shows. */
const ClientIdempotent = () =>
  applyDecorators(SetMetadata(IDEMPOTENT_OPTIONS, {}), UseInterceptors(ApiClientInterceptor));

type Order = { reference: string; amount: number; nonce?: string; fail?: boolean };

@Controller('client')
class ClientController {
  constructor(private readonly outbox: OutboxService) {}

  @Post('orders')
  @ClientIdempotent()
  async create(@Body() dto: Order) {
    const order = await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    if (dto.fail) throw new Error('handler failed after its write');
    return { id: order.id, reference: order.reference };
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `IdempotencyInterceptor subclass: overridden steps on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind);
    let server: any;
    let ds: DataSource;
    let n = 0;
    const newKey = () => `steps-${kind}-${Date.now().toString(36)}-${n++}`;

    beforeAll(async () => {
      const app = await fx.start({ controllers: [ClientController], outbox: { publisher: { enabled: false } } });
      server = app.getHttpServer();
      ds = app.get(DataSource);
    });

    beforeEach(() => {
      steps.length = 0;
    });

    const post = (body: Order, key: string | undefined, client = 'acme') => {
      const req = request(server).post('/client/orders').set('x-api-client', client);
      return (key === undefined ? req : req.set('Idempotency-Key', key)).send(body);
    };
    const orders = (reference: string) => ds.getRepository(TestOrder).countBy({ reference });

    it('scopes by the overridden principal, stores through toStoredResponse and answers retries with replay', async () => {
      const key = newKey();
      const first = await post({ reference: `R-${key}`, amount: 5, nonce: 'a' }, key);
      expect(first.status).toBe(201);
      expect(first.body.fromStore).toBeUndefined();
      expect(steps).toEqual(['principalOf', 'fingerprintHttp', 'runHandler', 'toStoredResponse']);
      const [record] = await ds.getRepository(IdempotencyRecord).findBy({ key });
      expect(record.scope).toBe('acme');

      steps.length = 0;
      // Another nonce: the same request for the overridden fingerprint, so it is replayed.
      const retry = await post({ reference: `R-${key}`, amount: 5, nonce: 'b' }, key);
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.headers['x-replayed-by']).toBe('ApiClientInterceptor');
      expect(retry.body).toEqual({ ...first.body, fromStore: true });
      expect(steps).toEqual(['principalOf', 'fingerprintHttp', 'replay']);

      // Another API client owns another scope: its handler runs.
      const other = await post({ reference: `R-${key}`, amount: 5 }, key, 'globex');
      expect(other.status).toBe(201);
      expect(other.headers['idempotent-replayed']).toBeUndefined();
      expect(await orders(`R-${key}`)).toBe(2);
    });

    it('refuses through reject and rolls back through rollbackQuietly', async () => {
      const missing = await post({ reference: `M-${newKey()}`, amount: 1 }, undefined);
      expect(missing.status).toBe(400);
      expect(steps).toEqual(['reject idempotency-key-missing']);

      steps.length = 0;
      const key = newKey();
      const failed = await post({ reference: `F-${key}`, amount: 1, fail: true }, key);
      expect(failed.status).toBe(500);
      expect(steps).toEqual(['principalOf', 'fingerprintHttp', 'runHandler', 'rollbackQuietly']);
      expect(await orders(`F-${key}`)).toBe(0);
      expect(await ds.getRepository(IdempotencyRecord).countBy({ key })).toBe(0);
    });
  });
}
