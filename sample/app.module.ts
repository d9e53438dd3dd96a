import { DynamicModule, Module } from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OutboxModule } from 'nestjs-outbox';
import { OutboxConsoleModule } from 'nestjs-outbox/console';
import { brokerClientOptions, DEFAULT_CONSOLE_TOKEN, SampleConfig } from './config';
import { ConsoleTokenGuard } from './console/console-token.guard';
import { CustomerTotals } from './customers/customer-totals.entity';
import { CustomersController } from './customers/customers.controller';
import { DeliveryLog } from './customers/delivery-log';
import { DeliveryLogInterceptor } from './customers/delivery-log.interceptor';
import { OrderPlacedConsumer } from './customers/order-placed.consumer';
import { Order } from './orders/order.entity';
import { OrdersController } from './orders/orders.controller';
import { OrdersService } from './orders/orders.service';
import { OutboxController } from './outbox/outbox.controller';
import { Charge } from './payments/charge.entity';
import { PaymentsController } from './payments/payments.controller';
import { Account } from './signups/account.entity';
import { SignupsController } from './signups/signups.controller';
import { WelcomeEmail } from './signups/welcome-email.entity';
import { WelcomeEmails } from './signups/welcome-emails';
import { MetricsController } from './metrics/metrics.controller';
import { SamplePrometheus } from './metrics/prometheus';

/** Injection token of the broker client the outbox publishes through. */
export const BROKER = 'BROKER';

const ENTITIES = [Order, CustomerTotals, Charge, Account, WelcomeEmail];

/**
 * Connect and query timeouts of the driver: the library bounds its own waits, these bound the handlers' statements
 * when the database stops answering (PostgreSQL: connect 5 s, each query 10 s; MySQL/MariaDB: each query 10 s).
 */
function driverTimeouts(type: string): object {
  if (type === 'postgres') return { connectTimeoutMS: 5000, extra: { query_timeout: 10_000 } };
  if (type === 'mysql') return { connectTimeout: 5000, enableQueryTimeout: true, maxQueryExecutionTime: 10_000 };
  return {};
}

/** The shop: TypeORM + the broker client + the scheduler + the outbox, then the shop's own controllers. */
@Module({})
export class SampleAppModule {
  static forRoot(config: SampleConfig): DynamicModule {
    // The outbox's OpenTelemetry metrics, read by the Prometheus exporter and served at GET /metrics.
    const prometheus = new SamplePrometheus();
    return {
      module: SampleAppModule,
      imports: [
        // `autoLoadEntities` picks up the library's entities (outbox rows, idempotency records). `synchronize`
        // creates the tables at start — fine for a sample; use migrations in production.
        TypeOrmModule.forRoot({
          ...config.database,
          // Bound every wait of the driver too, as the start-up warning asks (docs/reliability.md).
          ...driverTimeouts(config.database.type),
          entities: ENTITIES,
          autoLoadEntities: true,
          synchronize: true,
          logging: false,
        }),
        TypeOrmModule.forFeature(ENTITIES),
        ClientsModule.register([{ name: BROKER, ...brokerClientOptions(config.broker) }]),
        ScheduleModule.forRoot(),
        OutboxModule.forRoot({
          // Events go to the broker, except UserSignedUp: it only feeds the in-process WelcomeEmails handler.
          route: { clients: [BROKER], select: ({ pattern }) => (pattern === 'UserSignedUp' ? null : BROKER) },
          isGlobal: true,
          metrics: { meterProvider: prometheus.meterProvider },
        }),
        // The outbox console at /console: backlog, lag, dead letters, requeue/purge — behind the operator token.
        OutboxConsoleModule.forRoot({
          path: 'console',
          guard: new ConsoleTokenGuard(config.consoleToken ?? DEFAULT_CONSOLE_TOKEN),
        }),
      ],
      controllers: [
        OrdersController,
        OrderPlacedConsumer,
        CustomersController,
        PaymentsController,
        SignupsController,
        OutboxController,
        MetricsController,
      ],
      providers: [
        OrdersService,
        DeliveryLog,
        DeliveryLogInterceptor,
        WelcomeEmails,
        { provide: SamplePrometheus, useValue: prometheus },
      ],
    };
  }
}
