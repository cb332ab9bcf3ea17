#!/usr/bin/env bash
# Serve gRPC and the HTTP gateway on the embedded sandbox, play one episode, stop as SIGTERM does.
set -euo pipefail
GRPC=${GRPC:-127.0.0.1:50051} HTTP=${HTTP:-127.0.0.1:8080}
.venv/bin/workplace-env serve --address "$GRPC" --http-address "$HTTP" &
SERVER=$!
until curl -sf "http://$HTTP/ready"; do sleep 0.2; done  # {"status":"ready"}
echo
.venv/bin/python "${EXAMPLES:-docs/examples}/sdk_episode.py" "$GRPC"
kill -TERM "$SERVER" && wait "$SERVER"  # drains, then exits 0
