import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

/**
 * The sample's metrics: an OpenTelemetry MeterProvider whose one reader is the Prometheus exporter, without the
 * exporter's own HTTP server (the shop serves `GET /metrics` itself, see MetricsController). One per app, handed to
 * `OutboxModule.forRoot({ metrics: { meterProvider } })`, so several apps in one process (the tests) never share
 * counters.
 */
export class SamplePrometheus {
  readonly exporter = new PrometheusExporter({ preventServerStart: true });
  readonly meterProvider = new MeterProvider({ readers: [this.exporter] });
}
