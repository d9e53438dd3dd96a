/**
 * `@Idempotent()` options are checked when the app boots: a typo, a non-function `scope` or a `dataSource` with no
 * outbox fails `app.init()` with an `OutboxConfigurationError` naming the handler and the fix — before, a message
 * handler's typo was refused only at its first message, which then was never acked.
 */
import { Controller, Post, Type } from '@nestjs/common';
import { EventPattern } from '@nestjs/microservices';
import { Idempotent, OutboxConfigurationError } from '../src';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, TestDatabase } from './helpers/databases';

@Controller()
class TypoConsumer {
  @EventPattern('OrderPlaced')
  @Idempotent({ ttll: 60_000 } as never)
  handle() {}
}

@Controller('orders')
@Idempotent({ requierd: true } as never)
class TypoClassController {
  @Post()
  create() {}
}

@Controller()
class StringScopeConsumer {
  @EventPattern('OrderPlaced')
  @Idempotent({ scope: 'tenant' } as never)
  handle() {}
}

@Controller()
class UnknownOutboxConsumer {
  @EventPattern('OrderPlaced')
  @Idempotent({ dataSource: 'billing' })
  handle() {}
}

@Controller('orders')
class ValidController {
  @Post()
  @Idempotent({ ttl: 60_000, required: false, scope: () => 'tenant-a' })
  create() {}

  @EventPattern('OrderPlaced')
  @Idempotent()
  handle() {}
}

describe('@Idempotent() options checked at start-up (SQLite)', () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase('sqlite');
  });
  afterEach(async () => {
    await db.drop();
  });

  /** The error that compiling and initialising an app with `controller` fails with (undefined when it boots). */
  async function init(controller: Type<unknown>): Promise<unknown> {
    let app: { init(): Promise<unknown>; close(): Promise<void> } | undefined;
    try {
      const moduleRef = await createOutboxTestingModule({
        db,
        controllers: [controller],
        outbox: { publisher: { enabled: false }, cleanup: { enabled: false } },
      });
      app = moduleRef.createNestApplication({ logger: false });
      await app.init();
      return undefined;
    } catch (error) {
      return error;
    } finally {
      await app?.close().catch(() => undefined);
    }
  }

  it.each([
    [
      TypoConsumer,
      /@Idempotent\(\) on TypoConsumer\.handle: option `idempotency\.ttll` is not a known option.*spelling/,
    ],
    [
      TypoClassController,
      /@Idempotent\(\) on TypoClassController\.create: option `idempotency\.requierd` is not a known/,
    ],
    [StringScopeConsumer, /StringScopeConsumer\.handle: option `scope` must be a function, got string/],
  ])('refuses %p at app.init()', async (controller, message) => {
    const error = await init(controller);
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    expect((error as Error).message).toMatch(message);
  });

  it('refuses a dataSource the app has no outbox for at app.init() (Nest cannot inject its service when the module compiles)', async () => {
    const error = await init(UnknownOutboxConsumer);
    expect((error as Error).message).toMatch(/nestjs-outbox:billing:IdempotencyService/);
  });

  it('boots an app whose @Idempotent() options are valid', async () => {
    expect(await init(ValidController)).toBeUndefined();
  });
});
