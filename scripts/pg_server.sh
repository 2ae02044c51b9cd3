#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests, on a Unix socket in its own folder (no TCP port):
#   scripts/pg_server.sh start DIR   # initdb + start; prints the socket folder (DIR)
#   scripts/pg_server.sh stop DIR    # stop (fast) and keep the data: `start DIR` brings it back
#   scripts/pg_server.sh remove DIR  # stop and delete DIR
# Its superuser is `tiletune` (no password, trusted on the socket); the role `tiletune_pw` with
# password `secret` needs its password, for the tests of refused credentials. initdb refuses to
# run as root, so under root the server runs as the `postgres` user of Debian's package.
set -euo pipefail
cmd=${1:?start, stop or remove}
dir=${2:?the server folder}
bindir=$(pg_config --bindir 2>/dev/null || true)
[ -x "$bindir/initdb" ] || bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bindir/initdb" ] || { echo "pg_server: no PostgreSQL server binaries (install postgresql)" >&2; exit 1; }
as=()
[ "$(id -u)" -ne 0 ] || as=(runuser -u postgres --)

case $cmd in
start)
  if [ ! -d "$dir/data" ]; then
    mkdir -p "$dir"
    if [ ${#as[@]} -gt 0 ]; then
      chown postgres "$dir"
      "${as[@]}" test -x "$dir" ||
        { echo "pg_server: user postgres cannot reach $dir (put it in a folder others may enter, like /tmp)" >&2; exit 1; }
    fi
    "${as[@]}" "$bindir/initdb" -D "$dir/data" -U tiletune --auth=trust -E UTF8 > "$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    # First match wins: the password role's line goes before initdb's "trust all".
    sed -i '1i local all tiletune_pw scram-sha-256' "$dir/data/pg_hba.conf"
    fresh=1
  fi
  # Throwaway data: no fsync, unless TILETUNE_PG_DURABLE=1 (benchmarks of write rates). Enough
  # connections for the parallel tests' daemons.
  durability="-c fsync=off -c full_page_writes=off"
  [ "${TILETUNE_PG_DURABLE:-0}" != 1 ] || durability=""
  "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-k $dir -c listen_addresses='' $durability -c max_connections=300" start > /dev/null ||
    { cat "$dir/server.log" >&2; exit 1; }
  if [ "${fresh:-0}" = 1 ]; then
    "$bindir/psql" -q -h "$dir" -U tiletune -d postgres -c "CREATE ROLE tiletune_pw LOGIN CREATEDB PASSWORD 'secret'" \
      > /dev/null
  fi
  echo "$dir"
  ;;
stop)
  [ ! -f "$dir/data/postmaster.pid" ] || "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop > /dev/null
  ;;
remove)
  [ ! -f "$dir/data/postmaster.pid" ] || "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop > /dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
*)
  echo "pg_server: start, stop or remove" >&2
  exit 2
  ;;
esac
