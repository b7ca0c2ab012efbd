#!/usr/bin/env bash
# A one-machine agentmesh cluster for development: nats-server with JetStream on a temporary store, a catalog,
# planners and N tool workers, each a separate process logging to its own file. Ctrl-C stops them all
# (actors first, with SIGTERM so they drain, then nats-server) and removes the store.
#
#   npm run build && scripts/dev-cluster.sh --workers 3
#   NATS_URL=nats://127.0.0.1:4222 npx agentmesh run --provider scripted --script examples/... "add 2 and 3"
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/dev-cluster.sh [options]
  --workers N        tool workers to start (default 2)
  --planners N       planners to start (default 1)
  --port P           NATS client port (default 4222)
  --health-base P    first health port; actors get P, P+1, ... (default 9400)
  --logs DIR         where the logs go (default: a new temporary folder)
  --secure           run nats-server with deploy/nats/nats.conf (per-role users, generated passwords)
  --worker-args ARGS extra arguments for every worker, e.g. "--threads 2 --concurrency 16"
  -h, --help         this help
Environment: AGENTMESH_CLI (command that runs the CLI; default: node packages/cli/bin/agentmesh.js),
NATS_SERVER_BIN (nats-server binary), LOG_LEVEL (default info), provider keys for the planner.
USAGE
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORKERS=2
PLANNERS=1
PORT=4222
HEALTH_BASE=9400
LOG_DIR=""
SECURE=0
WORKER_ARGS=""

while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS="$2"; shift 2 ;;
    --planners) PLANNERS="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --health-base) HEALTH_BASE="$2"; shift 2 ;;
    --logs) LOG_DIR="$2"; shift 2 ;;
    --secure) SECURE=1; shift ;;
    --worker-args) WORKER_ARGS="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "dev-cluster: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
for n in "$WORKERS" "$PLANNERS" "$PORT" "$HEALTH_BASE"; do
  case "$n" in ''|*[!0-9]*) echo "dev-cluster: not a number: $n" >&2; exit 2 ;; esac
done

NATS_BIN="${NATS_SERVER_BIN:-}"
if [ -z "$NATS_BIN" ]; then
  for c in nats-server /usr/sbin/nats-server /usr/local/bin/nats-server; do
    if command -v "$c" >/dev/null 2>&1; then NATS_BIN="$(command -v "$c")"; break; fi
  done
fi
if [ -z "$NATS_BIN" ]; then
  echo 'dev-cluster: nats-server not found: install it ("apt-get install -y nats-server") or set NATS_SERVER_BIN' >&2
  exit 2
fi

if [ -n "${AGENTMESH_CLI:-}" ]; then
  read -r -a CLI <<<"$AGENTMESH_CLI"
else
  if [ ! -f "$ROOT/packages/cli/dist/main.js" ]; then
    echo 'dev-cluster: packages/cli/dist/main.js is missing: run "npm run build" first' >&2
    exit 2
  fi
  CLI=(node "$ROOT/packages/cli/bin/agentmesh.js")
fi

STORE="$(mktemp -d "${TMPDIR:-/tmp}/agentmesh-dev-nats.XXXXXX")"
if [ -z "$LOG_DIR" ]; then LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/agentmesh-dev-logs.XXXXXX")"; fi
mkdir -p "$LOG_DIR"
export LOG_LEVEL="${LOG_LEVEL:-info}"
export NATS_URL="nats://127.0.0.1:$PORT"

NATS_PID=""
ACTOR_PIDS=()
ACTOR_NAMES=()
STOPPING=0

stop_all() {
  [ "$STOPPING" = 1 ] && return
  STOPPING=1
  trap - INT TERM
  echo "dev-cluster: stopping ${#ACTOR_PIDS[@]} actors (SIGTERM, they drain) ..."
  for pid in "${ACTOR_PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true; done
  local deadline=$((SECONDS + 20))
  for pid in "${ACTOR_PIDS[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$SECONDS" -ge "$deadline" ]; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; break; fi
      sleep 0.1
    done
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$NATS_PID" ]; then
    kill -TERM "$NATS_PID" 2>/dev/null || true
    wait "$NATS_PID" 2>/dev/null || true
  fi
  rm -rf "$STORE"
  echo "dev-cluster: stopped; logs kept in $LOG_DIR"
}
trap 'stop_all; exit 0' INT TERM
trap 'stop_all' EXIT

# Job control: every child gets its own process group, so a Ctrl-C in the terminal reaches this script only and
# the actors are stopped in order (SIGTERM to drain) rather than all at once.
set -m

NATS_ARGS=(-js -a 127.0.0.1 -p "$PORT" -sd "$STORE")
if [ "$SECURE" = 1 ]; then
  # nats.conf reads each password as a config value: it must start with a letter.
  gen() { printf 'p%s' "$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"; }
  for role in CATALOG PLANNER WORKER WORKER_MATH CLIENT OPS TENANT_ACME TENANT_GLOBEX; do export "NATS_${role}_PASSWORD=$(gen)"; done
  # The monitoring port of the conf (8222) is moved next to the client port so two clusters can run side by side.
  NATS_ARGS=(-c "$ROOT/deploy/nats/nats.conf" -m "$((PORT + 1))" "${NATS_ARGS[@]}")
