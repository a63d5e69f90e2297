#!/usr/bin/env bash
# Extra MariaDB servers for multi-server tests, beside the machine's own (3306).
#
#   tests/support/mariadb_instances.sh start [PORT...]   start (or reuse) one server per port
#   tests/support/mariadb_instances.sh stop  [PORT...]   shut them down (data is kept)
#   tests/support/mariadb_instances.sh status [PORT...]
#   tests/support/mariadb_instances.sh urls  [PORT...]   print ASSOCDB_TEST_MYSQL_URLS' value
#
# Ports default to 3307 3308 3309. Each server has its own data directory,
# socket, pid file and log under $ASSOCDB_MARIADB_DIR (default
# /tmp/assocdb-mariadb/PORT), listens on 127.0.0.1 only, and runs with
# --skip-grant-tables, so `mysql://root@127.0.0.1:PORT/` works without a
# password. Starting is idempotent: a server that answers is reused.
# Small buffers: these are test servers on a 2-core machine.
# The server on $ASSOCDB_MYROCKS_PORT (default 3310; not started by default) loads
# MyRocks (Debian's mariadb-plugin-rocksdb) for `mysql://...?engine=rocksdb` graphs.
set -euo pipefail

ROOT=${ASSOCDB_MARIADB_DIR:-/tmp/assocdb-mariadb}
RUN_AS=${ASSOCDB_MARIADB_USER:-mysql}
MYROCKS_PORT=${ASSOCDB_MYROCKS_PORT:-3310}
action=${1:-status}
shift || true
ports=("$@")
[ ${#ports[@]} -gt 0 ] || ports=(3307 3308 3309)

ping() {  # port
    mariadb-admin --no-defaults --protocol=tcp -h 127.0.0.1 -P "$1" -u root \
        --connect-timeout=1 ping >/dev/null 2>&1
}

start() {  # port
    local port=$1 dir=$ROOT/$1
    if ping "$port"; then
        echo "mariadb $port: already running"
        return 0
    fi
    mkdir -p "$dir"
    if [ ! -d "$dir/data/mysql" ]; then
        mariadb-install-db --no-defaults --datadir="$dir/data" --user="$RUN_AS" \
            --skip-test-db --auth-root-authentication-method=normal >"$dir/install.log" 2>&1 || {
            cat "$dir/install.log" >&2
            return 1
        }
    fi
    chown -R "$RUN_AS" "$dir" 2>/dev/null || true
    local extra=()
    if [ "$port" = "$MYROCKS_PORT" ]; then  # MyRocks: loaded at start (INSTALL SONAME crashes 10.11)
        extra=(--plugin-load-add=ha_rocksdb.so --rocksdb-block-cache-size=64M)
    fi
    setsid mariadbd --no-defaults --user="$RUN_AS" --datadir="$dir/data" \
        --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" --port="$port" \
        --bind-address=127.0.0.1 --skip-grant-tables --skip-name-resolve \
        --innodb-buffer-pool-size=64M --innodb-log-file-size=32M \
        --performance-schema=OFF --max-connections=300 \
        --log-error="$dir/error.log" "${extra[@]}" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 1 60); do
        if ping "$port"; then
            echo "mariadb $port: started ($dir)"
            return 0
        fi
        sleep 0.5
    done
    echo "mariadb $port: did not start; see $dir/error.log" >&2
    tail -20 "$dir/error.log" >&2 || true
    return 1
}

stop() {  # port
    local port=$1 dir=$ROOT/$1
    if ! ping "$port"; then
        echo "mariadb $port: not running"
        return 0
    fi
    local pid
    pid=$(cat "$dir/mysqld.pid" 2>/dev/null || true)
    mariadb-admin --no-defaults --protocol=tcp -h 127.0.0.1 -P "$port" -u root shutdown
    # shutdown returns before the server has exited: wait for the process itself
    # (a server still shutting down answers pings, so a `start` right after this
    # would reuse it and lose its connections when it exits; on a loaded machine
    # a shutdown can take minutes)
    if [ -n "$pid" ]; then
        for _ in $(seq 1 600); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "mariadb $port: still shutting down after 300 s" >&2
            return 1
        fi
    fi
    echo "mariadb $port: stopped"
}

case $action in
start | stop)
    for port in "${ports[@]}"; do "$action" "$port"; done
    ;;
status)
    for port in "${ports[@]}"; do
        if ping "$port"; then echo "mariadb $port: running"; else echo "mariadb $port: down"; fi
    done
    ;;
urls)
    urls=()
    for port in "${ports[@]}"; do urls+=("mysql://root@127.0.0.1:$port/"); done
    (IFS=,; echo "${urls[*]}")
    ;;
*)
    echo "usage: $0 start|stop|status|urls [PORT...]" >&2
    exit 2
    ;;
esac
