import { Controller, Get, Req, Res } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SamplePrometheus } from './prometheus';

/** `GET /metrics`: the Prometheus text format of the outbox's metrics (what a Prometheus server scrapes). */
@Controller('metrics')
export class MetricsController {
  constructor(private readonly prometheus: SamplePrometheus) {}

  @Get()
  scrape(
    @Req() request: { raw?: IncomingMessage } & IncomingMessage,
    @Res() response: { raw?: ServerResponse } & ServerResponse,
  ): void {
    // Express hands Node's own objects; Fastify wraps them (`.raw`). The exporter writes the response itself.
    this.prometheus.exporter.getMetricsRequestHandler(request.raw ?? request, response.raw ?? response);
  }
}
