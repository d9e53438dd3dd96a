import { Inject, Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OutboxDatabase } from '../dialects/outbox-database';
import { ClsTransactionSource } from './cls-transaction-source';
import { releaseTransactionSource, useTransactionSource } from './transaction-source.registry';
import type { OutboxTransactionSource } from './transaction.types';

/** Plugs the configured transaction source (`transactions` option) in for the outbox's DataSource at startup. */
@Injectable()
export class OutboxTransactionSourceRegistrar implements OnModuleInit, OnApplicationShutdown {
  private source?: OutboxTransactionSource;

  constructor(
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly database: OutboxDatabase,
    private readonly moduleRef: ModuleRef,
  ) {}

  async onModuleInit(): Promise<void> {
    const configured = this.options.transactions;
    if (configured === 'builtin') return;
    const source = configured === 'cls' ? new ClsTransactionSource() : configured;
    await source.init?.(this.database.dataSource, this.moduleRef);
    useTransactionSource(this.database.dataSource, source);
    this.source = source;
  }

  onApplicationShutdown(): void {
    if (this.source) releaseTransactionSource(this.database.dataSource, this.source);
  }
}
