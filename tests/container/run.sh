#!/usr/bin/env bash
# make container-test: the Dockerfile built with podman on a base made from Debian's packages, the
# compose file started with podman-compose (over compose.test.yaml: the host's network, local
# images), one tool call through a paused round and one staff approval driven against it
# (tests/container/drive.py), every line its processes printed checked as JSON, then all of it
# removed. The Kubernetes manifests are validated against Kubernetes' schemas first.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.venv/bin}
export CONTAINERS_CONF=$PWD/tests/container/containers.conf
export HITL_IMAGE=localhost/hitl-mcp:test
export HITL_TEST_PG_PORT=${HITL_TEST_PG_PORT:-55432} HITL_TEST_REDIS_PORT=${HITL_TEST_REDIS_PORT:-56379}
export HITL_TEST_WEB_PORT=${HITL_TEST_WEB_PORT:-58080}
export SECRET_KEY=container-test-secret-key-$RANDOM$RANDOM ADMIN_TOKEN=container-test-admin-token LOG_FORMAT=json
PROJECT=hitl-container-test
COMPOSE=("$BIN/podman-compose" -p "$PROJECT" -f deploy/compose.yaml -f deploy/compose.test.yaml)
WORK=$(mktemp -d)
started=$(date +%s)
say() { echo "container-test [$(( $(date +%s) - started ))s] $*"; }
down() {
  local status=$?
  if [ "$status" -ne 0 ]; then  # what each container said, for the failure
    for container in $(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}'); do
      echo "--- $container"; podman logs --tail 60 "$container" 2>&1
    done
  fi
  "${COMPOSE[@]}" down -v -t 5 >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap down EXIT

"$BIN/kubernetes-validate" --strict --quiet deploy/kubernetes/*.yaml
say "Kubernetes manifests valid"

# Bases made from Debian's own packages, once per machine: Python for the app, and PostgreSQL with
# Redis for the compose file's services (no registry to pull the usual images from).
build_base() {  # image, packages
  podman image exists "$1" && return
  mmdebstrap --quiet --variant=minbase --include="$2" bookworm "$WORK/${1//[:\/]/_}.tar"
  podman import --quiet "$WORK/${1//[:\/]/_}.tar" "$1" >/dev/null
}
build_base localhost/hitl-base-python:bookworm python3,python3-venv,ca-certificates &
build_base localhost/hitl-test-services:bookworm postgresql-15,redis-server &
wait %1 && wait %2
say "base images ready"

# pip in the build reaches the registry through the host's proxy, whose CA is the host's.
build_started=$(date +%s)
podman build --quiet --network=host --format docker \
  -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
  --build-arg PYTHON_IMAGE=localhost/hitl-base-python:bookworm \
  --build-arg PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
  -t "$HITL_IMAGE" . >/dev/null
say "image built in $(( $(date +%s) - build_started ))s: $(podman image inspect "$HITL_IMAGE" --format '{{.Size}}') bytes"

"${COMPOSE[@]}" down -v -t 1 >/dev/null 2>&1 || true  # what a run cut short left
up_started=$(date +%s)
# In the compose file's order, one stage at a time: Debian's podman (4.3) cannot start a container
# whose dependency has dependencies of its own ("not found in input list"), and ignores
# service_healthy. Docker Compose and newer podman start it all with one `up -d`.
up() { "${COMPOSE[@]}" up -d --no-build --no-deps "$@" >>"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; exit 1; }; }
up postgres redis
up release
[ "$(podman wait "${PROJECT}_release_1")" = 0 ] || { podman logs "${PROJECT}_release_1"; exit 1; }
up web worker beat
"$BIN/python" tests/container/drive.py --wait "http://127.0.0.1:$HITL_TEST_WEB_PORT"
say "stack up and serving in $(( $(date +%s) - up_started ))s"
"$BIN/python" tests/container/drive.py "http://127.0.0.1:$HITL_TEST_WEB_PORT"
say "a paused round answered and a staff approval decided through the stack"

# Every line every process printed under LOG_FORMAT=json is one JSON object.
for service in release web worker beat; do
  podman logs "${PROJECT}_${service}_1" >"$WORK/$service.log" 2>&1
done
"$BIN/python" tests/container/drive.py --json-lines "$WORK"/{release,web,worker,beat}.log
say "every line of release, web, worker and beat is JSON; done in $(( $(date +%s) - started ))s"
