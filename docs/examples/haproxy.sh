#!/usr/bin/env bash
# Three replicas behind HAProxy (deploy/haproxy.cfg, the config tests/deploy/test_proxy.py runs).
# Needs: apt-get install -y haproxy
set -euo pipefail
S=$(openssl rand -hex 32) T=$(openssl rand -hex 32)
for i in 1 2 3; do
  .venv/bin/workplace-env serve --address 127.0.0.1:5006$i --http-address 127.0.0.1:808$i \
    --cookie-secret $S --admin-token $T --drain-delay-s 1 &
done
export WPENV_GRPC_BIND=0.0.0.0:50051 WPENV_HTTP_BIND=0.0.0.0:8080 \
  WPENV_R1_GRPC=127.0.0.1:50061 WPENV_R2_GRPC=127.0.0.1:50062 WPENV_R3_GRPC=127.0.0.1:50063 \
  WPENV_R1_HTTP=127.0.0.1:8081 WPENV_R2_HTTP=127.0.0.1:8082 WPENV_R3_HTTP=127.0.0.1:8083
haproxy -f deploy/haproxy.cfg
