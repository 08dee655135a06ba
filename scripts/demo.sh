#!/usr/bin/env bash
# Builds Caddy with the plugin and the demo MCP server, starts the demo
# server on 127.0.0.1:9000, and serves Caddyfile.example on :8080 in front
# of it. Ctrl-C stops both. Usage: scripts/demo.sh   (from the repository root)
#
# scripts/demo.sh frontdoor serves docs/onboarding/demo.Caddyfile instead: the
# edge is the authorization server, and an MCP client with no credential gets
# one after you approve it in your browser. It then runs mcp-remote's test
# client (pinned in integration/mcpremote, needs npm) against the edge, which
# prints the URL to open; sign in as demo / demo.
#
# Ports already in use? Move them (Caddyfile.example reads the same names):
#   MCPI_DEMO_EDGE_PORT=8081 MCPI_DEMO_UPSTREAM_PORT=9001 MCPI_DEMO_ADMIN_PORT=2020 scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
"" | frontdoor) ;;
*)
	echo "usage: scripts/demo.sh [frontdoor]" >&2
	exit 2
	;;
esac

# Exported so that Caddy's {$MCPI_DEMO_*_PORT:default} placeholders in
# Caddyfile.example see the same values as the demo server's flags.
export MCPI_DEMO_EDGE_PORT="${MCPI_DEMO_EDGE_PORT:-8080}"
export MCPI_DEMO_UPSTREAM_PORT="${MCPI_DEMO_UPSTREAM_PORT:-9000}"
export MCPI_DEMO_ADMIN_PORT="${MCPI_DEMO_ADMIN_PORT:-2019}"
edge=$MCPI_DEMO_EDGE_PORT upstream=$MCPI_DEMO_UPSTREAM_PORT admin=$MCPI_DEMO_ADMIN_PORT

die() {
	echo "demo.sh: $*" >&2
	exit 1
}

command -v curl >/dev/null || die "curl is needed to wait for the demo server"

# Refuse before starting anything: with a port taken, one of the two
# processes would fail to bind while the other kept running, a demo that
# answers but not as the README says. A port counts as taken when something
# accepts connections on it over IPv4 or IPv6 loopback (bash's /dev/tcp;
# connection refused means free).
port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null || (exec 3<>"/dev/tcp/::1/$1") 2>/dev/null
}
for spec in "EDGE:$edge:the edge (Caddy)" "UPSTREAM:$upstream:the demo MCP server" "ADMIN:$admin:Caddy's admin API"; do
	IFS=: read -r name port what <<<"$spec"
	if ! [[ $port =~ ^[1-9][0-9]{0,4}$ ]] || ((port > 65535)); then
		die "MCPI_DEMO_${name}_PORT=$port is not a port number"
	fi
	if port_busy "$port"; then
		die "port $port, wanted by $what, is already in use; stop what holds it or choose another port: MCPI_DEMO_${name}_PORT=<port> scripts/demo.sh"
	fi
done
[[ $edge != "$upstream" && $edge != "$admin" && $upstream != "$admin" ]] ||
	die "the edge ($edge), demo server ($upstream) and admin ($admin) ports must differ"

mkdir -p bin
echo "== building bin/caddy (Caddy + caddy-mcpi) and bin/mcpi-demo"
go build -o bin/caddy ./cmd/caddy
go build -o bin/mcpi-demo ./cmd/mcpi-demo
# The demo server checks the edge's signed identity assertion against the
# edge's published keys, as an MCP-I-aware service would.
./bin/mcpi-demo -addr "127.0.0.1:$upstream" \
	-edge-jwks "http://localhost:$edge/.well-known/jwks.json" -audience "http://127.0.0.1:$upstream" &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT INT TERM

# Start Caddy only once the demo server answers: if it died (a port taken
# after the check above, a bad flag) the edge would only ever answer 502.
for ((i = 0; ; i++)); do
	kill -0 "$demo" 2>/dev/null || die "the demo MCP server exited before it answered on 127.0.0.1:$upstream (see its error above)"
	curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$upstream/healthz" 2>/dev/null && break
	((i < 100)) || die "the demo MCP server did not answer http://127.0.0.1:$upstream/healthz within 10s"
	sleep 0.1
done

echo "== demo MCP server on http://127.0.0.1:$upstream/mcp; edge on http://localhost:$edge/mcp"
if [[ $mode != frontdoor ]]; then
	./bin/caddy run --config Caddyfile.example --adapter caddyfile
	exit
fi

./bin/caddy run --config docs/onboarding/demo.Caddyfile --adapter caddyfile &
caddy=$!
trap 'kill $demo $caddy 2>/dev/null || true' EXIT INT TERM
for ((i = 0; ; i++)); do
	kill -0 "$caddy" 2>/dev/null || die "Caddy exited before it answered on localhost:$edge (see its error above)"
	curl -fsS -o /dev/null --max-time 1 "http://localhost:$edge/.well-known/oauth-authorization-server" 2>/dev/null && break
	((i < 300)) || die "the edge did not answer http://localhost:$edge/.well-known/oauth-authorization-server within 30s"
	sleep 0.1
done

cat <<EOT

== the front door is open at http://localhost:$edge/mcp
   An MCP client with no credential now runs the OAuth flow against the edge.
   Open the URL it prints below ("Please authorize this client by visiting"),
   sign in as demo / demo, untick what you do not want to give, and Allow.
   Its tools/list and calls then carry a delegation from your user DID
   (did:web:localhost%3A$edge:oauth:users:…) to the client's agent DID.

EOT
if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
	(cd integration/mcpremote && npm ci --no-audit --no-fund --silent)
	# A fresh token store each run, so the flow is shown from the start.
	MCP_REMOTE_CONFIG_DIR=$(mktemp -d) node integration/mcpremote/node_modules/mcp-remote/dist/client.js \
		"http://localhost:$edge/mcp" || true
	echo "== the edge keeps running; Ctrl-C stops it"
else
	echo "npm is not installed; from any machine with Node 20+ run:"
	echo "   npx -y mcp-remote@0.15.1 http://localhost:$edge/mcp"
fi
wait "$caddy"
