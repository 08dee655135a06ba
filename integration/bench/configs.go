package main

import (
	"fmt"
	"strings"
)

// loadKind is how a configuration is driven.
type loadKind int

const (
	// loadHeader: wrk, one credential in Authorization, reused.
	loadHeader loadKind = iota
	// loadPool: wrk, a fresh credential from the pre-minted pool on every
	// request.
	loadPool
	// loadBody: wrk, one credential in params.delegationToken, reused.
	loadBody
	// loadHandshake: the peer's Level 3 handshake driver.
	loadHandshake
	// load2026: wrk, one credential in Authorization, reused, on a
	// 2026-era request (MCP-Protocol-Version 2026-07-28, Mcp-Method and
	// Mcp-Name headers, _meta protocolVersion, no session).
	load2026
	// loadProof: wrk, load2026 with a fresh KYA-OS request proof in every
	// body, from a pool minted right before each run (proofs live 60 s).
	loadProof
)

// String names the request a load sends, for the table of every run.
func (k loadKind) String() string {
	switch k {
	case loadHeader:
		return "2025, credential in Authorization"
	case loadPool:
		return "2025, a pool credential each"
	case loadBody:
		return "2025, credential in the body"
	case loadHandshake:
		return "Level 3 handshakes"
	case load2026:
		return "2026, credential in Authorization"
	case loadProof:
		return "2026, a request proof each"
	}
	return fmt.Sprintf("load %d", int(k))
}

// plainBeside is the run of (a) paired with c: driven with c's requests,
// so that c's ratios to it count what the mcpi handler costs, not what
// Caddy spends on a bigger or different request. (a) verifies nothing, so
// any credential or proof will do (pool credentials and proof bodies are
// still never sent twice: load.go, proofs.go). Level 3 handshakes are the
// exception: their "×(a) CPU" is plain requests per handshake, so their
// pair is the plain request.
func plainBeside(plain, c config) config {
	if c.load != loadHandshake {
		plain.load = c.load
	}
	return plain
}

// config is one configuration of the bench: a server of the one Caddy
// process, on a port of its own, whose one route is /<name>/*, and how it
// is driven.
type config struct {
	name  string
	label string
	load  loadKind
	// mcpi is the body of the route's mcpi block; "" for no mcpi.
	mcpi string
	// redis: the route's nonce store is the bench's redis-server.
	redis bool
	// check is what the upstream must have seen on this route; nil for
	// none.
	check func(s routeStats) error
	// optional: a feature still landing. If the built Caddy does not
	// accept the route's Caddyfile, the configuration is skipped with a
	// note instead of failing the run.
	optional bool
}

// allConfigs are the configurations, in their order in the report. a is
// the ceiling every ratio is taken against.
var allConfigs = []config{
	{name: "a", label: "plain reverse_proxy (the ceiling)", load: loadHeader},
	{name: "b", label: "level 1, one credential reused", load: loadHeader,
		mcpi: "level 1", check: noLeak},
	{name: "b-hdr", label: "level 1, one credential reused, `carriers authorization` (no body read)", load: loadHeader,
		mcpi: "level 1\ncarriers authorization", check: noLeak},
	{name: "b-deny", label: "level 1, one credential reused, `audit_log denials` (no audit line for an admitted request)", load: loadHeader,
		mcpi: "level 1\naudit_log denials", check: noLeak},
	{name: "c", label: "level 1, a fresh credential on every request", load: loadPool,
		mcpi: "level 1", check: noLeak},
	{name: "d", label: "level 2, signed X-Verified-Delegation (assertion reused while fresh, the default)", load: loadHeader,
		mcpi: "level 2", check: allAsserted, optional: true},
	{name: "d-sign", label: "level 2, `assertion_reuse off` (one signature per request)", load: loadHeader,
		mcpi: "level 2\nassertion_reuse off", check: allAsserted, optional: true},
	{name: "e", label: "level 1, credential in params.delegationToken (body read and rewritten; the stand-in for per-tool policy)", load: loadBody,
		mcpi: "level 1", check: noLeak},
	{name: "e-tool", label: "level 1 + per-tool policy `tool greet { scopes greet:execute }` (tools/call body parsed, result checked)", load: loadHeader,
		mcpi: "level 1\ntool greet {\n\tscopes greet:execute\n}", check: noLeak, optional: true},
	{name: "e-cel", label: "e-tool + one CEL rule on the tool over the arguments and the delegation's scopes", load: loadHeader,
		mcpi: "level 1\ntool greet {\n\tscopes greet:execute\n\trule small `size(arguments) <= 4 && delegation.scopes.exists(s, s == 'greet:execute')` \"At most four arguments.\"\n}", check: noLeak, optional: true},
	{name: "b-2026", label: "level 1, one credential reused, 2026-era stateless requests (framing headers checked)", load: load2026,
		mcpi: "level 1", check: allFramed},
	{name: "p", label: "level 1, 2026-era requests each with a fresh KYA-OS request proof, `request_proof required`, memory nonce store", load: loadProof,
		mcpi: fmt.Sprintf("level 1\nrequest_proof required\nnonce_store memory %d", proofNonceEntries), check: allProved},
	{name: "p-redis", label: "p with the Redis nonce store", load: loadProof, redis: true,
		mcpi: "level 1\nrequest_proof required", check: allProved},
	{name: "f-mem", label: "level 3 handshakes, memory nonce store", load: loadHandshake,
		mcpi: "level 3\nhandshake terminate\nhandshake_paths /f-mem/handshake /f-mem/verify\nnonce_store memory", check: noUpstream, optional: true},
	{name: "f-redis", label: "level 3 handshakes, Redis nonce store", load: loadHandshake, redis: true,
		mcpi: "level 3\nhandshake terminate\nhandshake_paths /f-redis/handshake /f-redis/verify", check: noUpstream, optional: true},
}

