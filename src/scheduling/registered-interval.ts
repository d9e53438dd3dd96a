import type { SchedulerRegistry } from '@nestjs/schedule';

/**
 * Stops a loop's interval: through `SchedulerRegistry` when it was registered there (which clears it), else
 * directly. Shared by the publisher and the cleanup, whose loops are registered the same way.
 */
export function stopRegisteredInterval(
  registry: SchedulerRegistry | undefined,
  name: string,
  timer: NodeJS.Timeout,
): void {
  if (registry?.doesExist('interval', name)) registry.deleteInterval(name);
  else clearInterval(timer);
}