fi
"$NATS_BIN" "${NATS_ARGS[@]}" >"$LOG_DIR/nats-server.log" 2>&1 &
NATS_PID=$!

NATS_DEADLINE=$((SECONDS + 30))
until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
  if ! kill -0 "$NATS_PID" 2>/dev/null || [ "$SECONDS" -ge "$NATS_DEADLINE" ]; then
    echo "dev-cluster: nats-server is not listening on port $PORT; see $LOG_DIR/nats-server.log" >&2
    tail -n 20 "$LOG_DIR/nats-server.log" >&2 || true
    exit 1
  fi
  sleep 0.1
done
echo "dev-cluster: nats-server pid $NATS_PID on $NATS_URL (store $STORE)"

NEXT_HEALTH=$HEALTH_BASE
start_actor() { # name user command [args...]
  local name="$1" user="$2"
  shift 2
  local port=$NEXT_HEALTH
  NEXT_HEALTH=$((NEXT_HEALTH + 1))
  (
    if [ "$SECURE" = 1 ]; then
      upper="$(echo "$user" | tr '[:lower:]' '[:upper:]')"
      pw_var="NATS_${upper}_PASSWORD"
      export NATS_USER="$user" NATS_PASSWORD="${!pw_var}"
      # a worker registers as its role (its user); the catalog holds each role to its tool namespaces
      export AGENTMESH_WORKER_ROLE="$user" AGENTMESH_CATALOG_ROLES='worker=*;worker_math=math'
    fi
    exec "${CLI[@]}" "$@" --nats "$NATS_URL" --health-port "$port"
  ) >"$LOG_DIR/$name.log" 2>&1 &
  ACTOR_PIDS+=("$!")
  ACTOR_NAMES+=("$name")
  printf 'dev-cluster: %-10s pid %-7s health http://127.0.0.1:%s/readyz  log %s\n' "$name" "$!" "$port" "$LOG_DIR/$name.log"
}

start_actor catalog catalog catalog
for i in $(seq 1 "$PLANNERS"); do start_actor "planner-$i" planner planner; done
read -r -a EXTRA <<<"$WORKER_ARGS"
for i in $(seq 1 "$WORKERS"); do start_actor "worker-$i" worker worker ${EXTRA[@]+"${EXTRA[@]}"}; done

# Wait until every actor answers /readyz; stop waiting as soon as one of them exits, and name it.
node - "$HEALTH_BASE" "$LOG_DIR" "${ACTOR_NAMES[@]}" -- "${ACTOR_PIDS[@]}" <<'NODE' || { echo "dev-cluster: not every actor became ready; see $LOG_DIR" >&2; exit 1; }
const { readFileSync } = await import('node:fs');
const [baseArg, logDir, ...rest] = process.argv.slice(2);
const names = rest.slice(0, rest.indexOf('--'));
const pids = rest.slice(rest.indexOf('--') + 1).map(Number);
const base = Number(baseArg);
const deadline = Date.now() + 60_000;
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
const ready = async (port) => fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2000) }).then((r) => r.ok, () => false);
const tail = (name) => { try { return readFileSync(`${logDir}/${name}.log`, 'utf8').split('\n').slice(-20).join('\n'); } catch { return ''; } };
const report = (name, why) => console.error(`dev-cluster: ${name} ${why} (health port ${base + names.indexOf(name)}); last lines of its log:\n${tail(name)}`);
for (;;) {
  const states = await Promise.all(names.map((_, i) => ready(base + i)));
  if (states.every(Boolean)) process.exit(0);
  const dead = names.filter((_, i) => !states[i] && !alive(pids[i]));
  if (dead.length > 0) { for (const name of dead) report(name, 'exited before it was ready'); process.exit(1); }
  if (Date.now() > deadline) { for (const name of names.filter((_, i) => !states[i])) report(name, 'is not ready after 60 s'); process.exit(1); }
  await new Promise((r) => setTimeout(r, 200));
}
NODE
if [ "$SECURE" = 1 ]; then
  echo "dev-cluster: clients connect as NATS_USER=client NATS_PASSWORD=$NATS_CLIENT_PASSWORD"
fi
echo "dev-cluster: ready: 1 catalog, $PLANNERS planner(s), $WORKERS worker(s); Ctrl-C stops everything"

# Stay in the foreground until Ctrl-C, or until an actor dies.
while :; do
  for idx in "${!ACTOR_PIDS[@]}"; do
    if ! kill -0 "${ACTOR_PIDS[$idx]}" 2>/dev/null; then
      echo "dev-cluster: ${ACTOR_NAMES[$idx]} exited; see $LOG_DIR/${ACTOR_NAMES[$idx]}.log" >&2
      exit 1
    fi
  done
  sleep 1 &
  wait $! || true
done
