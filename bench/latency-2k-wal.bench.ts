/**
 * latency-2k-wal: latency-2k with the WAL relay (`publisher.mode: 'wal'`) on the second cluster (`wal_level =
 * logical`, port 5433): commit → consumer receipt at 2,000 msg/s offered, each message its own transaction, beside
 * the raw-amqplib floor at the same rate.
 */
import { latencyBench } from './latency.bench';

export default latencyBench(
  { rate: 2000, messages: Number(process.env.LATENCY_2K_BENCH_MESSAGES ?? 10_000), warmup: 1000 },
  'latency-2k-wal',
  'wal',
);
