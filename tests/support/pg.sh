#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for the tests: initdb + pg_ctl as an unprivileged user, in a
# temporary directory, on a free TCP port of 127.0.0.1 (and a Unix socket inside that directory),
# password-protected, with nothing installed system-wide beyond that user.
#
#   pg.sh start DIR          creates the cluster in DIR (must not exist), starts it and prints its
#                            URL, postgresql://attnlab:PASSWORD@127.0.0.1:PORT/attnlab
#   pg.sh stop DIR           stops the cluster in DIR and removes DIR
#   pg.sh createdb URL NAME  creates database NAME (if missing) on URL's server; prints its URL
#   pg.sh run CMD [ARGS...]  start, run CMD with ATTNLAB_TEST_PG set to the URL, stop; CMD's status
#
# As root, the cluster runs as the system user attnlab-pg (created when missing: initdb refuses
# root). The server is tuned for tests (fsync off): never point it at data you want to keep.
set -euo pipefail

PG_USER=${ATTNLAB_PG_OS_USER:-attnlab-pg}

die() { echo "pg.sh: $*" >&2; exit 2; }

pg_bindir() {
  local d
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null || true)
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return; }
  die "no PostgreSQL server found (install Debian's postgresql: scripts/deps.sh --test)"
}

# Runs a command as the cluster's owner.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$PG_USER" -- "$@"; else "$@"; fi
}

ensure_user() {
  [ "$(id -u)" -eq 0 ] || return 0
  id -u "$PG_USER" >/dev/null 2>&1 && return 0
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$PG_USER" ||
    id -u "$PG_USER" >/dev/null 2>&1 || die "cannot create the user $PG_USER"
}

# 0 when something listens on TCP port $1 (IPv4 or IPv6), from /proc (no extra tools needed).
port_busy() {
  local hex
  hex=$(printf ':%04X' "$1")
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$hex" '$2 ~ p"$" && $4 == "0A" {f=1} END {exit !f}'
}

cmd_start() {
  local dir=${1:?usage: pg.sh start DIR}
  [ -e "$dir" ] && die "$dir exists already"
  local bin
  bin=$(pg_bindir)
  ensure_user
  # The cluster's real home must be reachable by its owner; DIR's parent may not be (a 0700
  # temp dir of root's), in which case DIR becomes a link to a directory under /tmp.
  local home=$dir
  mkdir -p "$(dirname "$dir")"
  if [ "$(id -u)" -eq 0 ]; then
    mkdir "$dir"
    chown "$PG_USER" "$dir"
    if ! as_owner test -w "$dir"; then
      rmdir "$dir"
      home=$(mktemp -d /tmp/attnlab-pg.XXXXXX)
      chown "$PG_USER" "$home"
      ln -s "$home" "$dir"
    fi
  else
    mkdir "$dir"
  fi
  chmod 700 "$home"
  local pw
  pw=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  as_owner sh -c "umask 077; printf '%s\n' '$pw' > '$home/pwfile'; mkdir '$home/sock'"
  as_owner "$bin/initdb" -D "$home/data" -U attnlab --pwfile="$home/pwfile" -A scram-sha-256 \
    -E UTF8 --locale=C -N >"$home/initdb.log" 2>&1 || { cat "$home/initdb.log" >&2; die "initdb failed"; }
  local port tries=0
  while :; do
    tries=$((tries + 1))
    [ "$tries" -le 30 ] || die "no free port found for PostgreSQL"
    port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    port_busy "$port" && continue
    if as_owner "$bin/pg_ctl" -D "$home/data" -l "$home/server.log" -w -t 60 -s \
        -o "-p $port -k $home/sock -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
            -c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB -c log_min_messages=warning" \
        start >/dev/null 2>&1; then
      break
    fi
    # Lost a race for the port: try another one; anything else is fatal.
    grep -qiE 'could not bind|address already in use|could not create any TCP/IP sockets' "$home/server.log" 2>/dev/null ||
      { tail -n 20 "$home/server.log" >&2 2>/dev/null; die "pg_ctl start failed"; }
    : >"$home/server.log" 2>/dev/null || true
  done
  local url="postgresql://attnlab:$pw@127.0.0.1:$port/attnlab"
  echo "$port" | as_owner sh -c "cat > '$home/port'"
  PGPASSWORD=$pw as_owner "$bin/createdb" -h "$home/sock" -p "$port" -U attnlab attnlab ||
    { cmd_stop "$dir"; die "createdb failed"; }
  echo "$url"
}

cmd_stop() {
  local dir=${1:?usage: pg.sh stop DIR}
  [ -e "$dir" ] || return 0
  local home
  home=$(readlink -f "$dir")
  local bin
  bin=$(pg_bindir)
  if [ -f "$home/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$home/data" -m immediate -w -t 30 -s stop >/dev/null 2>&1 || true
  fi
  rm -rf "$home"
  [ -L "$dir" ] && rm -f "$dir"
  return 0
}

cmd_createdb() {
  local url=${1:?usage: pg.sh createdb URL NAME} name=${2:?usage: pg.sh createdb URL NAME}
  case "$name" in *[!a-zA-Z0-9_]*|'') die "database name '$name': letters, digits and _ only" ;; esac
  local base=${url%/*}
  # "already exists" is fine: a restarted test server reuses its database.
  local out
  if ! out=$(createdb --maintenance-db="$url" "$name" 2>&1); then
    case "$out" in *"already exists"*) ;; *) echo "$out" >&2; die "createdb $name failed" ;; esac
  fi
  echo "$base/$name"
}

cmd_run() {
  [ $# -gt 0 ] || die "usage: pg.sh run CMD [ARGS...]"
  PG_RUN_DIR=$(mktemp -u "${TMPDIR:-/tmp}/attnlab-pg-run.XXXXXX")
  local url
  url=$(cmd_start "$PG_RUN_DIR") || { cmd_stop "$PG_RUN_DIR"; exit 2; }
  trap 'cmd_stop "$PG_RUN_DIR"; exit 130' INT TERM HUP
  local rc=0
  ATTNLAB_TEST_PG=$url "$@" || rc=$?
  trap - INT TERM HUP
  cmd_stop "$PG_RUN_DIR"
  exit "$rc"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  createdb) shift; cmd_createdb "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) die "usage: pg.sh start DIR | stop DIR | createdb URL NAME | run CMD [ARGS...]" ;;
esac
