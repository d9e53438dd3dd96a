import { Injectable, OnModuleInit } from '@nestjs/common';
import { loadOpenTelemetry } from '../util/opentelemetry';

/** Loads `@opentelemetry/api` (when installed) before the app serves, so `emit()` can record the trace context. */
@Injectable()
export class OutboxTracingLoader implements OnModuleInit {
  async onModuleInit(): Promise<void> {
    await loadOpenTelemetry();
  }
}