// routeStats is what the upstream saw on one route during one run
// (peer.RouteStats, as a difference).
type routeStats struct {
	Requests int64 `json:"requests"`
	Leaked   int64 `json:"leaked"`
	Asserted int64 `json:"asserted"`
	Framed   int64 `json:"framed"`
	Proved   int64 `json:"proved"`
}

func (s routeStats) minus(o routeStats) routeStats {
	return routeStats{s.Requests - o.Requests, s.Leaked - o.Leaked, s.Asserted - o.Asserted,
		s.Framed - o.Framed, s.Proved - o.Proved}
}

func noLeak(s routeStats) error {
	if s.Leaked != 0 {
		return fmt.Errorf("%d of %d requests reached the upstream still carrying the credential", s.Leaked, s.Requests)
	}
	return nil
}

func allAsserted(s routeStats) error {
	if err := noLeak(s); err != nil {
		return err
	}
	if s.Asserted != s.Requests {
		return fmt.Errorf("%d of %d requests reached the upstream without X-Verified-Delegation", s.Requests-s.Asserted, s.Requests)
	}
	return nil
}

// allFramed: the 2026 framing headers reached the upstream on every
// request (the edge checked them against the body and passed them on).
func allFramed(s routeStats) error {
	if err := noLeak(s); err != nil {
		return err
	}
	if s.Framed != s.Requests {
		return fmt.Errorf("%d of %d requests reached the upstream without their 2026 framing headers", s.Requests-s.Framed, s.Requests)
	}
	return nil
}

// allProved: every request reached the upstream framed and with its
// request proof still in the body.
func allProved(s routeStats) error {
	if err := allFramed(s); err != nil {
		return err
	}
	if s.Proved != s.Requests {
		return fmt.Errorf("%d of %d requests reached the upstream without a request proof", s.Requests-s.Proved, s.Requests)
	}
	return nil
}

func noUpstream(s routeStats) error {
	if s.Requests != 0 {
		return fmt.Errorf("%d handshake calls reached the upstream (terminate mode answers them at the edge)", s.Requests)
	}
	return nil
}

// selectConfigs returns the configurations named in names (all for none),
// in report order.
func selectConfigs(names []string) ([]config, error) {
	if len(names) == 0 {
		return allConfigs, nil
	}
	want := make(map[string]bool)
	for _, n := range names {
		want[strings.TrimSpace(n)] = true
	}
	var out []config
	for _, c := range allConfigs {
		if want[c.name] {
			out = append(out, c)
			delete(want, c.name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown configuration %q (have %s)", n, configNames(allConfigs))
	}
	return out, nil
}

func configNames(cs []config) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	return strings.Join(names, ",")
}

// caddyfile renders the bench's Caddyfile: one site per configuration,
// each on its own port (ports[c.name]) and so its own server, with the
// configuration's route alone, all in front of the same upstream. Caddy
// tests a server's handle routes longest path first, each test costing
// allocations and CPU, so in one shared site a configuration paid for the
// routes tested before its own; here every request passes exactly one
// path test, whichever configuration it is for. The route keeps the
// /<name>/ prefix: the upstream counts per first path segment.
func caddyfile(cs []config, ports map[string]int, adminPort int, storage, upstream, issuerDID, redisURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{
	admin 127.0.0.1:%d
	auto_https off
	persist_config off
	skip_install_trust
	grace_period 1ns
	storage file_system {
		root %s
	}
}
`, adminPort, storage)
	for _, c := range cs {
		fmt.Fprintf(&b, "\n:%d {\n\tbind 127.0.0.1\n", ports[c.name])
		fmt.Fprintf(&b, "\thandle /%s/* {\n", c.name)
		if c.mcpi != "" {
			b.WriteString("\t\tmcpi {\n")
			fmt.Fprintf(&b, "\t\t\ttrust %s\n", issuerDID)
			for _, line := range strings.Split(c.mcpi, "\n") {
				fmt.Fprintf(&b, "\t\t\t%s\n", line)
			}
			if c.redis {
				fmt.Fprintf(&b, "\t\t\tnonce_store redis %s\n", redisURL)
			}
			b.WriteString("\t\t}\n")
		}
		fmt.Fprintf(&b, "\t\treverse_proxy %s\n\t}\n}\n", upstream)
	}
	return b.String()
}
