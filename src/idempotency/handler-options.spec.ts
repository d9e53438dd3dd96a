import { Controller, Post } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { EventPattern, MessagePattern } from '@nestjs/microservices';
import { OutboxConfigurationError } from '../errors';
import { HandlerOptionsResolver, IdempotentOptionsCheck } from './handler-options';
import { Idempotent } from './idempotent.decorator';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from './idempotency.options';
import { resolveIdempotencyDefaults } from './idempotency.options-validation';
import type { IdempotencyService } from './idempotency.service';
import { RpcServers } from '../transports/consumer-ack-mode';

@Controller()
class Consumers {
  @EventPattern('A')
  @Idempotent({ mode: 'accept-first' })
  withDefaults() {}

  @EventPattern('B')
  @Idempotent({ mode: 'accept-first', retry: { maxAttempts: 3 } })
  withOwnRetry() {}

  @EventPattern('C')
  @Idempotent({ mode: 'accept-first', retry: false })
  withoutRetry() {}

  @EventPattern('D')
  @Idempotent({ mode: 'later' as never })
  unknownMode() {}

  @EventPattern('E')
  @Idempotent()
  processing() {}
}

@Controller('orders')
class HttpRoute {
  @Post()
  @Idempotent({ mode: 'accept-first' })
  create() {}
}

@Controller()
class RequestResponse {
  @MessagePattern('Q')
  @Idempotent({ mode: 'accept-first' })
  answer() {}
}

const retryDefaults = { maxAttempts: 10, initialDelay: 1000, factor: 2, maxDelay: 300_000, jitter: 0.2 };

describe("@Idempotent({ mode: 'accept-first' }) options", () => {
  const resolve = (method: keyof Consumers, defaults = DEFAULT_IDEMPOTENCY_OPTIONS) =>
    new HandlerOptionsResolver(new Reflector(), () => defaults).resolve({
      getClass: () => Consumers,
      getHandler: () => Consumers.prototype[method],
    } as never);

  it("is 'process' by default; accept-first without retry settings retries with the default options", () => {
    expect(resolve('processing')).toMatchObject({ mode: 'process', retry: false });
    expect(resolve('withDefaults')).toMatchObject({ mode: 'accept-first', retry: retryDefaults });
    expect(resolve('withOwnRetry').retry).toEqual({ ...retryDefaults, maxAttempts: 3 });
  });

  it('takes the module-wide idempotency.retry when the handler gives none', () => {
    const module = resolveIdempotencyDefaults({ retry: { maxAttempts: 5, jitter: 0 } });
    expect(resolve('withDefaults', module).retry).toEqual({ ...retryDefaults, maxAttempts: 5, jitter: 0 });
  });

  it('refuses retry: false and an unknown mode, saying the fix', () => {
    expect(() => resolve('withoutRetry')).toThrow(OutboxConfigurationError);
    expect(() => resolve('withoutRetry')).toThrow(/`retry: false` contradicts mode: 'accept-first'.*Leave `retry`/);
    expect(() => resolve('unknownMode')).toThrow(/`mode` must be 'process' or 'accept-first', got "later"/);
  });

  describe('at start-up', () => {
    const check = (controller: Function) => {
      const idempotency = {
        dataSourceName: 'default',
        defaults: DEFAULT_IDEMPOTENCY_OPTIONS,
        rpcServers: new RpcServers(),
      } as unknown as IdempotencyService;
      const discovery = { getControllers: () => [{ metatype: controller }] } as unknown as DiscoveryService;
      return () =>
        new IdempotentOptionsCheck(idempotency, discovery, new MetadataScanner(), new Reflector()).onModuleInit();
    };

    it('refuses it on an HTTP route and on a @MessagePattern, naming the handler and the fix', () => {
      expect(check(HttpRoute)).toThrow(OutboxConfigurationError);
      expect(check(HttpRoute)).toThrow(
        /@Idempotent\(\) on HttpRoute\.create: option `mode: 'accept-first'` is only for @EventPattern consumers, and this is an HTTP route\. Remove `mode` here/,
      );
      expect(check(RequestResponse)).toThrow(/RequestResponse\.answer: .* a @MessagePattern handler/);
    });

    it('refuses accept-first with retry: false on the consumer, named', () => {
      expect(check(Consumers)).toThrow(/@Idempotent\(\) on Consumers\.withoutRetry: option `retry: false` contradicts/);
    });
  });
});
