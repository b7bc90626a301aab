#!/usr/bin/env bash
# A real S3-compatible object store on loopback, for tests: OpenStack Swift (Debian 12's 2.30) with its s3api
# middleware and tempauth, one device, one replica, everything (configs, rings, data, logs, pid files) under DIR.
#
#   scripts/s3-server.sh install          apt-get install -y (no recommends) the Debian packages it needs (as root)
#   scripts/s3-server.sh start DIR [PORT] start it; returns once the proxy answers a signed S3 request, then
#                                         prints: endpoint=http://127.0.0.1:PORT access_key=test:tester
#                                                 secret_key=testing region=us-east-1
#   scripts/s3-server.sh stop DIR         stop every process that start left in DIR, and wait for them to end
#
# Ports: the proxy (S3 endpoint) on PORT (default 8480); the object, container and account servers on PORT+1,
# PORT+2, PORT+3 and memcached on PORT+4, all bound to 127.0.0.1. Data in DIR survives stop/start.
# Nothing outside DIR is read or written besides the installed packages: the servers are started through a small
# launcher (DIR/etc/run-server.py) that points Swift at DIR/etc/swift.conf instead of /etc/swift/swift.conf, which
# the stock swift-*-server scripts always read for the hash path prefix and the storage policies.
# Environment: S3_SERVER_START_TIMEOUT (seconds, default 90) bounds how long start waits; S3_SERVER_OWNER=PID (a test
# runner's) makes start leave a watcher that stops the store once that process has ended, however it ended (a runner
# killed by a signal or a time limit runs no clean-up of its own), and ends itself when the store is stopped.
set -euo pipefail

PY=/usr/bin/python3 # Debian's python, where the swift package lives (not a venv's or pyenv's python3)
PACKAGES=(swift-proxy swift-account swift-container swift-object memcached)
SERVERS=(memcached account container object proxy) # start order; stop goes the other way
ACCESS_KEY=test:tester
SECRET_KEY=testing
REGION=us-east-1

say() { echo "s3-server: $*" >&2; }
die() {
  say "$*"
  exit 1
}
usage() {
  sed -n '5,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Whether process PID still runs. A zombie counts as ended: once the script has exited, the servers are children of
# init, which may take seconds to reap them (pid 1 here does), and kill -0 succeeds on a zombie.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# The pid in DIR/run/NAME.pid, if that process is still alive and is the one we started.
live_pid() {
  local name=$1 pidfile="$DIR/run/$1.pid" pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  running "$pid" || return 1
  if [ "$name" = memcached ]; then
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = memcached ] || return 1
  else
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$DIR/etc/$name-server.conf" || return 1
  fi
  echo "$pid"
}

