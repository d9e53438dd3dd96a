import {
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  INestApplication,
  Injectable,
  NestInterceptor,
  ParseIntPipe,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { INTERCEPTORS_METADATA, SELF_DECLARED_DEPS_METADATA } from '@nestjs/common/constants';
import { ClientProxy, Ctx, MessagePattern, Payload, TcpContext } from '@nestjs/microservices';
import { lastValueFrom, Observable, of, tap } from 'rxjs';
import { DataSource } from 'typeorm';
import { getOutboxToken, IdempotencyKey, Idempotent, OutboxService } from '../src';
import { IdempotencyInterceptor } from '../src/idempotency/idempotency.interceptor';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { IdempotencyService } from '../src/idempotency/idempotency.service';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';
import { startWithTcpClient } from './helpers/tcp-app';

/**
 * `@Idempotent()` on message handlers — on the method in either decorator order, on a consumer class, on a class with
 * HTTP routes too, on a method that is a route and a handler at once: one mechanism, `IdempotencyInterceptor`, first
 * among the method's (or class's) interceptors. These tests check that the handler gets the arguments Nest gives it,
 * that the key is claimed before the app's own method interceptor runs, that a pipe's rejection claims no key, and
 * that concurrent deliveries apply once — over real TCP and a real database.
 */

type Request = { key: string; amount: number };
const runs: Record<string, number> = {};
const count = (name: string) => (runs[name] = (runs[name] ?? 0) + 1);
const seenByInterceptor: unknown[] = [];

/** An app's own interceptor on the same handler: runs after the key is claimed, and sees what the handler answered. */
@Injectable()
class RecordAnswers implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(tap((value) => seenByInterceptor.push(value)));
  }
}

@Controller()
class PathHandlers {
  constructor(private readonly outbox: OutboxService) {}

  /** `@Idempotent()` below the pattern (the documented order), with @Payload, @Ctx and @IdempotencyKey. */
  @MessagePattern('below')
  @Idempotent({ key: (data: Request) => data.key })
  async below(@Payload() data: Request, @Ctx() context: TcpContext, @IdempotencyKey() key: string) {
    await this.outbox.emit('Charged', { amount: data.amount });
    return { run: count('below'), amount: data.amount, key, tcp: context instanceof TcpContext };
  }

  /** Above the pattern, no parameter decorators: Nest's default (the data as the only argument) is kept. */
  @Idempotent({ key: (data: Request) => data.key })
  @MessagePattern('above')
  above(data: Request, second?: unknown) {
    return { run: count('above'), amount: data.amount, second: second === undefined ? 'none' : typeof second };
  }

  /** A handler that answers with an Observable, with an interceptor of the app's own declared above `@Idempotent()`. */
  @MessagePattern('observable')
  @UseInterceptors(RecordAnswers)
  @Idempotent({ key: (data: Request) => data.key })
  observable(@Payload() data: Request): Observable<unknown> {
    return of({ run: count('observable'), amount: data.amount });
  }

  /** A pipe that rejects the payload: the handler never starts, so the key stays free. */
  @MessagePattern('piped')
  @Idempotent({ key: (data: { key: string }) => data.key })
  piped(@Payload('amount', ParseIntPipe) amount: number) {
    return { run: count('piped'), amount };
  }

  /** A slow handler with an effect, for deliveries of one message that race each other. */
  @MessagePattern('slow')
  @Idempotent({ key: (data: Request) => data.key })
  async slow(@Payload() data: Request) {
    await this.outbox.emit('Charged', { amount: data.amount });
    await new Promise((resolve) => setTimeout(resolve, 150));
    return { run: count('slow'), amount: data.amount };
  }

  /** A handler that fails: rolled back with its key, so a retry runs it again. */
  @MessagePattern('failing')
  @Idempotent({ key: (data: Request) => data.key })
  async failing(@Payload() data: Request) {
    await this.outbox.emit('Charged', { amount: data.amount });
    if (count('failing') === 1) throw new Error('provider unavailable');
    return { run: runs.failing };
  }
}

/** A handler whose keys go to the outbox of another DataSource. */
@Controller()
class BillingHandler {
  @MessagePattern('billing')
  @Idempotent({ dataSource: 'billing' })
  handle(@Payload() data: Request) {
    return data;
  }
}

