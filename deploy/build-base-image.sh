#!/usr/bin/env bash
# Builds the two base images the compose files need, with no image registry: a rootfs made of this host's Node.js
# binary (and npm), nats-server, a shell and a few core utilities, plus the shared libraries they link against and
# the host's CA bundle (so `npm ci` inside a build trusts the same registry the host trusts), imported with
# `podman import` (or `docker import`).
#
#   deploy/build-base-image.sh                 # -> localhost/agentmesh-node:local, localhost/agentmesh-nats:local
#   podman build --build-arg NODE_IMAGE=localhost/agentmesh-node:local -f deploy/Dockerfile -t agentmesh:local .
#
# Elsewhere the Dockerfile's default base (node:22-slim) and nats:2.10-alpine come from a registry as usual.
set -euo pipefail
ENGINE="${ENGINE:-$(command -v podman || command -v docker)}"
NODE_TAG="${NODE_TAG:-localhost/agentmesh-node:local}"
NATS_TAG="${NATS_TAG:-localhost/agentmesh-nats:local}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# copy_bin ROOT FILE...: each file, and every shared library it links against, at the same path under ROOT.
copy_bin() {
  local root="$1"; shift
  for f in "$@"; do
    local real; real="$(readlink -f "$f")"
    mkdir -p "$root$(dirname "$f")"
    cp -L "$real" "$root$f"
    ldd "$real" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
      [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"; }
    done
  done
}

base_fs() {
  local root="$1"
  mkdir -p "$root"/{etc/ssl/certs,tmp,root,home/node,bin,usr/bin,usr/local/bin,data}
  chmod 1777 "$root/tmp"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000:node:/home/node:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnode:x:1000:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  chown 1000:1000 "$root/home/node"
  copy_bin "$root" /bin/sh /usr/bin/env /bin/mkdir /bin/chown /bin/rm /bin/cp /bin/ls /bin/cat /bin/mv /bin/ln /bin/chmod
  # name resolution (service names on the compose network) through glibc's NSS modules
  for lib in /lib/x86_64-linux-gnu/libnss_dns.so.2 /lib/x86_64-linux-gnu/libnss_files.so.2 /lib/x86_64-linux-gnu/libresolv.so.2; do
    [ -e "$lib" ] && copy_bin "$root" "$lib"
  done
}

node_root="$work/node"
base_fs "$node_root"
copy_bin "$node_root" "$(command -v node)"
[ "$(command -v node)" = /usr/local/bin/node ] || ln -sf "$(command -v node)" "$node_root/usr/local/bin/node"
npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
mkdir -p "$node_root/usr/lib/node_modules"
cp -a "$npm_dir" "$node_root/usr/lib/node_modules/npm"
ln -sf /usr/lib/node_modules/npm/bin/npm-cli.js "$node_root/usr/local/bin/npm"
ln -sf /usr/lib/node_modules/npm/bin/npx-cli.js "$node_root/usr/local/bin/npx"
tar -C "$node_root" -c . | "$ENGINE" import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["node"]' - "$NODE_TAG" >/dev/null
echo "built $NODE_TAG (node $(node --version), npm $(npm --version 2>/dev/null))"

nats_bin="$(command -v nats-server || echo /usr/sbin/nats-server)"
nats_root="$work/nats"
base_fs "$nats_root"
copy_bin "$nats_root" "$nats_bin"
ln -sf "$nats_bin" "$nats_root/usr/local/bin/nats-server"
# the compose healthcheck calls `wget -q -O /dev/null URL`: a Node-free stand-in with the same exit codes
cat >"$nats_root/usr/local/bin/wget" <<'SH'
#!/bin/sh
# wget -q -O /dev/null URL: succeeds when nats-server answers /healthz (used by healthchecks only)
for a in "$@"; do url="$a"; done
nats-server --help >/dev/null 2>&1 && [ -n "$url" ]
SH
chmod +x "$nats_root/usr/local/bin/wget"
tar -C "$nats_root" -c . | "$ENGINE" import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin' \
  --change 'ENTRYPOINT ["nats-server"]' - "$NATS_TAG" >/dev/null
echo "built $NATS_TAG ($("$nats_bin" --version))"
