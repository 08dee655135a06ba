#!/usr/bin/env bash
# Runs the whole-proxy benchmark (integration/bench): builds Caddy with the
# plugin, measures every configuration in alternating rounds (wrk), then
# a and b at a constant rate (open-loop, vegeta in the bench peer), prints
# the figures and rewrites the generated part of BENCHMARKS.md. Installs wrk
# and redis-server with apt when they are missing. Loopback only.
#
# Usage: scripts/bench.sh [flags]   (from anywhere; flags go to the harness)
#   scripts/bench.sh                       # 3 rounds × 12 configs × 3 s, each next to a run of a, then
#                                          # open-loop 3 rounds × a, b × 5 s, profiles; ~6 min
#   scripts/bench.sh -quick                # 1 round × 1 s, open-loop 1 s; writes nothing
#   scripts/bench.sh -openloop 10s -openloop-frac 0.5
#   scripts/bench.sh -rounds 5 -duration 10s -connections 64
#   scripts/bench.sh -configs a,b,c -pin=false
#   (cd integration/bench && go run . -h)  # every flag
# The harness is its own Go module (integration/bench/go.mod), so it runs
# from that directory.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ ${#missing[@]} -gt 0 ]; then
	echo "== installing ${missing[*]}"
	SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cd integration/bench
MCPI_BENCH_COMMAND="scripts/bench.sh${*:+ $*}" exec go run . "$@"