/** `@Idempotent()` on a consumer class (message handlers only): the class's interceptor guards each handler. */
@Controller()
@Idempotent({ key: (data: Request) => data.key })
class ClassGuarded {
  @MessagePattern('class')
  handle(@Payload() data: Request) {
    return { run: count('class'), amount: data.amount };
  }

  /** A method's own options still override the class's. */
  @MessagePattern('class-scoped')
  @Idempotent({ scope: () => 'refunds' })
  scoped(@Payload() data: Request) {
    return { run: count('class-scoped'), amount: data.amount };
  }
}

/** `@Idempotent()` on a controller with HTTP routes too: the class's interceptor guards every method. */
@Controller('mixed')
@Idempotent({ key: (data: Request) => data.key })
class MixedGuarded {
  @Post()
  create(@Body() body: Request) {
    return body;
  }

  @MessagePattern('mixed')
  handle(@Payload() data: Request) {
    return { run: count('mixed'), amount: data.amount };
  }
}

/** One method that is an HTTP route and a message handler at once: one interceptor guards both. */
@Controller('both')
class RouteAndPattern {
  @Post()
  @MessagePattern('both')
  @Idempotent({ key: (data: Request) => data.key })
  handle(@Body() body: Request) {
    return { run: count('both'), amount: body.amount };
  }
}

