import { Inject, Injectable, Optional } from '@nestjs/common';
import { getDataSourceName } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { resolveDialect } from './resolve-dialect';
import type { OutboxDialect } from './outbox-dialect';
import { OUTBOX_DATA_SOURCE, OUTBOX_TABLES } from '../outbox.constants';
import { outboxEntitySet, type OutboxEntitySet } from '../schema/outbox-entities';
import { checkTableNamesFor, outboxTableNames, type OutboxTableNames } from '../schema/outbox-table-names';
import { checkEntitiesRegistered } from '../schema/outbox-entities.check';
import {
  advisoryLockClassOf,
  outboxResourceNames,
  type OutboxResourceNames,
} from '../scheduling/outbox-resource-names';

/** The outbox's DataSource, its dialect, its entities and the resolved table name, looked up once. */
@Injectable()
export class OutboxDatabase {
  readonly dialect: OutboxDialect;
  /** The outbox table's path (`[schema.]table`). */
  readonly table: string;
  /** The DataSource's name in Nest ('default' unless named). */
  readonly name: string;
  /** The outbox's scheduler job names, NOTIFY channel and advisory lock class (distinct per outbox). */
  readonly resources: OutboxResourceNames;
  /** The entity classes of the outbox's tables (the `tables` option; the shipped entities by default). */
  readonly entities: OutboxEntitySet;

  constructor(
    @Inject(OUTBOX_DATA_SOURCE) readonly dataSource: DataSource,
    @Optional() @Inject(OUTBOX_TABLES) tables: OutboxTableNames = outboxTableNames(),
  ) {
    this.name = getDataSourceName(dataSource.options as { name?: string }) ?? 'default';
    this.dialect = resolveDialect(dataSource, advisoryLockClassOf(this.name));
    checkTableNamesFor(tables, dataSource.options.type, `The outbox of the DataSource '${this.name}'`);
    this.entities = outboxEntitySet(tables);
    checkEntitiesRegistered(dataSource, this.name, this.entities, ['message']);
    this.table = dataSource.getMetadata(this.entities.message).tablePath;
    this.resources = outboxResourceNames(this.name, this.table);
  }
}
