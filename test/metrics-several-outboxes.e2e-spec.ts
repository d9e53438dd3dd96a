import { Body, Controller, Get, type INestApplication, Module, Post, Req, Res } from '@nestjs/common';
import { ClientsModule, Transport } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, Server } from 'node:net';
import request from 'supertest';
import {
  getOutboxToken,
  Idempotent,
  OutboxModule,
  OutboxNonRetryableError,
  OutboxPublisher,
  OutboxService,
} from '../src';
import { twoDataSources } from './fixtures/two-data-sources';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { freePort } from './helpers/ports';
import { sampleLines, sampleOf } from './helpers/prometheus-text';
import { describeWith } from './helpers/services';

/** A client serializer refusing for good every message marked `poison` (it goes dead at its first attempt). */
class PoisonRefusingSerializer {
  serialize(packet: unknown): unknown {
    if (JSON.stringify(packet).includes('"poison":true')) throw new OutboxNonRetryableError('cannot encode poison');
    return packet;
  }
}

const exporter = new PrometheusExporter({ preventServerStart: true });
const meterProvider = new MeterProvider({ readers: [exporter] });

@Controller()
class MetricsController {
  @Get('metrics')
  scrape(@Req() req: IncomingMessage, @Res() res: ServerResponse) {
    exporter.getMetricsRequestHandler(req, res);
  }
}

/** One idempotent route per outbox: the key of each goes to its own DataSource. */
@Controller()
class PaymentsController {
  @Post('orders')
  @Idempotent()
  order(@Body() body: { n: number }) {
    return { order: body.n };
  }

  @Post('invoices')
  @Idempotent({ dataSource: 'billing' })
  invoice(@Body() body: { n: number }) {
    return { invoice: body.n };
  }
}

describeWith(
  ['postgres'],
  `Prometheus metrics of two outboxes: default on ${DATABASE_LABEL.sqlite}, 'billing' on ${DATABASE_LABEL.postgres}`,
  () => {
    let ordersDb: TestDatabase;
    let billingDb: TestDatabase;
    let sink: Server;
    let app: INestApplication;
    const scrape = async () => (await request(app.getHttpServer()).get('/metrics').expect(200)).text;

    beforeAll(async () => {
      [ordersDb, billingDb] = await Promise.all([createTestDatabase('sqlite'), createTestDatabase('postgres')]);
      // A TCP peer that accepts and discards what both outboxes send it.
      const port = await freePort();
      sink = createServer((socket) => socket.resume());
      await new Promise<void>((resolve) => sink.listen(port, '127.0.0.1', resolve));
      const tcp = {
        transport: Transport.TCP,
        options: { host: '127.0.0.1', port, serializer: new PoisonRefusingSerializer() },
      };
      const outbox = { publisher: { enabled: false }, metrics: { meterProvider } };
      @Module({
        imports: [
          ...twoDataSources(ordersDb, billingDb),
          ClientsModule.register([
            { name: 'ORDERS_BROKER', ...tcp },
            { name: 'BILLING_BROKER', ...tcp },
          ] as never),
          ScheduleModule.forRoot(),
          OutboxModule.forRoot({ client: 'ORDERS_BROKER', ...outbox }),
          OutboxModule.forRoot({ dataSource: 'billing', client: 'BILLING_BROKER', ...outbox }),
        ],
        controllers: [MetricsController, PaymentsController],
      })
      class TwoOutboxMetricsModule {}
      const moduleRef = await Test.createTestingModule({ imports: [TwoOutboxMetricsModule] }).compile();
      app = moduleRef.createNestApplication({ logger: false });
      await app.init();
    });

    afterAll(async () => {
      await app?.close();
      await meterProvider.shutdown();
      await new Promise((resolve) => sink?.close(resolve));
      await Promise.all([ordersDb?.drop(), billingDb?.drop()]);
    });

    it('labels every series with outbox_data_source: the same pattern in two outboxes is two series', async () => {
      const orders = app.get(OutboxService);
      const billing = app.get<OutboxService>(getOutboxToken(OutboxService, 'billing'));
      await orders.transaction(async () => {
        for (const n of [1, 2, 3]) await orders.emit('Paid', { n });
      });
      await billing.transaction(async () => {
        for (const n of [1, 2]) await billing.emit('Paid', { n });
        await billing.emit('Paid', { poison: true });
      });
      const before = await scrape();
      expect(sampleOf(before, 'outbox_backlog_pending', { outbox_data_source: 'default' })).toBe(3);
      expect(sampleOf(before, 'outbox_backlog_pending', { outbox_data_source: 'billing' })).toBe(3);

      expect(await app.get(OutboxPublisher).flush()).toBe(3);
      expect(await app.get<OutboxPublisher>(getOutboxToken(OutboxPublisher, 'billing')).flush()).toBe(2);
      const post = (path: string, key: string) =>
        request(app.getHttpServer()).post(path).set('Idempotency-Key', key).send({ n: 1 }).expect(201);
      await post('/orders', 'order-1');
      await post('/invoices', 'invoice-1');
      await post('/invoices', 'invoice-1'); // replayed

      const text = await scrape();
      const sent = (outbox: string, extra: Record<string, string> = {}) =>
        sampleOf(text, 'messaging_client_sent_messages_total', {
          outbox_data_source: outbox,
          messaging_destination_name: 'Paid',
          ...extra,
        });
      expect(sampleLines(text).filter((l) => l.startsWith('messaging_client_sent_messages_total')).length).toBe(3);
      expect(sent('default')).toBe(3);
      expect(sent('billing', { error_type: 'OutboxNonRetryableError' })).toBe(1);
      expect(sent('billing')).toBe(3); // 2 published + the failed attempt
      expect(sampleOf(text, 'outbox_publish_delay_count', { outbox_data_source: 'default' })).toBe(3);
      expect(sampleOf(text, 'outbox_publish_delay_count', { outbox_data_source: 'billing' })).toBe(2);
      expect(sampleOf(text, 'outbox_messages_dead_lettered_total', { outbox_data_source: 'billing' })).toBe(1);
      expect(sampleOf(text, 'outbox_messages_dead_lettered_total', { outbox_data_source: 'default' })).toBeUndefined();
      expect(sampleOf(text, 'outbox_backlog_dead', { outbox_data_source: 'billing' })).toBe(1);
      expect(sampleOf(text, 'outbox_backlog_dead', { outbox_data_source: 'default' })).toBe(0);
      expect(sampleOf(text, 'outbox_backlog_pending', { outbox_data_source: 'billing' })).toBe(0);

      // Idempotency keys count under the DataSource they were recorded in.
      const outcome = (outbox: string, consumer: string, value: string) =>
        sampleOf(text, 'outbox_idempotency_requests_total', {
          outbox_data_source: outbox,
          outbox_idempotency_consumer: consumer,
          outbox_idempotency_outcome: value,
        });
      expect(outcome('default', 'PaymentsController.order', 'executed')).toBe(1);
      expect(outcome('billing', 'PaymentsController.invoice', 'executed')).toBe(1);
      expect(outcome('billing', 'PaymentsController.invoice', 'replayed')).toBe(1);
      expect(outcome('default', 'PaymentsController.invoice', 'executed')).toBeUndefined();

      // Every sample of the library's meter says which outbox it is of.
      const ours = sampleLines(text).filter((l) => /^(outbox_|messaging_client_)/.test(l));
      expect(ours.length).toBeGreaterThan(10);
      expect(ours.filter((l) => !/outbox_data_source="(default|billing)"/.test(l))).toEqual([]);
    });
  },
);