stop_all() {
  local name pid pids=() deadline
  for ((i = ${#SERVERS[@]} - 1; i >= 0; i--)); do
    name=${SERVERS[i]}
    if pid=$(live_pid "$name"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  deadline=$((SECONDS + 20))
  for pid in "${pids[@]}"; do
    while running "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
    if running "$pid"; then
      say "pid $pid did not end on SIGTERM within 20 s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      while running "$pid"; do sleep 0.05; done
    fi
  done
  rm -f "$DIR"/run/*.pid "$DIR/run/watch.token"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

write_configs() {
  local etc=$DIR/etc user
  user=$(id -un)
  mkdir -p "$etc" "$DIR/srv/d1" "$DIR/log" "$DIR/run"
  # Constant, so that data written by an earlier start in the same DIR is found again.
  cat >"$etc/swift.conf" <<EOF
[swift-hash]
swift_hash_path_suffix = tiledimagekit-s3-test-suffix
swift_hash_path_prefix = tiledimagekit-s3-test-prefix

[storage-policy:0]
name = Policy-0
default = yes
EOF
  local name port
  for name in account container object proxy; do
    case $name in
      proxy) port=$PORT ;; object) port=$((PORT + 1)) ;; container) port=$((PORT + 2)) ;; account) port=$((PORT + 3)) ;;
    esac
    # workers = 0: one process, no fork, so the pid file names the whole server. log_address names a path that
    # does not exist so that Swift does not log into the host's syslog; -v sends the log to stderr (our log file).
    cat >"$etc/$name-server.conf" <<EOF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $port
workers = 0
user = $user
swift_dir = $etc
devices = $DIR/srv
mount_check = false
log_address = $DIR/log/no-syslog
log_level = INFO
EOF
  done
  for name in account container object; do
    cat >>"$etc/$name-server.conf" <<EOF

[pipeline:main]
pipeline = $name-server

[app:$name-server]
use = egg:swift#$name
EOF
  done
  cat >>"$etc/proxy-server.conf" <<EOF

[pipeline:main]
pipeline = catch_errors gatekeeper proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$((PORT + 4))

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:s3api]
use = egg:swift#s3api
location = $REGION

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = $SECRET_KEY .admin

[filter:copy]
use = egg:swift#copy

[filter:slo]
use = egg:swift#slo

[filter:dlo]
use = egg:swift#dlo
EOF

  cat >"$etc/run-server.py" <<'EOF'
# Runs one Swift server (account, container, object or proxy) like /usr/bin/swift-NAME-server does, but with
# swift.conf read from the conf file's directory instead of /etc/swift. Usage: run-server.py NAME CONF -v
import os
import sys

# Descriptors past stderr that the starter had (a test runner's, which waits until they are closed) are not ours.
os.closerange(3, 1 << 16)
name = sys.argv.pop(1)
from swift.common import utils  # noqa: E402

utils.set_swift_dir(os.path.dirname(os.path.abspath(sys.argv[1])))
from swift.common import storage_policy  # noqa: E402

storage_policy.reload_storage_policies()
from swift.common.wsgi import run_wsgi  # noqa: E402

conf_file, options = utils.parse_options()
if name == 'object':
    from swift.obj import server
    options['global_conf_callback'] = server.global_conf_callback
sys.exit(run_wsgi(conf_file, name + '-server', **options))
EOF

  # The readiness probe: a SigV4-signed ListBuckets, with the standard library only.
  cat >"$etc/probe.py" <<'EOF'
# probe.py TIMEOUT PROXY_PORT ACCESS SECRET REGION NAME:PID:PORT... : waits until every server listens and the
# proxy answers a signed S3 ListBuckets with 200. On failure prints `failed NAME: reason` and exits 1.
import datetime
import hashlib
import hmac
import http.client
import os
import socket
import sys
import time

timeout, proxy_port, access, secret, region = sys.argv[1:6]
servers = [s.split(':') for s in sys.argv[6:]]
deadline = time.monotonic() + float(timeout)


def alive(pid):  # a zombie has ended
    try:
        with open('/proc/%s/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def listening(port):
    try:
        socket.create_connection(('127.0.0.1', int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def list_buckets():
    host = '127.0.0.1:%s' % proxy_port
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime('%Y%m%dT%H%M%SZ'), now.strftime('%Y%m%d')
    payload = hashlib.sha256(b'').hexdigest()
    signed = 'host;x-amz-content-sha256;x-amz-date'
    canonical = '\n'.join(['GET', '/', '', 'host:%s' % host, 'x-amz-content-sha256:%s' % payload,
                           'x-amz-date:%s' % amz_date, '', signed, payload])
    scope = '%s/%s/s3/aws4_request' % (day, region)
    to_sign = '\n'.join(['AWS4-HMAC-SHA256', amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ('AWS4' + secret).encode()
    for part in (day, region, 's3', 'aws4_request'):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    conn = http.client.HTTPConnection('127.0.0.1', int(proxy_port), timeout=10)
    try:
        conn.request('GET', '/', headers={
            'Host': host, 'x-amz-date': amz_date, 'x-amz-content-sha256': payload,
            'Authorization': 'AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s'
                             % (access, scope, signed, signature)})
        resp = conn.getresponse()
        return resp.status, resp.read(300).decode('utf-8', 'replace')
    finally:
        conn.close()


last = 'no answer yet'
while True:
    for name, pid, port in servers:
        if not alive(pid):
            print('failed %s: the process (pid %s) exited' % (name, pid))
            sys.exit(1)
    waiting = [name for name, pid, port in servers if not listening(port)]
    if not waiting:
        try:
            status, body = list_buckets()
            if status == 200:
                sys.exit(0)
            last = 'ListBuckets answered HTTP %d: %s' % (status, ' '.join(body.split()))
        except (OSError, http.client.HTTPException) as e:
            last = 'ListBuckets failed: %s' % e
    else:
        last = 'not listening yet: %s' % ', '.join(waiting)
    if time.monotonic() > deadline:
        name = waiting[0] if waiting else 'proxy'
        print('failed %s: no ready S3 endpoint after %s s (%s)' % (name, timeout, last))
        sys.exit(1)
    time.sleep(0.2)
EOF
}

# The rings: one device d1 in DIR/srv, one replica, 2^10 partitions (what swift-ring-builder's `create 10 1 1`,
# `add r1z1-127.0.0.1:PORT/d1 1`, `rebalance` make), all three in one python start (about 1 s; the CLI takes 3 s
# each). Only the proxy reads them, so they are built while the other servers start.
build_rings() {
  # (The redirection is on the command, not on the function call: a trap that runs while a function's output is
  # redirected would print into that file.)
  "$PY" - "$DIR/etc" "$((PORT + 3))" "$((PORT + 2))" "$((PORT + 1))" >"$DIR/log/rings.log" 2>&1 <<'EOF'
import os
import sys
from swift.common.ring import RingBuilder

etc = sys.argv[1]
for kind, port in zip(('account', 'container', 'object'), sys.argv[2:]):
    builder = RingBuilder(10, 1, 1)
    builder.add_dev({'id': 0, 'region': 1, 'zone': 1, 'ip': '127.0.0.1', 'port': int(port),
                     'device': 'd1', 'weight': 1})
    builder.rebalance()
    builder.save(os.path.join(etc, kind + '.builder'))
    builder.get_ring().save(os.path.join(etc, kind + '.ring.gz'))
EOF
}

start_one() {
  local name=$1 log=$DIR/log/$1.log
  echo "=== start $(date -u +%FT%TZ)" >>"$log"
  if [ "$name" = memcached ]; then
    local as_user=()
    # memcached refuses to run as root without -u.
    if [ "$(id -u)" = 0 ]; then
      if id memcache >/dev/null 2>&1; then as_user=(-u memcache); else as_user=(-u nobody); fi
    fi
    # Through a launcher that closes every descriptor past stderr first: a daemon must not keep open what its
    # starter inherited (a test runner's Process waits until its child's descriptors are closed).
    setsid "$PY" -c 'import os, sys; os.closerange(3, 1 << 16); os.execvp(sys.argv[1], sys.argv[1:])' \
      memcached "${as_user[@]}" -l 127.0.0.1 -p $((PORT + 4)) -U 0 -m 64 -c 1024 </dev/null >>"$log" 2>&1 &
  else
    setsid "$PY" "$DIR/etc/run-server.py" "$name" "$DIR/etc/$name-server.conf" -v </dev/null >>"$log" 2>&1 &
  fi
  echo $! >"$DIR/run/$name.pid"
}

cmd_start() {
  local timeout=${S3_SERVER_START_TIMEOUT:-90} name pid port p
  [[ $DIR != *[[:space:]]* ]] || die "DIR must not contain white space (Swift's config files): '$DIR'"
  [[ $timeout =~ ^[0-9]+$ ]] || die "S3_SERVER_START_TIMEOUT must be a whole number of seconds, not '$timeout'"
  [[ $PORT =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65531 ] ||
    die "PORT must be a number from 1024 to 65531 (PORT..PORT+4 are used), not '$PORT'"
  [ -x "$PY" ] && "$PY" -c 'import swift' 2>/dev/null ||
    die "Swift is not installed (no python3-swift for $PY): run 'scripts/s3-server.sh install' as root"
  command -v memcached >/dev/null || die "memcached is not installed: run 'scripts/s3-server.sh install' as root"
  for name in "${SERVERS[@]}"; do
    if pid=$(live_pid "$name"); then
      die "already running in $DIR ($name has pid $pid): run 'scripts/s3-server.sh stop $DIR' first"
    fi
  done
  rm -f "$DIR"/run/*.pid
  for p in $PORT $((PORT + 1)) $((PORT + 2)) $((PORT + 3)) $((PORT + 4)); do
    if port_in_use "$p"; then
      die "port $p on 127.0.0.1 is already in use (this store uses $PORT..$((PORT + 4))): choose another PORT"
    fi
  done
  write_configs

  # From here on, a failure (or an interruption) stops whatever was started.
  trap 'say "interrupted; stopping what was started"; stop_all; exit 1' INT TERM HUP
  local started=$SECONDS args=()
  for name in "${SERVERS[@]}"; do
    if [ "$name" = proxy ] && ! build_rings; then
      say "start failed: could not build the rings in $DIR/etc; last lines of $DIR/log/rings.log:"
      tail -n 25 "$DIR/log/rings.log" >&2
      stop_all
      exit 1
    fi
    start_one "$name"
  done
  for name in "${SERVERS[@]}"; do
    case $name in
      proxy) port=$PORT ;; object) port=$((PORT + 1)) ;; container) port=$((PORT + 2)) ;;
      account) port=$((PORT + 3)) ;; memcached) port=$((PORT + 4)) ;;
    esac
    args+=("$name:$(cat "$DIR/run/$name.pid"):$port")
  done
  local result
  if ! result=$("$PY" "$DIR/etc/probe.py" "$timeout" "$PORT" "$ACCESS_KEY" "$SECRET_KEY" "$REGION" "${args[@]}"); then
    name=$(sed -n 's/^failed \([a-z]*\):.*/\1/p' <<<"$result" | tail -n 1)
    say "start failed: ${result:-the readiness probe failed}"
    if [ -n "$name" ] && [ -f "$DIR/log/$name.log" ]; then
      say "last lines of $DIR/log/$name.log:"
      tail -n 25 "$DIR/log/$name.log" >&2
    fi
    stop_all
    exit 1
  fi
  trap - INT TERM HUP
  if [ -n "${S3_SERVER_OWNER:-}" ] && ! { [[ $S3_SERVER_OWNER =~ ^[0-9]+$ ]] && running "$S3_SERVER_OWNER"; }; then
    say "S3_SERVER_OWNER=$S3_SERVER_OWNER is no running process: no watcher"
  elif [ -n "${S3_SERVER_OWNER:-}" ]; then
    # This start's token: a watcher of an earlier start (stopped, then started again) sees another and ends.
    local token
    token=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
    echo "$token" >"$DIR/run/watch.token"
    # Detached (a session of its own, no descriptor of the caller's), so that it outlives this script and its caller.
    setsid bash "$0" watch "$DIR" "$S3_SERVER_OWNER" "$token" </dev/null >>"$DIR/log/watch.log" 2>&1 &
  fi
  say "ready in $((SECONDS - started)) s (logs in $DIR/log)"
  echo "endpoint=http://127.0.0.1:$PORT access_key=$ACCESS_KEY secret_key=$SECRET_KEY region=$REGION"
}

[ $# -ge 1 ] || usage
case $1 in
  install)
    [ $# -eq 1 ] || usage
    apt-get install -y --no-install-recommends "${PACKAGES[@]}"
    ;;
  start)
    [ $# -eq 2 ] || [ $# -eq 3 ] || usage
    mkdir -p "$2"
    DIR=$(cd "$2" && pwd -P)
    PORT=${3:-8480}
    cmd_start
    ;;
  stop)
    [ $# -eq 2 ] || usage
    [ -d "$2" ] || die "no such directory: $2"
    DIR=$(cd "$2" && pwd -P)
    stop_all
    ;;
  watch)
    # (Internal: left by start when S3_SERVER_OWNER is set.) Waits while the owner runs (the same process: its start
    # time, not only its pid) and the store is the one its start made (its token; stop removes it, a later start
    # writes another, a removed DIR ends it too), then stops what is left.
    [ $# -eq 4 ] && [[ $3 =~ ^[0-9]+$ ]] || usage
    for fd in /proc/$$/fd/*; do
      fd=${fd##*/}
      [ "$fd" -le 2 ] || eval "exec $fd>&-" 2>/dev/null || true
    done
    DIR=$2
    OWNER=$3 TOKEN=$4
    # The owner's start time (field 22 of /proc/PID/stat; the 20th after "pid (comm) "): a pid used again is another.
    started_at() {
      local stat
      stat=$(cat "/proc/$OWNER/stat" 2>/dev/null) || return 1
      stat=${stat##*) }
      cut -d' ' -f20 <<<"$stat"
    }
    ours() { [ "$(cat "$DIR/run/watch.token" 2>/dev/null)" = "$TOKEN" ]; }
    owner_start=$(started_at) || owner_start=gone
    while ours && running "$OWNER" && [ "$(started_at)" = "$owner_start" ]; do sleep 1; done
    if ours; then
      say "owner $OWNER has ended: stopping the store in $DIR"
      stop_all
    fi
    ;;
  *) usage ;;
esac
