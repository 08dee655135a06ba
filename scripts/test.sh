#!/usr/bin/env bash
# Runs every test: vet, the unit and integration tests under the race
# detector, and a plain `xcaddy build` of the plugin as users build it.
# Installs what a fresh machine lacks (redis-server, for the shared-state
# tests). Usage: scripts/test.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1 || ! command -v wrk >/dev/null 2>&1; then
	echo "== installing redis-server (tests start their own on a free port) and wrk (integration/bench)"
	SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server wrk >/dev/null
fi

echo "== go vet"
go vet ./...

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "not gofmt-formatted: $unformatted"; exit 1; fi

echo "== go test -race (unit and integration)"
go test -race -count=1 -timeout 30m ./...

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
