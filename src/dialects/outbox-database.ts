import { Inject, Injectable } from '@nestjs/common';
import { getDataSourceName } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { resolveDialect } from './resolve-dialect';
import type { OutboxDialect } from './outbox-dialect';
import { OutboxConfigurationError } from '../errors';
import { OUTBOX_DATA_SOURCE } from '../outbox.constants';
import { OutboxMessage } from '../schema/outbox-message.entity';
import {
  advisoryLockClassOf,
  outboxResourceNames,
  type OutboxResourceNames,
} from '../scheduling/outbox-resource-names';

/** The outbox's DataSource, its dialect and the resolved table name, looked up once. */
@Injectable()
export class OutboxDatabase {
  readonly dialect: OutboxDialect;
  readonly table: string;
  /** The DataSource's name in Nest ('default' unless named). */
  readonly name: string;
  /** The outbox's scheduler job names, NOTIFY channel and advisory lock class (distinct per outbox). */
  readonly resources: OutboxResourceNames;

  constructor(@Inject(OUTBOX_DATA_SOURCE) readonly dataSource: DataSource) {
    this.name = getDataSourceName(dataSource.options as { name?: string }) ?? 'default';
    this.dialect = resolveDialect(dataSource, advisoryLockClassOf(this.name));
    if (!dataSource.hasMetadata(OutboxMessage)) {
      throw new OutboxConfigurationError(
        `OutboxMessage is not an entity of the DataSource '${this.name}'. ` +
          'Set `autoLoadEntities: true` in TypeOrmModule.forRoot(), or add OutboxMessage to its `entities`.',
      );
    }
    this.table = dataSource.getMetadata(OutboxMessage).tablePath;
    this.resources = outboxResourceNames(this.name, this.table);
  }
}