describe('@Idempotent() on message handlers (metadata)', () => {
  const interceptors = (target: Function) => Reflect.getMetadata(INTERCEPTORS_METADATA, target) ?? [];

  it('guards a handler through the interceptor, in either decorator order, first among the method’s own', () => {
    for (const method of [PathHandlers.prototype.below, PathHandlers.prototype.above]) {
      expect(interceptors(method)).toEqual([IdempotencyInterceptor]);
    }
    expect(interceptors(PathHandlers.prototype.observable)).toEqual([IdempotencyInterceptor, RecordAnswers]);
    expect(interceptors(RouteAndPattern.prototype.handle)).toEqual([IdempotencyInterceptor]);
  });

  it('gives @Idempotent({ dataSource }) the interceptor that is injected with that outbox’s IdempotencyService', () => {
    const [interceptor] = interceptors(BillingHandler.prototype.handle);
    expect(interceptor.name).toBe('IdempotencyInterceptor(billing)');
    const injected = (Reflect.getMetadata(SELF_DECLARED_DEPS_METADATA, interceptor) ?? []).map((d: any) => d.param);
    expect(injected).toContain(getOutboxToken(IdempotencyService, 'billing'));
  });

  it('guards a class-level @Idempotent() through the class’s interceptor, a consumer’s and a mixed one’s alike', () => {
    expect(interceptors(ClassGuarded)).toEqual([IdempotencyInterceptor]);
    expect(interceptors(MixedGuarded)).toEqual([IdempotencyInterceptor]);
  });
});

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `@Idempotent() message handlers over TCP on ${DATABASE_LABEL[kind]}`, () => {
    let db: TestDatabase;
    let app: INestApplication;
    let ds: DataSource;
    let client: ClientProxy;
    const send = <T = any>(pattern: string, data: object): Promise<T> => lastValueFrom(client.send<T>(pattern, data));
    const records = (scope: string) => ds.getRepository(IdempotencyRecord).countBy({ scope });
    const events = () => ds.query('SELECT COUNT(*) AS n FROM outbox_messages').then((rows) => Number(rows[0].n));

    beforeAll(async () => {
      db = await createTestDatabase(kind);
      const moduleRef = await createOutboxTestingModule({
        db,
        controllers: [PathHandlers, ClassGuarded, MixedGuarded, RouteAndPattern],
        outbox: { publisher: { enabled: false } },
      });
      ({ app, client } = await startWithTcpClient(moduleRef));
      ds = app.get(DataSource);
    });

    afterAll(async () => {
      await client?.close();
      await app?.close();
      await db?.drop();
    });

    beforeEach(() => {
      for (const name of Object.keys(runs)) delete runs[name];
      seenByInterceptor.length = 0;
    });

    it('gives the handler its declared arguments (@Payload, @Ctx, @IdempotencyKey) and runs it once per key', async () => {
      const before = await events();
      const first = await send('below', { key: `b-${kind}`, amount: 5 });
      expect(first).toEqual({ run: 1, amount: 5, key: `b-${kind}`, tcp: true });
      expect(await send('below', { key: `b-${kind}`, amount: 5 })).toEqual(first);
      expect(runs.below).toBe(1);
      expect(await events()).toBe(before + 1); // the event was written once, in the key's transaction
      expect(await records('PathHandlers.below')).toBe(1);
    });

    it('keeps Nest’s default arguments for a handler without parameter decorators (decorated above the pattern)', async () => {
      const first = await send('above', { key: `a-${kind}`, amount: 7 });
      expect(first).toEqual({ run: 1, amount: 7, second: 'none' });
      expect(await send('above', { key: `a-${kind}`, amount: 7 })).toEqual(first);
      expect(runs.above).toBe(1);
    });

    it('stores an Observable’s value; the key is claimed before the app’s own interceptor, which runs once', async () => {
      const first = await send('observable', { key: `o-${kind}`, amount: 3 });
      expect(first).toEqual({ run: 1, amount: 3 });
      expect(await send('observable', { key: `o-${kind}`, amount: 3 })).toEqual(first);
      expect(runs.observable).toBe(1);
      expect(seenByInterceptor).toEqual([first]); // the redelivery is answered before the method's own interceptor
    });

    it('claims no key when a pipe rejects the payload: a corrected retry with the same key runs', async () => {
      await expect(send('piped', { key: `p-${kind}`, amount: 'ten' })).rejects.toBeDefined();
      expect(runs.piped).toBeUndefined();
      expect(await records('PathHandlers.piped')).toBe(0);
      expect(await send('piped', { key: `p-${kind}`, amount: '10' })).toEqual({ run: 1, amount: 10 });
    });

    it('applies ten concurrent deliveries of one message once; each gets the one answer or is told to retry', async () => {
      const before = await events();
      const outcomes = await Promise.allSettled(
        Array.from({ length: 10 }, () => send('slow', { key: `s-${kind}`, amount: 4 })),
      );
      expect(runs.slow).toBe(1);
      expect(await events()).toBe(before + 1);
      expect(await records('PathHandlers.slow')).toBe(1);
      const answered = outcomes.filter((o) => o.status === 'fulfilled').map((o) => o.value);
      expect(answered.length).toBeGreaterThanOrEqual(1);
      for (const answer of answered) expect(answer).toEqual({ run: 1, amount: 4 });
      // PostgreSQL makes a racing delivery wait for the first; MariaDB and SQLite refuse it while it is in flight.
      for (const outcome of outcomes) {
        if (outcome.status === 'rejected') expect(JSON.stringify(outcome.reason)).toContain('idempotency-key-in-use');
      }
      if (kind === 'postgres') expect(answered).toHaveLength(10);
      // Once the first committed, a retry gets the answer.
      expect(await send('slow', { key: `s-${kind}`, amount: 4 })).toEqual({ run: 1, amount: 4 });
    });

    it('rolls back a failed run with its key and its event: the retry runs again and writes once', async () => {
      const before = await events();
      await expect(send('failing', { key: `f-${kind}`, amount: 2 })).rejects.toBeDefined();
      expect(await records('PathHandlers.failing')).toBe(0);
      expect(await events()).toBe(before);
      expect(await send('failing', { key: `f-${kind}`, amount: 2 })).toEqual({ run: 2 });
      expect(await events()).toBe(before + 1);
    });

    it('guards the handlers of a class-level @Idempotent() (a consumer’s, a mixed controller’s) and of a route that is a handler too', async () => {
      for (const [pattern, scope] of [
        ['class', 'ClassGuarded.handle'],
        ['class-scoped', 'refunds'],
        ['mixed', 'MixedGuarded.handle'],
        ['both', 'RouteAndPattern.handle'],
      ]) {
        const first = await send(pattern, { key: `${pattern}-${kind}`, amount: 1 });
        expect(await send(pattern, { key: `${pattern}-${kind}`, amount: 1 })).toEqual(first);
        expect(runs[pattern]).toBe(1);
        expect(await records(scope)).toBe(1);
      }
    });
  });
}
