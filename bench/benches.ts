import type { Bench } from './bench-kit';

/**
 * Every benchmark by name, loaded on demand. Each module's default export runs it against a baseline measured in
 * the same run and returns the table and JSON fields.
 */
export const BENCHES: Record<string, () => Promise<{ default: Bench }>> = {
  'idempotency-http': () => import('./idempotency-http.bench'),
  'consumer-dedup': () => import('./consumer-dedup.bench'),
  relay: () => import('./relay.bench'),
  'relay-wal': () => import('./relay-wal.bench'),
  'relay-jetstream': () => import('./relay-jetstream.bench'),
  latency: () => import('./latency.bench'),
  'latency-2k': () => import('./latency-2k.bench'),
  'latency-2k-wal': () => import('./latency-2k-wal.bench'),
  backlog: () => import('./backlog.bench'),
  'scale-out': () => import('./scale-out.bench'),
  'claim-scale': () => import('./claim-scale.bench'),
  'emit-many': () => import('./emit-many.bench'),
  'wal-message': () => import('./wal-message.bench'),
};
