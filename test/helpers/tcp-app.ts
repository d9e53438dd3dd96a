import type { INestApplication } from '@nestjs/common';
import { ClientProxy, ClientProxyFactory, Transport } from '@nestjs/microservices';
import type { TestingModule } from '@nestjs/testing';
import { freePort } from './ports';

/**
 * Starts the app of `moduleRef` with a TCP microservice on a free local port, and a connected client of it: for
 * request/response handlers (`@MessagePattern`) tested over a real transport without a broker.
 */
export async function startWithTcpClient(
  moduleRef: TestingModule,
): Promise<{ app: INestApplication; client: ClientProxy }> {
  const app = moduleRef.createNestApplication({ logger: false });
  const port = await freePort();
  app.connectMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
  await app.startAllMicroservices();
  await app.init();
  const client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
  await client.connect();
  return { app, client };
}
