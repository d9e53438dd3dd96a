import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { OutboxModuleExtras, OutboxModuleOptions } from './outbox.options';

/** forRoot / forRootAsync (useFactory, useClass with `createOutboxOptions()`, useExisting), plus the extras. */
export const {
  ConfigurableModuleClass: OutboxConfigurableModule,
  MODULE_OPTIONS_TOKEN: OUTBOX_RAW_OPTIONS,
  OPTIONS_TYPE: OUTBOX_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: OUTBOX_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<OutboxModuleOptions>({ moduleName: 'Outbox' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createOutboxOptions')
  .setExtras<OutboxModuleExtras>(
    { isGlobal: false, dataSource: undefined, tables: undefined },
    (definition, extras) => ({
      ...definition,
      global: extras.isGlobal,
      dataSourceName: extras.dataSource,
      tables: extras.tables,
    }),
  )
  .build();

/** What `OutboxModule.forRoot()` takes: the options plus `isGlobal`, `dataSource` and `tables`. */
export type OutboxModuleRootOptions = typeof OUTBOX_OPTIONS_TYPE;
/** What `OutboxModule.forRootAsync()` takes: `useFactory` + `inject`, `useClass` or `useExisting`, plus the extras. */
export type OutboxModuleAsyncOptions = typeof OUTBOX_ASYNC_OPTIONS_TYPE;
