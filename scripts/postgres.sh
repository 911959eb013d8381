#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests of the PostgreSQL store, for developers and for
# CI (.ci/run): `initdb` in a folder of its own, a server on a free port of 127.0.0.1 with
# password-less (trust) logins for the `postgres` role, and a database `turnstile`. Durability
# is left as a real server has it (fsync on). Every wait is bounded by a timeout. Run
# `scripts/postgres.sh --help` for the commands.
#
# initdb and postgres refuse to run as root: as root they run as the `postgres` user, which
# must be able to reach the folder (a parent it cannot search is given `o+x`).
set -euo pipefail
shopt -s nullglob

PROG="${0}"
MARKER=".turnstile-postgres"   # in every folder this script made; `stop` removes only those
DB=turnstile
ROLE=postgres
PG_OS_USER=postgres           # who runs the server when we are root

usage() {
  cat <<EOF
Start and stop a throwaway PostgreSQL cluster for turnstile's tests.

Usage: $PROG <COMMAND> [DIR]

Commands:
  start [DIR]  Create and start a cluster in DIR (default: a new folder from mktemp -d)
               with the database '$DB', and print its URL on stdout. Also writes the
               URL to DIR/url and 'export TURNSTILE_TEST_POSTGRES=<url>' to DIR/env.
  env [DIR]    Like start, but print the export line instead of the URL:
                 eval "\$($PROG env)"
  stop DIR     Stop the cluster in DIR (immediate shutdown) if it runs and remove DIR.
               Succeeds when DIR is already gone.
  restart DIR  Stop the cluster in DIR at once (as a crash does: every connection is cut)
               and start it again on the same port, keeping its data.
  help         Print this help

Options:
  -h, --help   Print this help

The server binaries (initdb, pg_ctl, postgres) and psql are taken from PATH or from
/usr/lib/postgresql/<version>/bin; as root, Debian's 'postgresql' package is installed with
apt-get when they are missing. Progress goes to stderr.
EOF
}

die() {
  echo "error: $*" >&2
  exit 1
}

# A usage error, in the manner of cargo and ripgrep: the error, the usage line, a hint; exit 2.
usage_error() {
  {
    echo "error: $*"
    echo
    echo "Usage: $PROG <start [DIR] | env [DIR] | stop DIR | restart DIR>"
    echo
    echo "For more information, try '--help'."
  } >&2
  exit 2
}

say() { echo "postgres.sh: $*" >&2; }

is_root() { [[ $(id -u) -eq 0 ]]; }

# Runs a command as the owner of the cluster: the `postgres` user when we are root, else us.
# From a folder every user can enter, so that initdb does not complain about our working one.
as_pg() {
  if is_root; then
    (cd / && runuser -u "$PG_OS_USER" -- "$@")
  else
    "$@"
  fi
}

