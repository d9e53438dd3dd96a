#!/usr/bin/env bash
# A second PostgreSQL cluster with wal_level = logical on port 5433, for the WAL relay's tests (test/helpers
# 'postgres-logical'). The shared cluster on 5432 is never touched. Idempotent: an existing cluster is only started.
set -euo pipefail
PORT=${PG_LOGICAL_PORT:-5433}
VERSION=${PG_LOGICAL_VERSION:-$(ls /etc/postgresql | sort -n | tail -n1)}
NAME=logical
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if port_open "$PORT"; then echo "   PostgreSQL (logical) already up on :$PORT"; exit 0; fi
if [ ! -d "/etc/postgresql/$VERSION/$NAME" ]; then
  echo "   creating PostgreSQL $VERSION cluster '$NAME' on :$PORT (wal_level = logical)"
  pg_createcluster "$VERSION" "$NAME" --port "$PORT" -- --auth=trust >/dev/null
fi
CONF="/etc/postgresql/$VERSION/$NAME/postgresql.conf"
grep -q '^wal_level = logical' "$CONF" || cat >>"$CONF" <<CONF
# nestjs-outbox CI (.ci/pg-logical.sh)
wal_level = logical
max_replication_slots = 64
max_wal_senders = 64
max_slot_wal_keep_size = 1GB
CONF
pg_ctlcluster --skip-systemctl-redirect "$VERSION" "$NAME" start
for _ in $(seq 1 60); do port_open "$PORT" && break; sleep 1; done
port_open "$PORT" || { echo "!! PostgreSQL (logical) did not come up on :$PORT" >&2; exit 1; }
psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 ||
  psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -c 'CREATE DATABASE test' >/dev/null
echo "   PostgreSQL (logical) is up on :$PORT ($(psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -tAc 'SHOW wal_level'))"
