#!/bin/bash
# Local test control plane: etcd + kube-apiserver (+ optional kube-scheduler, kwok)
# usage: stack.sh up|down   env: BIN (dir with etcd, kube-apiserver, kube-scheduler, kwok), ST (state dir),
#   ETCD_PORT (23790), ETCD_PEER_PORT (23800), KAS_PORT (16443), AUTHZ (AlwaysAllow; RBAC for the RBAC tests),
#   KWOK_CIDR (127.1.0.0/16: the fake pod IPs, on loopback), KWOK_PORT (unset: none; else kwok also serves a
#   kubelet endpoint on 127.0.0.1:KWOK_PORT that runs pods/exec commands as its own local processes, see
#   kwok-exec.yaml; the API server reaches it on the node's InternalIP 127.0.0.1 without verifying its
#   self-signed certificate, as it does for any kubelet when --kubelet-certificate-authority is unset)
# Orchard's copy of ../shared/k8s-testenv/stack.sh, with the ports and the authorization mode configurable
# so that tests can run several stacks side by side.
# After up: KUBECONFIG=$ST/kubeconfig; apply kwok-node.yaml to get a fake Ready node.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# BIN is the OUTDIR of build-bins.sh. Every address used is on loopback: kwok hands out fake pod IPs
# from 127.1.0.0/16, so a test may serve a fake pod's in-sandbox agent on that address itself.
BIN=${BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/k8s-testenv/bin}
ETCD_BIN=${ETCD_BIN:-$BIN/etcd}
KWOK=${KWOK:-$BIN/kwok}
KWOK_STAGES=${KWOK_STAGES:-$BIN/kwok-stages.yaml}
ST=${ST:-${TMPDIR:-/tmp}/k8s-testenv-state}
ETCD_PORT=${ETCD_PORT:-23790}; ETCD_PEER_PORT=${ETCD_PEER_PORT:-23800}; KAS_PORT=${KAS_PORT:-16443}
AUTHZ=${AUTHZ:-AlwaysAllow}
waitfor() { # cmd... ; polls 0.1s up to 60s
  for i in $(seq 1 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
now() { date +%s.%N; }
case "$1" in
up)
  rm -rf "$ST"; mkdir -p "$ST/certs"; cd "$ST" || exit 1
  openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  echo 'test-token,admin,admin-uid,"system:masters"' > tokens.csv
  cat > kubeconfig <<KC
apiVersion: v1
kind: Config
clusters: [{name: t, cluster: {server: "https://127.0.0.1:$KAS_PORT", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: test-token}}]
contexts: [{name: t, context: {cluster: t, user: admin}}]
current-context: t
KC
  t0=$(now)
  "$ETCD_BIN" --data-dir "$ST/etcd" --listen-client-urls http://127.0.0.1:$ETCD_PORT --advertise-client-urls http://127.0.0.1:$ETCD_PORT \
    --listen-peer-urls http://127.0.0.1:$ETCD_PEER_PORT --initial-advertise-peer-urls http://127.0.0.1:$ETCD_PEER_PORT \
    --initial-cluster default=http://127.0.0.1:$ETCD_PEER_PORT --unsafe-no-fsync > etcd.log 2>&1 & echo $! > etcd.pid
  waitfor curl -sf http://127.0.0.1:$ETCD_PORT/health || { echo etcd failed; exit 1; }
  echo "etcd up $(echo "$(now)-$t0"|bc)s"; t1=$(now)
  "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:$ETCD_PORT \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --secure-port=$KAS_PORT --cert-dir="$ST/certs" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$ST/sa.pub" --service-account-signing-key-file="$ST/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --token-auth-file="$ST/tokens.csv" --authorization-mode=$AUTHZ \
    --kubelet-preferred-address-types=InternalIP \
    --disable-admission-plugins=ServiceAccount,TaintNodesByCondition > kas.log 2>&1 & echo $! > kas.pid
  waitfor sh -c "curl -sk -H 'Authorization: Bearer test-token' https://127.0.0.1:$KAS_PORT/readyz | grep -qx ok" || { echo apiserver failed; tail kas.log; exit 1; }
  echo "kube-apiserver ready $(echo "$(now)-$t1"|bc)s"
  if [ -x "$BIN/kube-scheduler" ]; then
    "$BIN/kube-scheduler" --kubeconfig="$ST/kubeconfig" --authentication-kubeconfig="$ST/kubeconfig" \
      --authorization-kubeconfig="$ST/kubeconfig" --leader-elect=false --secure-port=0 > sched.log 2>&1 & echo $! > sched.pid
  fi
  if [ -x "$KWOK" ]; then
    KUBELET=()
    [ -n "${KWOK_PORT:-}" ] && KUBELET=(-c "$HERE/kwok-exec.yaml" --server-address=127.0.0.1:$KWOK_PORT --node-port=$KWOK_PORT)
    "$KWOK" --kubeconfig="$ST/kubeconfig" -c "$KWOK_STAGES" --manage-all-nodes=false \
      --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake --node-lease-duration-seconds=40 \
      --cidr=${KWOK_CIDR:-127.1.0.0/16} --node-ip=127.0.0.1 "${KUBELET[@]}" > kwok.log 2>&1 & echo $! > kwok.pid
  fi
  echo "stack up in $(echo "$(now)-$t0"|bc)s; KUBECONFIG=$ST/kubeconfig" ;;
down)
  cd "$ST" || exit 0
  for c in kwok sched kas etcd; do   # apiserver before etcd, else it hangs on shutdown
    [ -f $c.pid ] || continue; p=$(cat $c.pid); kill $p 2>/dev/null
    for i in $(seq 1 100); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
    kill -0 $p 2>/dev/null && kill -9 $p; rm -f $c.pid
  done; echo down ;;
esac