# Sets INITDB, PG_CTL and PSQL, from PATH or from the newest /usr/lib/postgresql/*/bin.
# Returns 1 when the server binaries are not there.
find_binaries() {
  INITDB='' PG_CTL='' PSQL=''
  local bin
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    INITDB=$(command -v initdb)
    PG_CTL=$(command -v pg_ctl)
  else
    # Debian keeps the server binaries off PATH; the newest version first.
    local dirs=(/usr/lib/postgresql/*/bin)
    if ((${#dirs[@]})); then
      while IFS= read -r bin; do
        if [[ -x $bin/initdb && -x $bin/pg_ctl ]]; then
          INITDB=$bin/initdb
          PG_CTL=$bin/pg_ctl
          break
        fi
      done < <(printf '%s\n' "${dirs[@]}" | sort -rV)
    fi
  fi
  [[ -n $PG_CTL ]] || return 1
  if command -v psql >/dev/null 2>&1; then
    PSQL=$(command -v psql)
  elif [[ -x $(dirname "$PG_CTL")/psql ]]; then
    PSQL=$(dirname "$PG_CTL")/psql
  else
    return 1
  fi
}

# find_binaries, installing Debian's `postgresql` package first when we are root and they are
# missing; otherwise a message saying what to install.
need_binaries() {
  find_binaries && return 0
  if ! is_root; then
    die "PostgreSQL's server binaries (initdb, pg_ctl, postgres) and psql were not found on PATH
or in /usr/lib/postgresql/*/bin. Install PostgreSQL (Debian/Ubuntu: 'sudo apt-get install
postgresql'; Fedora: 'sudo dnf install postgresql-server'; macOS: 'brew install postgresql')
or put its bin folder on PATH, then run this again."
  fi
  command -v apt-get >/dev/null 2>&1 ||
    die "PostgreSQL's server binaries were not found and there is no apt-get to install them:
install PostgreSQL (initdb, pg_ctl, postgres, psql) or put its bin folder on PATH."
  say "PostgreSQL not found: installing Debian's 'postgresql' package with apt-get"
  local install=(timeout 900 apt-get install -y -qq --no-install-recommends postgresql)
  if ! DEBIAN_FRONTEND=noninteractive "${install[@]}" >&2; then
    timeout 300 apt-get update -qq >&2 || die "apt-get update failed (or timed out)"
    DEBIAN_FRONTEND=noninteractive "${install[@]}" >&2 ||
      die "apt-get install postgresql failed (or timed out)"
  fi
  find_binaries || die "the 'postgresql' package is installed but initdb, pg_ctl or psql are
still not found (looked on PATH and in /usr/lib/postgresql/*/bin)"
}

# A free TCP port on 127.0.0.1 (the kernel's choice; without python3, a random one nothing
# listens on).
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    timeout 10 python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()' && return 0
  fi
  local p i
  for i in $(seq 100); do
    p=$((20000 + RANDOM % 30000))
    if ! timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# The pid of the postmaster of cluster folder $1 when it runs (and is that cluster's).
running_pid() {
  local data=$1/data pid
  [[ -f $data/postmaster.pid ]] || return 1
  pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # A stale pid file whose number another process took since: not ours.
  if [[ -r /proc/$pid/cmdline ]] && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$data"; then
    return 1
  fi
  echo "$pid"
}

# Stops the cluster in folder $1 (immediate shutdown) and waits, bounded, until its postmaster
# is gone; signals it directly when pg_ctl cannot.
stop_cluster() {
  local dir=$1 pid owner i
  pid=$(running_pid "$dir") || return 0
  owner=$(stat -c %U "$dir/data")
  if find_binaries; then
    if is_root; then
      (cd / && timeout 60 runuser -u "$owner" -- "$PG_CTL" -D "$dir/data" -m immediate -w -t 30 \
        stop) >&2 || true
    else
      timeout 60 "$PG_CTL" -D "$dir/data" -m immediate -w -t 30 stop >&2 || true
    fi
  fi
  # SIGQUIT is the immediate shutdown; the postmaster ends its children before it exits.
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    if ((i == 1)); then
      kill -QUIT "$pid" 2>/dev/null || true
    elif ((i == 60)); then
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.1
  done
  die "the server of $dir (pid $pid) did not stop within 10 s"
}

# On a failed start: the end of the server log, the server stopped, the folder emptied (and
# removed when this script made it).
START_DIR=
START_MADE_DIR=
cleanup_failed_start() {
  local rc=$?
  [[ -n $START_DIR && $rc -ne 0 ]] || return 0
  if [[ -f $START_DIR/log ]]; then
    echo "--- end of the server log ($START_DIR/log):" >&2
    tail -n 20 "$START_DIR/log" >&2 || true
  fi
  stop_cluster "$START_DIR" || true
  if [[ -n $START_MADE_DIR ]]; then
    rm -rf -- "$START_DIR"
  else
    find "$START_DIR" -mindepth 1 -delete 2>/dev/null || true
  fi
  say "start failed; $START_DIR cleaned up"
}

# start [DIR]: sets URL.
start() {
  local dir=${1-}
  need_binaries
  if is_root && ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
    die "running as root, but there is no '$PG_OS_USER' user to run PostgreSQL as (initdb and
postgres refuse root): create one (useradd --system $PG_OS_USER) or run as another user"
  fi

  trap cleanup_failed_start EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  if [[ -z $dir ]]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/turnstile-postgres.XXXXXX")
    START_MADE_DIR=1
  elif [[ -e $dir ]]; then
    [[ -d $dir ]] || die "$dir exists and is not a folder"
    [[ -z $(ls -A "$dir") ]] || die "$dir is not empty (stop a cluster there with: $PROG stop $dir)"
  else
    mkdir -p -- "$dir"
    START_MADE_DIR=1
  fi
  dir=$(cd "$dir" && pwd -P)
  START_DIR=$dir
  case $dir in
  *[\"\'\$\`\\]* | *$'\n'*)
    die "the folder's path must not contain quotes, \$, \`, backslashes or line breaks: $dir"
    ;;
  esac
  : >"$dir/$MARKER"

  if is_root; then
    chown "$PG_OS_USER" "$dir"
    # The postgres user must be able to reach the folder: every parent searchable.
    if ! runuser -u "$PG_OS_USER" -- test -w "$dir" 2>/dev/null; then
      local path='' part parts
      IFS=/ read -ra parts <<<"${dir#/}"
      for part in "${parts[@]}"; do
        path=$path/$part
        [[ $path != "$dir" ]] || break
        if ! runuser -u "$PG_OS_USER" -- test -x "$path" 2>/dev/null; then
          say "chmod o+x $path (so that the $PG_OS_USER user can reach $dir)"
          chmod o+x "$path"
        fi
      done
      runuser -u "$PG_OS_USER" -- test -w "$dir" ||
        die "the $PG_OS_USER user cannot write to $dir"
    fi
  fi

  say "initdb in $dir/data ($INITDB)"
  # (In a subshell: a redirection of a function call in this shell would also catch the
  # messages of the clean-up when a signal arrives meanwhile.)
  (as_pg timeout 120 "$INITDB" -D "$dir/data" -A trust -U "$ROLE" -E UTF8 --locale=C) \
    >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    die "initdb failed (or timed out after 120 s)"
  }

  # The socket goes beside the data when its path fits (107 bytes at most), else only TCP.
  local sockets=$dir
  if (($(printf '%s/.s.PGSQL.65535' "$dir" | wc -c) > 107)); then
    sockets=
  fi
  cat >>"$dir/data/postgresql.conf" <<EOF

# scripts/postgres.sh: a throwaway cluster for turnstile's tests
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sockets'
max_connections = 200        # the tests open many connections
shared_buffers = 128MB
EOF

  # The port is free when chosen but may be taken before the server binds it: a few tries.
  local port started=
  for _ in 1 2 3 4 5; do
    port=$(free_port) || die "found no free port on 127.0.0.1"
    echo "port = $port" >>"$dir/data/postgresql.conf"
    say "starting the server on 127.0.0.1:$port"
    if as_pg timeout 90 "$PG_CTL" -D "$dir/data" -l "$dir/log" -w -t 60 start >&2; then
      started=1
      break
    fi
    stop_cluster "$dir"
    grep -q 'could not bind\|Address already in use' "$dir/log" 2>/dev/null ||
      die "the server did not start (or not within 60 s)"
    say "port $port was taken; trying another"
  done
  [[ -n $started ]] || die "the server did not start: no free port in 5 tries"

  timeout 30 "$PSQL" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$ROLE" -d postgres \
    -c "create database $DB" >&2 || die "could not create the database $DB"

  URL="postgres://$ROLE@127.0.0.1:$port/$DB"
  echo "$URL" >"$dir/url"
  echo "export TURNSTILE_TEST_POSTGRES=$URL" >"$dir/env"
  START_DIR=
  trap - EXIT INT TERM
  DIR=$dir
  say "running: $URL (folder $dir)"
}

stop() {
  local dir=$1
  if [[ ! -e $dir ]]; then
    say "$dir does not exist: nothing to stop"
    return 0
  fi
  [[ -d $dir ]] || die "$dir is not a folder"
  dir=$(cd "$dir" && pwd -P)
  if [[ ! -e $dir/$MARKER ]]; then
    # Never remove a folder this script did not make (an empty one is harmless).
    [[ -z $(ls -A "$dir") ]] || die "$dir was not made by $PROG (no $MARKER in it): not removing it"
    rmdir -- "$dir"
    return 0
  fi
  stop_cluster "$dir"
  rm -rf -- "$dir"
  say "stopped; $dir removed"
}

# restart DIR: an immediate stop (every connection cut, as in a crash), then a start on the
# same port with the same data.
restart() {
  local dir=$1
  [[ -d $dir && -e $dir/$MARKER ]] || die "$dir is not a cluster folder made by $PROG"
  dir=$(cd "$dir" && pwd -P)
  need_binaries
  stop_cluster "$dir"
  say "starting the server in $dir again"
  as_pg timeout 90 "$PG_CTL" -D "$dir/data" -l "$dir/log" -w -t 60 start >&2 ||
    die "the server did not start again (or not within 60 s); see $dir/log"
  say "running again: $(cat "$dir/url")"
}

main() {
  (($#)) || usage_error "a command is required"
  local cmd=$1
  shift
  case $cmd in
  -h | --help | help)
    usage
    return 0
    ;;
  start | env | stop | restart) ;;
  -*) usage_error "unexpected argument '$cmd' found" ;;
  *) usage_error "unrecognized command '$cmd'" ;;
  esac
  local arg
  for arg in "$@"; do
    case $arg in
    -h | --help)
      usage
      return 0
      ;;
    -*) usage_error "unexpected argument '$arg' found" ;;
    esac
  done
  (($# <= 1)) || usage_error "unexpected argument '$2' found ('$cmd' takes at most one DIR)"
  case $cmd in
  start)
    start "${1-}"
    echo "$URL"
    say "to stop it: $PROG stop $DIR"
    ;;
  env)
    start "${1-}"
    echo "export TURNSTILE_TEST_POSTGRES=$URL"
    say "to stop it: $PROG stop $DIR"
    ;;
  stop)
    (($# == 1)) || usage_error "'stop' needs the cluster's DIR"
    [[ -n $1 ]] || usage_error "'stop' needs the cluster's DIR (it was empty)"
    stop "$1"
    ;;
  restart)
    (($# == 1)) || usage_error "'restart' needs the cluster's DIR"
    [[ -n $1 ]] || usage_error "'restart' needs the cluster's DIR (it was empty)"
    restart "$1"
    ;;
  esac
}

main "$@"
