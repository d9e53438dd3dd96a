import {
  Body,
  Controller,
  Get,
  Header,
  HttpCode,
  Inject,
  Param,
  Post,
  Query,
  Req,
  Type,
  UseFilters,
  UseGuards,
} from '@nestjs/common';
import { GUARDS_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import type {
  DeadLetterGroups,
  DeadLetterGroupsQuery,
  DeadLetterPage,
  DeadLetterPageQuery,
} from '../outbox/dead-letter.model';
import type { DeadLetterDryRun } from '../outbox/dead-letter-trial.types';
import type { DeadLetterEditResult } from '../outbox/dead-letter-edit.types';
import { editFromConsole } from './console-edit';
import { ConsolePendingPage, readPendingPage } from './console-pending';
import { ConsoleKeyRecord, lookUpKey } from './console-keys';
import { readTrace } from './console-trace';
import type { OutboxTrace } from '../outbox/outbox-trace.types';
import { OUTBOX_CONSOLE_OPTIONS } from './console.constants';
import type { ResolvedOutboxConsoleOptions } from './console.options';
import { notFound } from './console-problem';
import { ConsoleProblemFilter } from './console-problem.filter';
import { ConsoleMessageView, toMessageView } from './console-message-view';
import { readMinutes, readSelection } from './console-request';
import { ConsoleSample, ConsoleSampler } from './console-sampler';
import { ConsoleOutboxes } from './console-outboxes';
import { ConsoleOutboxView, readOutboxList } from './console-outbox-list';
import { CONSOLE_APP_JS } from './page/console-script';
import { CONSOLE_TRACE_JS } from './page/console-trace-script';
import { CONSOLE_CSS } from './page/console-style';
import type { BrokerCircuit } from '../publisher/circuit-breaker';
import { renderConsolePage } from './page/console-page';
import { CrossSiteGuard } from './cross-site.guard';

/** Scripts and styles only from the console's own routes; nothing inline, no frames, no forms elsewhere. */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** What `GET <path>/api/summary` answers. */
export interface ConsoleSummary {
  pending: number;
  due: number;
  inFlight: number;
  dead: number;
  /** Age in ms of the oldest pending row: the relay's lag. */
  oldestPendingAgeMs: number;
  /** When it was read, epoch milliseconds. */
  at: number;
  /** The circuit breaker of each broker in this process (`OutboxPublisher.circuits`; empty when breakers are off). */
  circuits: BrokerCircuit[];
}

/** What `GET <path>/api/series` answers. */
export interface ConsoleSeries {
  /** The outbox the samples are of (its DataSource name). */
  outbox: string;
  sampleInterval: number;
  minutes: number;
  samples: ConsoleSample[];
}

/**
 * A new controller class for one mount of the console: its path and guard are set as Nest metadata on the class
 * (`PATH_METADATA`, `GUARDS_METADATA`), so each `OutboxConsoleModule.forRoot()` mounts where its options say, on
 * Express and Fastify alike.
 */
export function createConsoleController(options: ResolvedOutboxConsoleOptions): Type<unknown> {
  @Controller()
  @UseFilters(ConsoleProblemFilter)
  class OutboxConsoleController {
    constructor(
      @Inject(OUTBOX_CONSOLE_OPTIONS) private readonly options: ResolvedOutboxConsoleOptions,
      private readonly outboxes: ConsoleOutboxes,
      private readonly sampler: ConsoleSampler,
    ) {}

    @Get()
    @Header('Content-Type', 'text/html; charset=utf-8')
    @Header('Content-Security-Policy', CONTENT_SECURITY_POLICY)
    @Header('X-Content-Type-Options', 'nosniff')
    @Header('X-Frame-Options', 'DENY')
    @Header('Referrer-Policy', 'no-referrer')
    @Header('Cache-Control', 'no-store')
    page(@Req() request: { originalUrl?: string; url?: string }, @Query('outbox') outbox: unknown): string {
      this.outboxes.resolve(outbox); // an unknown name is a 404, as in the API
      const url = request.originalUrl ?? request.url ?? `/${this.options.path}`;
      return renderConsolePage(url.split('?')[0].replace(/\/+$/, ''));
    }

    @Get('app.js')
    @Header('Content-Type', 'text/javascript; charset=utf-8')
    @Header('X-Content-Type-Options', 'nosniff')
    @Header('Cache-Control', 'no-store')
    script(): string {
      return CONSOLE_APP_JS + CONSOLE_TRACE_JS;
    }

    @Get('app.css')
    @Header('Content-Type', 'text/css; charset=utf-8')
    @Header('X-Content-Type-Options', 'nosniff')
    @Header('Cache-Control', 'no-store')
    style(): string {
      return CONSOLE_CSS;
    }

    @Get('api/outboxes')
    @Header('Cache-Control', 'no-store')
    async outboxList(): Promise<{ outboxes: ConsoleOutboxView[] }> {
      return { outboxes: await readOutboxList(this.outboxes.all()) };
    }

    @Get('api/summary')
    @Header('Cache-Control', 'no-store')
    async summary(@Query('outbox') outbox: unknown): Promise<ConsoleSummary> {
      const { outbox: service, publisher } = this.outboxes.resolve(outbox);
      const stats = await service.stats();
      return { ...stats, at: Date.now(), circuits: publisher.circuits };
    }

    @Get('api/series')
    @Header('Cache-Control', 'no-store')
    series(@Query('minutes') minutes: unknown, @Query('outbox') outbox: unknown): ConsoleSeries {
      const { name } = this.outboxes.resolve(outbox);
      const span = readMinutes(minutes, this.options.window);
      return {
        outbox: name,
        sampleInterval: this.options.sampleInterval,
        minutes: span,
        samples: this.sampler.series(name, span),
      };
    }

    @Get('api/dead-letters')
    @Header('Cache-Control', 'no-store')
    deadLetterPage(@Query() query: Record<string, unknown>): Promise<DeadLetterPage> {
      const { outbox, ...filter } = query;
      return this.outboxes.resolve(outbox).deadLetters.page(filter as DeadLetterPageQuery);
    }

    @Get('api/dead-letters/count')
    @Header('Cache-Control', 'no-store')
    async deadLetterCount(@Query() query: Record<string, unknown>): Promise<{ count: number }> {
      const { outbox, ...filter } = query;
      return { count: await this.outboxes.resolve(outbox).deadLetters.count(filter) };
    }

    @Get('api/dead-letters/groups')
    @Header('Cache-Control', 'no-store')
    deadLetterGroups(@Query() query: Record<string, unknown>): Promise<DeadLetterGroups> {
      const { outbox, ...filter } = query;
      return this.outboxes.resolve(outbox).deadLetters.groups(filter as DeadLetterGroupsQuery);
    }

    @Get('api/pending')
    @Header('Cache-Control', 'no-store')
    pending(@Query() query: Record<string, unknown>): Promise<ConsolePendingPage> {
      const { outbox, ...rest } = query;
      return readPendingPage(this.outboxes.resolve(outbox).database, rest);
    }

    @Get('api/keys')
    @Header('Cache-Control', 'no-store')
    keys(@Query() query: Record<string, unknown>): Promise<{ records: ConsoleKeyRecord[] }> {
      const { outbox, ...rest } = query;
      return lookUpKey(this.outboxes.resolve(outbox).database, rest, this.options.showStoredResponses);
    }

    @Get('api/trace')
    @Header('Cache-Control', 'no-store')
    trace(@Query() query: Record<string, unknown>): Promise<OutboxTrace> {
      const { outbox, ...rest } = query;
      return readTrace(this.outboxes.resolve(outbox).outbox, rest, this.options.showStoredResponses);
    }

    @Get('api/messages/:id')
    @Header('Cache-Control', 'no-store')
    async message(
      @Param('id') id: string,
      @Query('outbox') outbox: unknown,
      @Query('destination') destination?: string,
    ): Promise<ConsoleMessageView> {
      const { name, deadLetters } = this.outboxes.resolve(outbox);
      const detail = await deadLetters.get(id, destination);
      if (!detail) {
        throw notFound(
          `The outbox '${name}' has no message with id ${JSON.stringify(id)} (never written there, purged or ` +
            'cleaned up).',
        );
      }
      return toMessageView(detail);
    }

    @Post('api/requeue')
    @HttpCode(200)
    @UseGuards(CrossSiteGuard)
    @Header('Cache-Control', 'no-store')
    async requeue(@Body() body: unknown, @Query('outbox') outbox: unknown): Promise<{ count: number }> {
      const { deadLetters } = this.outboxes.resolve(outbox);
      const selection = readSelection(body);
      return { count: await deadLetters.requeue('ids' in selection ? selection.ids : selection.filter) };
    }

    @Post('api/dry-run')
    @HttpCode(200)
    @UseGuards(CrossSiteGuard)
    @Header('Cache-Control', 'no-store')
    dryRun(@Body() body: unknown, @Query('outbox') outbox: unknown): Promise<DeadLetterDryRun> {
      // Guarded as a change: it runs the app's handlers (their transactions are rolled back, effects elsewhere not).
      const { deadLetters } = this.outboxes.resolve(outbox);
      const selection = readSelection(body);
      return deadLetters.dryRun('ids' in selection ? selection.ids : selection.filter);
    }

    @Post('api/edit')
    @HttpCode(200)
    @UseGuards(CrossSiteGuard)
    @Header('Cache-Control', 'no-store')
    edit(
      @Body() body: unknown,
      @Query('outbox') outbox: unknown,
      @Req() request: unknown,
    ): Promise<DeadLetterEditResult> {
      // Refused with 403 unless the outbox allows edits (deadLetters.allowEdit); the actor is the guard's principal.
      const { name, deadLetters } = this.outboxes.resolve(outbox);
      return editFromConsole(deadLetters, name, body, request);
    }

    @Post('api/purge')
    @HttpCode(200)
    @UseGuards(CrossSiteGuard)
    @Header('Cache-Control', 'no-store')
    async purge(@Body() body: unknown, @Query('outbox') outbox: unknown): Promise<{ count: number }> {
      const { deadLetters } = this.outboxes.resolve(outbox);
      const selection = readSelection(body);
      return { count: await deadLetters.purge('ids' in selection ? selection.ids : selection.filter) };
    }
  }
  Reflect.defineMetadata(PATH_METADATA, options.path, OutboxConsoleController);
  if (options.guard) Reflect.defineMetadata(GUARDS_METADATA, [options.guard], OutboxConsoleController);
  return OutboxConsoleController;
}
