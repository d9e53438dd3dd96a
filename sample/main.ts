import { Logger } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { createSampleApp, startSampleApp } from './app';
import { readSampleConfig } from './config';

/** `npm run sample`: the shop on http://localhost:3000 (SQLite file + in-process TCP consumer unless told otherwise). */
async function main(): Promise<void> {
  const config = readSampleConfig();
  if (config.database.type === 'better-sqlite3') mkdirSync(dirname(config.database.database), { recursive: true });
  const app = await createSampleApp(config);
  // HTTP first: orders are accepted while the broker is down (their events wait in the outbox).
  await startSampleApp(app, config.port);
  const logger = new Logger('SampleShop');
  logger.log(`Listening on http://localhost:${config.port}`);
  logger.log(`Database: ${config.databaseLabel}`);
  logger.log(`Broker:   ${config.broker.label}`);
  logger.log('Try it: npm run sample:demo   (or see docs/sample.md for curl commands)');
}

main().catch((error) => {
  console.error(error instanceof Error && error.name === 'SampleConfigError' ? error.message : error);
  process.exit(1);
});
