#!/usr/bin/env bash
# Builds Caddy with the plugin and the demo MCP server, starts the demo
# server on 127.0.0.1:9000, and serves Caddyfile.example on :8080 in front
# of it. Ctrl-C stops both. Usage: scripts/demo.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
echo "== building bin/caddy (Caddy + caddy-mcpi) and bin/mcpi-demo"
go build -o bin/caddy ./cmd/caddy
go build -o bin/mcpi-demo ./cmd/mcpi-demo
# The demo server checks the edge's signed identity assertion against the
# edge's published keys, as an MCP-I-aware service would.
./bin/mcpi-demo -addr 127.0.0.1:9000 \
	-edge-jwks http://localhost:8080/.well-known/jwks.json -audience http://127.0.0.1:9000 &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT INT TERM
echo "== demo MCP server on http://127.0.0.1:9000/mcp; edge on http://localhost:8080/mcp"
./bin/caddy run --config Caddyfile.example --adapter caddyfile
