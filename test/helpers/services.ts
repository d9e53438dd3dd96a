import { Socket } from 'node:net';

/** The shared services on this kind of machine, at their default local ports. */
export const SERVICES = {
  postgres: { host: '127.0.0.1', port: 5432 },
  /** A second PostgreSQL with `wal_level = logical`, for the WAL relay (.ci/pg-logical.sh starts it). */
  'postgres-logical': { host: '127.0.0.1', port: 5433 },
  mariadb: { host: '127.0.0.1', port: 3306 },
  redis: { host: '127.0.0.1', port: 6379 },
  rabbitmq: { host: '127.0.0.1', port: 5672 },
  mqtt: { host: '127.0.0.1', port: 1883 },
  nats: { host: '127.0.0.1', port: 4222 },
} as const;

export type ServiceName = keyof typeof SERVICES;

/** How test titles name each service (the CI log's per-service summary counts them by these names). */
export const SERVICE_LABEL: Record<ServiceName, string> = {
  postgres: 'PostgreSQL',
  'postgres-logical': 'PostgreSQL (wal_level=logical)',
  mariadb: 'MariaDB',
  redis: 'Redis',
  rabbitmq: 'RabbitMQ',
  mqtt: 'MQTT',
  nats: 'NATS',
};

/** Resolves true when a TCP connection to the service opens within `timeoutMs`. */
export function isReachable(name: ServiceName, timeoutMs = 1500): Promise<boolean> {
  const { host, port } = SERVICES[name];
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, host, () => done(true));
  });
}

/** Services found down by the global setup (only outside CI; under CI a missing service fails the run). */
export function downServices(): Set<string> {
  return new Set((process.env.OUTBOX_TEST_DOWN_SERVICES ?? '').split(',').filter(Boolean));
}

/**
 * `describe` for a suite that needs real services. Under `CI=true` a missing service has already failed the
 * run in the global setup; elsewhere the suite is skipped with a loud warning naming the service.
 */
export function describeWith(services: ServiceName[], title: string, body: () => void): void {
  // The title ends with the services the suite needs, so the CI log names them: "… [PostgreSQL, RabbitMQ]".
  const labels = [...new Set(services)].map((s) => SERVICE_LABEL[s]);
  const name = labels.length === 0 ? title : `${title} [${labels.join(', ')}]`;
  const missing = services.filter((s) => downServices().has(s));
  if (missing.length === 0) {
    describe(name, body);
    return;
  }
  // Skipped only on a developer machine with the service stopped; CI fails before reaching this line.
  describe(`${name} [SKIPPED: ${missing.join(', ')} not reachable]`, () => {
    it(`needs ${missing.join(', ')}`, () => {
      console.warn(`SKIPPED "${name}": ${missing.join(', ')} not reachable on this machine`);
      expect(missing.length).toBeGreaterThan(0);
    });
  });
}
