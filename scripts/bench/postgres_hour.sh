#!/bin/sh
# For scripts/bench-auto-advance --postgres, under `timectl run --auto-advance`:
#   postgres_hour.sh DIR ITERATIONS
# makes a PostgreSQL cluster in DIR, starts its server (attached to the run,
# as the project's tests start programs), and runs a client ITERATIONS times:
# pg_sleep(55), then a pg_sleep(10) that statement_timeout cancels after 5 s
# (one virtual minute each); prints the virtual time the client took.
set -e
dir=$1
iterations=$2
rm -rf "$dir/data"
mkdir -p "$dir/socket"
initdb -D "$dir/data" -A trust -U postgres >/dev/null
pg_ctl -D "$dir/data" -o "-k $dir/socket -c listen_addresses=''" -l "$dir/server.log" -w start >/dev/null
start=$(date +%s)
i=0
while [ "$i" -lt "$iterations" ]; do
    psql -h "$dir/socket" -U postgres -X -q -v ON_ERROR_STOP=0 postgres >/dev/null 2>&1 <<SQL
SELECT pg_sleep(55);
SET statement_timeout = '5s';
SELECT pg_sleep(10);
SQL
    i=$((i + 1))
done
echo "client: $(( $(date +%s) - start )) s of virtual time"
pg_ctl -D "$dir/data" -m fast -w stop >/dev/null
