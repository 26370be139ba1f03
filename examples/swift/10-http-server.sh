#!/usr/bin/env bash
# 10-http-server.sh SERVER - the Swift HTTP server gets the C server's checks (curl, keep-alive
# and idle close, Connection: close, pipelining, backpressure, wrk, SIGTERM/SIGINT): `make
# examples` runs this with the path of example-10-http-server (mk/examples.mk).
exec bash "$(dirname "${BASH_SOURCE[0]}")/../c/10-http-server.sh" "$@"
