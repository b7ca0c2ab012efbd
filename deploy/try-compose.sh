#!/usr/bin/env bash
# Tries the 3-node cluster compose file as a new user would, with podman and podman-compose (Debian packages) and no
# image registry: builds the base images (deploy/build-base-image.sh) and the agentmesh image, brings
# deploy/compose.cluster.yml up, runs a task through it from the host, scales the workers to 3, checks all three
# serve, and takes everything down again (KEEP=1 leaves it running).
#
#   apt-get install -y podman runc podman-compose && deploy/try-compose.sh
#
# Prints "try-compose: ok" at the end; any failing step stops the script with a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/deploy/podman/containers.conf}"
export NODE_IMAGE="${NODE_IMAGE:-localhost/agentmesh-node:local}"
export NATS_IMAGE="${NATS_IMAGE:-localhost/agentmesh-nats:local}"
export AGENTMESH_IMAGE="${AGENTMESH_IMAGE:-localhost/agentmesh:local}"
COMPOSE=(podman-compose -p agentmesh-try -f deploy/compose.cluster.yml)
NATS_SERVERS="nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224"
# the host CLI as NATS user `client` (submits runs) and `ops` (agentmesh status)
as_client() { NATS_USER=client NATS_PASSWORD="${NATS_CLIENT_PASSWORD:-dev-client-CHANGE-ME}" node packages/cli/bin/agentmesh.js "$@" --nats "$NATS_SERVERS"; }
as_ops() { NATS_USER=ops NATS_PASSWORD="${NATS_OPS_PASSWORD:-dev-ops-CHANGE-ME}" node packages/cli/bin/agentmesh.js "$@" --nats "$NATS_SERVERS"; }
step() { printf '\n== %s\n' "$*"; }

if ! podman image exists "$NODE_IMAGE" || ! podman image exists "$NATS_IMAGE"; then
  step "base images ($NODE_IMAGE, $NATS_IMAGE)"
  NODE_TAG="$NODE_IMAGE" NATS_TAG="$NATS_IMAGE" ENGINE=podman deploy/build-base-image.sh
fi
if [ "${REBUILD:-0}" = 1 ] || ! podman image exists "$AGENTMESH_IMAGE"; then
  step "image $AGENTMESH_IMAGE"
  podman build --build-arg NODE_IMAGE="$NODE_IMAGE" -f deploy/Dockerfile -t "$AGENTMESH_IMAGE" .
fi
[ -f packages/cli/dist/main.js ] || npm run build

cleanup() { [ "${KEEP:-0}" = 1 ] || WORKER_REPLICAS=3 "${COMPOSE[@]}" down -v >/dev/null 2>&1 || true; }
trap cleanup EXIT
step "compose up (3 NATS nodes, catalog, planner, worker)"
"${COMPOSE[@]}" up -d --no-build

step "a task through the fleet"
# fleet_ready [N]: `agentmesh status --json` shows a catalog, a planner, N tool workers (default 1) and the
# catalog's tools (deploy/fleet-ready.mjs says what is missing; test/fleet-ready.test.ts runs it on a real fleet)
fleet_ready() { as_ops status --json 2>/dev/null | node deploy/fleet-ready.mjs --workers "${1:-1}"; }
wait_fleet() {
  local verdict=""
  for _ in $(seq 1 60); do
    if verdict="$(fleet_ready "$@")"; then echo "$verdict"; return 0; fi
    sleep 2
  done
  echo "$verdict"
  return 1
}
wait_fleet 1 || { "${COMPOSE[@]}" logs --tail 40 || true; echo "try-compose: the fleet did not come up"; exit 1; }
as_client run --script examples/add.json "add 2 and 3"

step "scale workers to 3"
# podman-compose 1.0 parses --scale but ignores it: the compose file reads WORKER_REPLICAS for it
WORKER_REPLICAS=3 "${COMPOSE[@]}" up -d --no-build --scale worker=3
wait_fleet 3 || { echo "try-compose: scaling to 3 workers did not show 3 workers"; exit 1; }
for i in 1 2 3 4 5 6; do as_client run --script examples/add.json "add 2 and 3 ($i)" >/dev/null; done
echo "try-compose: ok"
