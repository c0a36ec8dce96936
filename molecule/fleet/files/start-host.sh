#!/bin/sh
# start-host.sh NAME ARCH IMAGE PEER
# Start the container host NAME the way molecule starts the shared hosts (.config/molecule/
# config.yml: runc, the sandbox's ulimits, host network, the host's CA).  It is labelled with
# the id of PEER (a shared host of this test bed), so a leftover from an earlier test bed is
# replaced rather than reused.  Prints "started" or "running".
set -eu
name=$1 arch=$2 image=$3 peer=$4
peer_id=$(podman inspect -f '{{.Id}}' "$peer")
if podman container exists "$name"; then
  label=$(podman inspect -f '{{index .Config.Labels "sparkforge.peer"}}' "$name")
  state=$(podman inspect -f '{{.State.Running}}' "$name")
  if [ "$label" = "$peer_id" ] && [ "$state" = true ]; then
    echo running
    exit 0
  fi
  podman rm -f -t 0 "$name" >/dev/null
fi
podman run -d --name "$name" --label "sparkforge.peer=$peer_id" --runtime runc --arch "$arch" \
  --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 --network host \
  -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/host-ca.crt:ro \
  "$image" sleep infinity >/dev/null
echo started
