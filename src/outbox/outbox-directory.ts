import type { DiscoveryService } from '@nestjs/core';
import { isDefaultDataSource } from '../outbox.constants';
import { OutboxService } from './outbox.service';

/**
 * Every outbox of the app (one per `OutboxModule` import, so one per DataSource), found among its providers:
 * `OutboxService` instances by their DataSource name, the default DataSource first, then the others by name.
 * Found wherever they are provided, global or not.
 */
export function findOutboxes(discovery: DiscoveryService): Map<string, OutboxService> {
  const found = new Map<string, OutboxService>();
  for (const wrapper of discovery.getProviders()) {
    const instance: unknown = wrapper.instance;
    if (instance instanceof OutboxService && !found.has(instance.dataSourceName)) {
      found.set(instance.dataSourceName, instance);
    }
  }
  const names = [...found.keys()].sort((a, b) =>
    isDefaultDataSource(a) ? -1 : isDefaultDataSource(b) ? 1 : a.localeCompare(b),
  );
  return new Map(names.map((name) => [name, found.get(name)!]));
}
