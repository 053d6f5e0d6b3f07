#!/usr/bin/env bash
# The container image (SC-OPS-04), built with Debian's podman and run: container/Containerfile is
# `FROM scratch` (no base image is pulled), so this script lays out its context — the
# countersign-server binary and every shared library it loads (ldd), at the paths the loader
# looks for them, and config/local.toml as the sample configuration. Then it runs the image with
# a volume for /data: the API answers, a call runs, `podman stop` (SIGTERM) exits 0, and after a
# restart the action is still there.
#   bash scripts/container.sh [--profile server|dev] [--keep]
# The default builds the optimized `server` profile; CI passes `dev` (the build the tests made).
# --keep leaves the image as localhost/countersign-server:latest (else it is removed).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=server keep=
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--profile server|dev] [--keep]" >&2; exit 2 ;;
  esac
done
command -v podman >/dev/null && command -v runc >/dev/null ||
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null; }
cargo build -q --profile "$profile" -p countersign-server --bin countersign-server
out=$profile; [ "$profile" = dev ] && out=debug
bin=${CARGO_TARGET_DIR:-target}/$out/countersign-server

work=$(mktemp -d)
tag=localhost/countersign-server:test-$$
name=countersign-test-$$
trap 'podman rm -f "$name" >/dev/null 2>&1; [ -n "$keep" ] || podman rmi -f "$tag" >/dev/null 2>&1; rm -rf "$work"' EXIT
install -D -m 0755 "$bin" "$work/rootfs/usr/local/bin/countersign-server"
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do install -D -m 0755 "$lib" "$work/rootfs$lib"; done
install -D -m 0644 config/local.toml "$work/rootfs/etc/countersign/countersign.toml"
mkdir -p "$work/rootfs/data"
podman build -q -f container/Containerfile -t "$tag" "$work" >/dev/null
echo "built $tag: $(podman image inspect "$tag" --format '{{.Size}}') bytes, from scratch"

# runc, and limits no higher than this shell's: podman's defaults raise RLIMIT_NOFILE and
# RLIMIT_NPROC, which a sandboxed CI machine may not allow (and crun refuses its hybrid cgroups).
run=(podman --runtime runc)
limits=(--ulimit "nofile=$(ulimit -n):$(ulimit -n)" --ulimit nproc=4096:4096)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir "$work/data"
"${run[@]}" run -d --name "$name" "${limits[@]}" -p "127.0.0.1:$port:8080" -v "$work/data:/data:U" "$tag" >/dev/null
api=http://127.0.0.1:$port
up() { for _ in $(seq 100); do curl -sf "$api/healthz" >/dev/null && return; sleep 0.2; done
  podman logs "$name"; echo "the container did not answer"; exit 1; }
up
id=$(curl -fsS -X POST "$api/v1/actions" -H 'Authorization: Bearer cs_agent-dev' \
  -H 'content-type: application/json' -d '{"tool":"search.web","args":{"q":"container"}}' |
  python3 -c 'import json,sys; a = json.load(sys.stdin); assert a["state"] == "succeeded", a; print(a["id"])')
echo "a call ran in the container: $id"
"${run[@]}" stop -t 20 "$name" >/dev/null
code=$(podman inspect "$name" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] || { podman logs "$name"; echo "SIGTERM: exit $code, expected a graceful 0"; exit 1; }
echo "podman stop: exit 0"
"${run[@]}" start "$name" >/dev/null
up
curl -fsS "$api/v1/actions/$id" -H 'Authorization: Bearer cs_agent-dev' |
  python3 -c 'import json,sys; a = json.load(sys.stdin); assert a["state"] == "succeeded", a'
echo "after a restart the action is still there (volume /data)"
if [ -n "$keep" ]; then
  podman tag "$tag" localhost/countersign-server:latest && podman rmi "$tag" >/dev/null
  echo "kept: localhost/countersign-server:latest"
fi
