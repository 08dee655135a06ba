package caddymodule

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/certmagic"
	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

func TestChainFetchCaddyfile(t *testing.T) {
	parse := func(input string) (*Handler, error) {
		h := new(Handler)
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcpi {\n trust any\n " + input + "\n}"))
		return h, err
	}
	h, err := parse(`chain_fetch https://creds.example.com/ {
		allow https://registry.example.com/delegations/ https://b.example.com:8443/v1/
		allow https://c.example.com/
		timeout 2s
		max_size 32KiB
		cache_ttl 10m
	}`)
	if err != nil {
		t.Fatal(err)
	}
	cf := h.ChainFetch
	want := []string{"https://creds.example.com/", "https://registry.example.com/delegations/", "https://b.example.com:8443/v1/", "https://c.example.com/"}
	if cf == nil || strings.Join(cf.Allow, " ") != strings.Join(want, " ") || cf.Timeout != edge.Duration(2*time.Second) ||
		cf.MaxSize != 32<<10 || cf.CacheTTL != edge.Duration(10*time.Minute) {
		t.Fatalf("parsed %+v", cf)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(h)
	for _, k := range []string{`"chain_fetch":{"allow":["https://creds.example.com/",`, `"timeout":2000000000`, `"max_size":32768`, `"cache_ttl":600000000000`} {
		if !strings.Contains(string(js), k) {
			t.Errorf("JSON %s lacks %s", js, k)
		}
	}

	for _, ok := range []string{
		"chain_fetch https://creds.example.com/",
		"chain_fetch on {\n allow https://creds.example.com/\n }",
		"chain_fetch {\n allow https://creds.example.com/\n }",
	} {
		if h, err := parse(ok); err != nil || h.ChainFetch == nil || len(h.ChainFetch.Allow) != 1 {
			t.Errorf("%q: %v", ok, err)
		}
	}
	if h, err := parse("chain_fetch off"); err != nil || h.ChainFetch != nil {
		t.Errorf("chain_fetch off: %v %+v", err, h.ChainFetch)
	}
	for _, bad := range []string{
		"chain_fetch",
		"chain_fetch on",
		"chain_fetch off {\n allow https://a.example/\n }",
		"chain_fetch off https://a.example/",
		"chain_fetch https://a.example/ on",
		"chain_fetch https://a.example/\n chain_fetch https://b.example/",
		"chain_fetch off\n chain_fetch https://b.example/",
		"chain_fetch {\n allow\n }",
		"chain_fetch https://a.example/ {\n timeout\n }",
		"chain_fetch https://a.example/ {\n timeout 0s\n }",
		"chain_fetch https://a.example/ {\n timeout 1s\n timeout 2s\n }",
		"chain_fetch https://a.example/ {\n max_size lots\n }",
		"chain_fetch https://a.example/ {\n max_size 1KiB\n max_size 2KiB\n }",
		"chain_fetch https://a.example/ {\n cache_ttl never\n }",
		"chain_fetch https://a.example/ {\n follow_redirects\n }",
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}

	// Prefixes are checked by Validate.
	for _, bad := range []string{"http://a.example/", "https://a.example/x", "https://a.example/?q=1", "a.example", "https://u@a.example/"} {
		h, err := parse("chain_fetch " + bad)
		if err != nil {
			t.Fatalf("%q: %v", bad, err)
		}
		if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "chain_fetch") {
			t.Errorf("%q validated: %v", bad, err)
		}
	}
	for _, bad := range []*ChainFetchConfig{
		{},
		{Allow: []string{"https://a.example/"}, Timeout: -1},
		{Allow: []string{"https://a.example/"}, CacheTTL: -1},
		{Allow: []string{"https://a.example/"}, MaxSize: -1},
	} {
		h := &Handler{Config: edge.Config{TrustedIssuers: []string{"*"}, DelegationConfig: DelegationConfig{ChainFetch: bad}}}
		if err := h.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

func TestDelegationCaddyfile(t *testing.T) {
	parse := func(input string) (*Handler, error) {
		h := new(Handler)
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		return h, err
	}
	h, err := parse(`mcpi {
		trust any
		require_presentation
		status_list_ttl 2m
		status_stale_if_error 1h
		jsonld on
		jsonld_context https://example.com/a/v1 /etc/a.jsonld
		jsonld_context https://example.com/b/v1 /etc/b.jsonld
	}`)
	if err != nil {
		t.Fatal(err)
	}
	if !h.RequirePresentation || h.StatusListTTL != edge.Duration(2*time.Minute) ||
		h.StatusStaleIfError != edge.Duration(time.Hour) || h.DisableJSONLD ||
		len(h.JSONLDContexts) != 2 || h.JSONLDContexts["https://example.com/b/v1"] != "/etc/b.jsonld" {
		t.Fatalf("parsed %+v", h.DelegationConfig)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(h)
	for _, k := range []string{`"require_presentation":true`, `"status_list_ttl":120000000000`, `"status_stale_if_error":3600000000000`, `"jsonld_contexts":{`} {
		if !strings.Contains(string(js), k) {
			t.Errorf("JSON %s lacks %s", js, k)
		}
	}

	if h, err = parse("mcpi {\n trust any\n jsonld off\n}"); err != nil || !h.DisableJSONLD {
		t.Fatalf("jsonld off: %v %+v", err, h.DelegationConfig)
	}
	if h, err = parse("mcpi {\n trust any\n jsonld off\n jsonld_context https://example.com/a /a\n}"); err != nil {
		t.Fatal(err)
	} else if err := h.Validate(); err == nil {
		t.Error("jsonld_context with jsonld off validated")
	}
	for _, bad := range []string{
		"require_presentation yes",
		"require_presentation\n require_presentation",
		"status_list_ttl",
		"status_list_ttl 0s",
		"status_list_ttl 1m\n status_list_ttl 2m",
		"status_stale_if_error soon",
		"jsonld maybe",
		"jsonld on\n jsonld off",
		"jsonld_context https://example.com/a",
		"jsonld_context https://example.com/a /a /b",
		"jsonld_context https://example.com/a /a\n jsonld_context https://example.com/a /b",
	} {
		if _, err := parse("mcpi {\n trust any\n " + bad + "\n}"); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	for _, bad := range []Handler{
		{Config: edge.Config{TrustedIssuers: []string{"*"}, DelegationConfig: DelegationConfig{StatusListTTL: -1}}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, DelegationConfig: DelegationConfig{JSONLDContexts: map[string]string{"relative/ctx": "/a"}}}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, DelegationConfig: DelegationConfig{JSONLDContexts: map[string]string{"https://example.com/a": ""}}}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad.DelegationConfig)
		}
	}
	if !edge.IsCarrier("kya_os_delegation_chain") {
		t.Error("kya_os_delegation_chain is not a carrier")
	}
}

func TestLevel2Caddyfile(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name    string
		input   string
		want    Level2Config
		wantErr string
	}{
		{
			name: "every subdirective",
			input: `mcpi {
				level 2
				trust any
				edge_did did:web:edge.example.com
				signing_alg ES256
				assertion_ttl 2m
				assertion_form hash
				assertion_reuse off
				header_profile both
				upstream http://127.0.0.1:9000
				upstream_mcpi auto
				mcpi_probe_ttl 30s
				key_storage_key mcpi/other.json
				key_reload_interval 10s
				key_retention 10m
				key_publish_delay 45s
				reputation {
					score ` + testDID + ` 87
					score did:web:agent.example.com 0.5
					endpoint https://rep.example.com/score/{did}
					cache_ttl 1m
					timeout 500ms
				}
			}`,
			want: Level2Config{
				EdgeDID:           "did:web:edge.example.com",
				SigningAlg:        "ES256",
				AssertionTTL:      edge.Duration(2 * time.Minute),
				AssertionForm:     "hash",
				AssertionReuse:    &off,
				HeaderProfile:     "both",
				Upstream:          "http://127.0.0.1:9000",
				UpstreamMCPI:      "auto",
				MCPIProbeTTL:      edge.Duration(30 * time.Second),
				KeyStorageKey:     "mcpi/other.json",
				KeyReloadInterval: edge.Duration(10 * time.Second),
				KeyRetention:      edge.Duration(10 * time.Minute),
				KeyPublishDelay:   edge.Duration(45 * time.Second),
				Reputation: &ReputationConfig{
					Scores:   map[string]float64{testDID: 87, "did:web:agent.example.com": 50},
					Endpoint: "https://rep.example.com/score/{did}",
					CacheTTL: edge.Duration(time.Minute),
					Timeout:  edge.Duration(500 * time.Millisecond),
				},
			},
		},
		{
			name:  "signing key, reuse on, profile kya-os",
			input: "mcpi {\n trust any\n signing_key /etc/caddy/edge.jwk\n assertion_reuse on\n header_profile kya-os\n upstream_mcpi off\n}",
			want:  Level2Config{SigningKey: "/etc/caddy/edge.jwk", AssertionReuse: &on, HeaderProfile: "kya-os", UpstreamMCPI: "off"},
		},
		{name: "twice", input: "mcpi {\n edge_did did:web:a\n edge_did did:web:b\n}", wantErr: "edge_did already specified"},
		{name: "ttl twice", input: "mcpi {\n assertion_ttl 10s\n assertion_ttl 20s\n}", wantErr: "assertion_ttl already specified"},
		{name: "reuse twice", input: "mcpi {\n assertion_reuse on\n assertion_reuse on\n}", wantErr: "assertion_reuse already specified"},
		{name: "reputation twice", input: "mcpi {\n reputation {\n score " + testDID + " 1\n }\n reputation {\n score " + testDID + " 1\n }\n}", wantErr: "reputation already specified"},
		{name: "bad alg", input: "mcpi {\n signing_alg RS256\n}", wantErr: `signing_alg must be EdDSA or ES256, got "RS256"`},
		{name: "bad form", input: "mcpi {\n assertion_form vc\n}", wantErr: `assertion_form must be jws or hash, got "vc"`},
		{name: "bad profile", input: "mcpi {\n header_profile kya\n}", wantErr: `header_profile must be mcpi, kya-os or both, got "kya"`},
		{name: "bad mode", input: "mcpi {\n upstream_mcpi maybe\n}", wantErr: `upstream_mcpi must be on, off or auto, got "maybe"`},
		{name: "upstream with path", input: "mcpi {\n upstream http://127.0.0.1:9000/mcp\n}", wantErr: "must be an origin"},
		{name: "upstream relative", input: "mcpi {\n upstream 127.0.0.1:9000\n}", wantErr: "not an absolute"},
		{name: "missing arg", input: "mcpi {\n edge_did\n}", wantErr: "wrong argument count"},
		{name: "extra arg", input: "mcpi {\n upstream_mcpi on off\n}", wantErr: "wrong argument count"},
		{name: "bad duration", input: "mcpi {\n assertion_ttl soon\n}", wantErr: "invalid duration"},
		{name: "reputation empty", input: "mcpi {\n reputation {\n }\n}", wantErr: "at least one score or an endpoint"},
		{name: "reputation arg", input: "mcpi {\n reputation x {\n score " + testDID + " 1\n }\n}", wantErr: "wrong argument count"},
		{name: "score out of range", input: "mcpi {\n reputation {\n score " + testDID + " 101\n }\n}", wantErr: "outside 0..100"},
		{name: "score not a number", input: "mcpi {\n reputation {\n score " + testDID + " high\n }\n}", wantErr: "not a number"},
		{name: "score twice", input: "mcpi {\n reputation {\n score " + testDID + " 1\n score " + testDID + " 2\n }\n}", wantErr: "already specified"},
		{name: "reputation unknown", input: "mcpi {\n reputation {\n weight 1\n }\n}", wantErr: `unrecognized reputation subdirective "weight"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := parseForTest(t, tt.input, tt.wantErr, false)
			if !ok {
				return
			}
			if !reflect.DeepEqual(h.Level2Config, tt.want) {
				t.Errorf("got  %+v\nwant %+v", h.Level2Config, tt.want)
			}
		})
	}
}

// TestLevel2CaddyfileAdapt: the Level 2 fields are top-level JSON fields of
// the handler.
func TestLevel2CaddyfileAdapt(t *testing.T) {
	in := `:8080 {
	mcpi {
		level 2
		trust any
		edge_did did:web:edge.example.com
		assertion_ttl 30s
		upstream http://127.0.0.1:9000
		upstream_mcpi auto
		reputation {
			score did:web:agent.example.com 0.9
		}
	}
}
`
	want := `{
	"apps": {
		"http": {
			"servers": {
				"srv0": {
					"listen": [":8080"],
					"routes": [{
						"handle": [{
							"assertion_ttl": 30000000000,
							"edge_did": "did:web:edge.example.com",
							"handler": "mcpi",
							"level": 2,
							"reputation": {"scores": {"did:web:agent.example.com": 90}},
							"trusted_issuers": ["*"],
							"upstream": "http://127.0.0.1:9000",
							"upstream_mcpi": "auto"
						}]
					}]
				}
			}
		}
	}
}`
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(want), "", "\t"); err != nil {
		t.Fatal(err)
	}
	if !caddytest.CompareAdapt(t, "level2", in, "caddyfile", buf.String()) {
		t.Error("adapted JSON differs (diff above)")
	}
}

func TestValidateLevel2(t *testing.T) {
	ok := []Level2Config{
		{},
		{AssertionTTL: edge.Duration(300 * time.Second)},
		{UpstreamMCPI: "auto", Upstream: "https://api.example.com"},
		{KeyRetention: edge.Duration(91 * time.Second)},
		{Reputation: &ReputationConfig{Endpoint: "https://rep.example.com/x?did={did}"}},
	}
	bad := map[string]Level2Config{
		"edge DID":          {EdgeDID: "edge.example.com"},
		"edge DID fragment": {EdgeDID: "did:web:edge.example.com#key"},
		"alg":               {SigningAlg: "HS256"},
		"ttl too long":      {AssertionTTL: edge.Duration(301 * time.Second)},
		"ttl fraction":      {AssertionTTL: edge.Duration(1500 * time.Millisecond)},
		"form":              {AssertionForm: "vc"},
		"profile":           {HeaderProfile: "x"},
		"auto without url":  {UpstreamMCPI: "auto"},
		"upstream path":     {Upstream: "https://api.example.com/mcp"},
		"mode":              {UpstreamMCPI: "yes"},
		"retention short":   {KeyRetention: edge.Duration(89 * time.Second)},
		"reload short":      {KeyReloadInterval: edge.Duration(time.Millisecond)},
		"key and storage":   {SigningKey: "/k.jwk", KeyStorageKey: "k.json"},
		"storage key":       {KeyStorageKey: "../k.json"},
		"reputation empty":  {Reputation: &ReputationConfig{}},
		"reputation did":    {Reputation: &ReputationConfig{Scores: map[string]float64{"agent": 1}}},
		"reputation score":  {Reputation: &ReputationConfig{Scores: map[string]float64{testDID: 200}}},
		"endpoint no did":   {Reputation: &ReputationConfig{Endpoint: "https://rep.example.com/score"}},
		"endpoint relative": {Reputation: &ReputationConfig{Endpoint: "/score/{did}"}},
	}
	for i, c := range ok {
		h := Handler{Config: edge.Config{Level: 2, TrustedIssuers: []string{"*"}, Level2Config: c}}
		if err := h.Validate(); err != nil {
			t.Errorf("ok[%d]: %v", i, err)
		}
	}
	for name, c := range bad {
		h := Handler{Config: edge.Config{Level: 2, TrustedIssuers: []string{"*"}, Level2Config: c}}
		if err := h.Validate(); err == nil {
			t.Errorf("%s: Validate = nil", name)
		}
	}
}

func TestLevel3Caddyfile(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    Level3Config
		store   json.RawMessage // nonce_store
		wantErr string
	}{
		{name: "terminate", input: "handshake terminate", want: Level3Config{Handshake: "terminate"}},
		{name: "proxy", input: "handshake proxy", want: Level3Config{Handshake: "proxy"}},
		{name: "proxy one endpoint", input: "handshake proxy /rpc", want: Level3Config{Handshake: "proxy", HandshakeEndpoint: "/rpc"}},
		{name: "proxy two endpoints", input: "handshake proxy https://up.example/hs https://up.example/vf",
			want: Level3Config{Handshake: "proxy", HandshakeEndpoint: "https://up.example/hs", VerifyEndpoint: "https://up.example/vf"}},
		{name: "paths", input: "handshake_paths /hs /vf", want: Level3Config{HandshakePath: "/hs", VerifyPath: "/vf"}},
		{name: "methods", input: "handshake_methods mcpi/handshake mcpi/verify", want: Level3Config{HandshakeMethod: "mcpi/handshake", VerifyMethod: "mcpi/verify"}},
		{name: "one method", input: "handshake_methods hs", wantErr: "wrong argument count"},
		{name: "upstream_did", input: "upstream_did did:web:up.example", want: Level3Config{UpstreamDID: "did:web:up.example"}},
		{name: "memory store", input: "nonce_store memory", store: json.RawMessage(`{"backend":"memory"}`)},
		{name: "memory store bounded", input: "nonce_store memory 500", store: json.RawMessage(`{"backend":"memory","max_entries":500}`)},
		{name: "memory store block", input: "nonce_store memory {\n max_entries 7\n}", store: json.RawMessage(`{"backend":"memory","max_entries":7}`)},
		{name: "redis url", input: "nonce_store redis redis://:pw@127.0.0.1:6379/2",
			store: json.RawMessage(`{"backend":"redis","url":"redis://:pw@127.0.0.1:6379/2"}`)},
		{name: "redis block", input: "nonce_store redis {\n address 10.0.0.1:6380\n password {env.REDIS_PW}\n db 3\n tls\n key_prefix edge:\n timeout 250ms\n}",
			store: json.RawMessage(`{"backend":"redis","address":"10.0.0.1:6380","password":"{env.REDIS_PW}","db":3,"tls":true,"key_prefix":"edge:","timeout":250000000}`)},
		{name: "redis proxied challenges", input: "nonce_store redis {\n address 10.0.0.1:6379\n proxied_challenges 20000\n}",
			store: json.RawMessage(`{"backend":"redis","address":"10.0.0.1:6379","proxied_challenges":20000}`)},
		{name: "redis sentinel", input: "nonce_store redis {\n sentinel mymaster 10.0.0.1:26379 10.0.0.2:26379\n sentinel_password {env.SENTINEL_PW}\n wait_replicas 2 100ms\n pool_size 50\n}",
			store: json.RawMessage(`{"backend":"redis","addresses":["10.0.0.1:26379","10.0.0.2:26379"],"sentinel_master":"mymaster","sentinel_password":"{env.SENTINEL_PW}","pool_size":50,"wait_replicas":"2","wait_timeout":100000000}`)},
		{name: "redis cluster", input: "nonce_store redis {\n cluster 10.0.0.1:6379 10.0.0.2:6379\n tls\n tls_ca /etc/redis/ca.pem\n wait_replicas off\n}",
			store: json.RawMessage(`{"backend":"redis","addresses":["10.0.0.1:6379","10.0.0.2:6379"],"cluster":true,"tls":true,"tls_ca":"/etc/redis/ca.pem","wait_replicas":"off"}`)},
		{name: "challenge_ttl", input: "challenge_ttl 2m", want: Level3Config{ChallengeTTL: edge.Duration(2 * time.Minute)}},
		{name: "handshake_skew", input: "handshake_skew 30s", want: Level3Config{HandshakeSkew: edge.Duration(30 * time.Second)}},
		{name: "session_ttl", input: "session_ttl 5m", want: Level3Config{SessionTTL: edge.Duration(5 * time.Minute)}},
		{name: "discovery_ttl", input: "discovery_ttl 1h", want: Level3Config{DiscoveryTTL: edge.Duration(time.Hour)}},
		{name: "legacy pass", input: "legacy_handshake pass", want: Level3Config{LegacyHandshake: "pass"}},
		{name: "legacy verify", input: "legacy_handshake verify", want: Level3Config{LegacyHandshake: "verify"}},

		{name: "handshake without mode", input: "handshake", wantErr: "wrong argument count"},
		{name: "bad mode", input: "handshake relay", wantErr: "terminate or proxy"},
		{name: "terminate with endpoint", input: "handshake terminate /x", wantErr: "wrong argument count"},
		{name: "proxy three endpoints", input: "handshake proxy /a /b /c", wantErr: "wrong argument count"},
		{name: "proxy relative endpoint", input: "handshake proxy rpc", wantErr: "endpoint"},
		{name: "proxy ftp endpoint", input: "handshake proxy ftp://x/y", wantErr: "endpoint"},
		{name: "handshake twice", input: "handshake proxy\n handshake terminate", wantErr: "handshake already specified"},
		{name: "one path", input: "handshake_paths /hs", wantErr: "wrong argument count"},
		{name: "upstream_did twice", input: "upstream_did did:web:a\n upstream_did did:web:b", wantErr: "already specified"},
		{name: "store without backend", input: "nonce_store", wantErr: "wrong argument count"},
		{name: "unknown store", input: "nonce_store etcd", wantErr: "mcpi.nonce_stores.etcd"},
		{name: "store twice", input: "nonce_store memory\n nonce_store memory", wantErr: "nonce_store already specified"},
		{name: "bad max_entries", input: "nonce_store memory many", wantErr: "max_entries must be a positive integer"},
		{name: "redis without address", input: "nonce_store redis", wantErr: "url or address (one server), sentinel or cluster is required"},
		{name: "redis sentinel without sentinels", input: "nonce_store redis {\n sentinel mymaster\n}", wantErr: "sentinel needs the master's name"},
		{name: "redis cluster without nodes", input: "nonce_store redis {\n cluster\n}", wantErr: "cluster needs at least one node"},
		{name: "redis sentinel and cluster", input: "nonce_store redis {\n sentinel m a:1\n cluster b:2\n}", wantErr: "exclude each other"},
		{name: "redis url and sentinel", input: "nonce_store redis redis://a:1 {\n sentinel m a:1\n}", wantErr: "list the addresses there"},
		{name: "redis bad wait_replicas", input: "nonce_store redis {\n address a:1\n wait_replicas 0\n}", wantErr: "wait_replicas must be auto, off or a positive number"},
		{name: "redis wait_replicas off with timeout", input: "nonce_store redis {\n address a:1\n wait_replicas off 1s\n}", wantErr: "takes no timeout"},
		{name: "redis bad wait timeout", input: "nonce_store redis {\n address a:1\n wait_replicas 1 soon\n}", wantErr: "invalid timeout"},
		{name: "redis bad pool_size", input: "nonce_store redis {\n address a:1\n pool_size 0\n}", wantErr: "pool_size must be a positive integer"},
		{name: "redis bad proxied_challenges", input: "nonce_store redis {\n address a:1\n proxied_challenges 0\n}", wantErr: "proxied_challenges must be a positive integer"},
		{name: "redis url twice", input: "nonce_store redis redis://a:1 {\n url redis://b:2\n}", wantErr: "url already specified"},
		{name: "redis bad db", input: "nonce_store redis {\n address a:1\n db -1\n}", wantErr: "db must be"},
		{name: "redis unknown option", input: "nonce_store redis {\n address a:1\n replicas\n}", wantErr: "unrecognized redis"},
		{name: "bad duration", input: "challenge_ttl soon", wantErr: "invalid duration"},
		{name: "session_ttl twice", input: "session_ttl 1m\n session_ttl 2m", wantErr: "session_ttl already specified"},
		{name: "bad legacy", input: "legacy_handshake allow", wantErr: "pass or verify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcpi {\n level 3\n " + tt.input + "\n}"))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := h.Level3Config
			if !sameJSON(h.NonceStoreRaw, tt.store) {
				t.Errorf("nonce_store = %s, want %s", h.NonceStoreRaw, tt.store)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestLevel3Validate(t *testing.T) {
	ok := []Handler{
		{Config: edge.Config{TrustedIssuers: []string{"*"}, Level: 3}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, Level: 3, Level3Config: Level3Config{Handshake: "proxy", HandshakeEndpoint: "/hs", UpstreamDID: "did:web:up.example"}}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, Level: 3, Level3Config: Level3Config{Handshake: "terminate", SessionTTL: edge.Duration(time.Minute), LegacyHandshake: "pass"}}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, Level: 3, Level3Config: Level3Config{Handshake: "proxy", SessionTTL: edge.Duration(time.Minute)}}},
	}
	for _, h := range ok {
		if err := h.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", h.Level3Config, err)
		}
	}
	bad := []struct {
		h       Handler
		wantErr string
	}{
		{Handler{Config: edge.Config{Level3Config: Level3Config{Handshake: "terminate"}}}, "need `level 3`"},
		{Handler{Config: edge.Config{Level: 2, Level3Config: Level3Config{ChallengeTTL: edge.Duration(time.Minute)}}}, "need `level 3`"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{Handshake: "relay"}}}, "terminate or proxy"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{UpstreamDID: "did:web:x"}}}, "apply to `handshake proxy`"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{Handshake: "proxy", VerifyEndpoint: "/vf"}}}, "needs handshake_endpoint"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{Handshake: "proxy", HandshakeEndpoint: "rpc"}}}, "handshake endpoint"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{Handshake: "proxy", UpstreamDID: "web:x"}}}, "upstream_did"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{HandshakePath: "/same", VerifyPath: "/same"}}}, "must differ"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{HandshakePath: "hs"}}}, "absolute path"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{HandshakeMethod: "verify"}}}, "methods must differ"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{VerifyPath: "/.well-known/mcp-i.json"}}}, "reserved"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{ChallengeTTL: edge.Duration(time.Millisecond)}}}, "at least 1s"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{HandshakeSkew: -1}}}, "negative"},
		{Handler{Config: edge.Config{Level: 3, Level3Config: Level3Config{LegacyHandshake: "allow"}}}, "pass or verify"},
	}
	for _, tt := range bad {
		tt.h.TrustedIssuers = []string{"*"}
		err := tt.h.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.h.Level3Config, err, tt.wantErr)
		}
	}
}

func TestUnmarshalObservability(t *testing.T) {
	for _, c := range []struct {
		input        string
		off, denials bool
		err          string
	}{
		{"audit_log off", true, false, ""},
		{"audit_log on", false, false, ""},
		{"audit_log denials", false, true, ""},
		{"audit_log", false, false, "wrong argument count"},
		{"audit_log off on", false, false, "wrong argument count"},
		{"audit_log maybe", false, false, "must be on, denials or off"},
		{"audit_log off\naudit_log on", true, false, "already specified"},
		{"audit_log denials\naudit_log off", false, true, "already specified"},
		{"metrics off", false, false, `unrecognized mcpi subdirective "metrics"`},
	} {
		t.Run(c.input, func(t *testing.T) {
			h := &Handler{}
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcpi {\n" + c.input + "\n}"))
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("err = %v, want %q", err, c.err)
			}
			if c.err == "" && h.ObservabilityConfig.DisableAuditLog != c.off {
				t.Errorf("DisableAuditLog = %v, want %v", h.ObservabilityConfig.DisableAuditLog, c.off)
			}
			if c.err == "" && h.ObservabilityConfig.AuditDenialsOnly != c.denials {
				t.Errorf("AuditDenialsOnly = %v, want %v", h.ObservabilityConfig.AuditDenialsOnly, c.denials)
			}
		})
	}
}

func TestToolAnnotationsPolicyCaddyfile(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  *ToolAnnotationsPolicy
		err   string
	}{
		{name: "all classes", input: `mcpi {
			trust any
			tool_annotations_policy {
				read_only files:read
				destructive files:write admin
				other misc
			}
		}`, want: &ToolAnnotationsPolicy{ReadOnly: []string{"files:read"}, Destructive: []string{"files:write", "admin"}, Other: []string{"misc"}}},
		{name: "one class", input: "mcpi {\n trust any\n tool_annotations_policy {\n read_only r\n }\n}",
			want: &ToolAnnotationsPolicy{ReadOnly: []string{"r"}}},
		{name: "off by default", input: "mcpi {\n trust any\n}"},
		{name: "empty block", input: "mcpi {\n trust any\n tool_annotations_policy {\n }\n}", err: "no scopes for any class"},
		{name: "no block", input: "mcpi {\n trust any\n tool_annotations_policy\n}", err: "no scopes for any class"},
		{name: "inline args", input: "mcpi {\n trust any\n tool_annotations_policy read_only r\n}", err: "settings go in a block"},
		{name: "unknown class", input: "mcpi {\n trust any\n tool_annotations_policy {\n idempotent r\n }\n}", err: `unrecognized class "idempotent"`},
		{name: "class twice", input: "mcpi {\n trust any\n tool_annotations_policy {\n read_only a\n read_only b\n }\n}", err: "read_only already specified"},
		{name: "class without scopes", input: "mcpi {\n trust any\n tool_annotations_policy {\n destructive\n }\n}", err: "wrong argument count"},
		{name: "twice", input: "mcpi {\n trust any\n tool_annotations_policy {\n read_only a\n }\n tool_annotations_policy {\n other b\n }\n}", err: "already specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := parseForTest(t, tt.input, tt.err, true)
			if !ok {
				return
			}
			if !reflect.DeepEqual(h.ToolAnnotationsPolicy, tt.want) {
				t.Errorf("got %+v, want %+v", h.ToolAnnotationsPolicy, tt.want)
			}
		})
	}

	t.Run("JSON", func(t *testing.T) {
		for _, bad := range []*ToolAnnotationsPolicy{{}, {ReadOnly: []string{""}}} {
			h := Handler{Config: edge.Config{TrustedIssuers: []string{"did:example:x"}}}
			h.ToolAnnotationsPolicy = bad
			if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "tool_annotations_policy") {
				t.Errorf("%+v: %v", bad, err)
			}
		}
	})

}

func TestPolicyCaddyfile(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  PolicyConfig
		err   string // substring of the parse or Validate error
	}{
		{name: "tools, globs and settings", input: `mcpi {
			trust any
			tool echo {
				scopes echo:execute tools:read
			}
			tool files_* {
				scopes files:read
				require_presentation
			}
			tool public {
				allow_anonymous
			}
			tool bare
			tool_default allow
			tool_scope_convention
			consent_url https://consent.example.com/approve
			handshake_actions observe
			handshake_action_hosts auth.example.net *.login.example.org
			max_response_size 1MiB
		}`, want: PolicyConfig{
			Tools: []ToolPolicy{
				{Name: "echo", Scopes: []string{"echo:execute", "tools:read"}},
				{Name: "files_*", Scopes: []string{"files:read"}, RequirePresentation: true},
				{Name: "public", AllowAnonymous: true},
				{Name: "bare"},
			},
			ToolDefault:          "allow",
			ToolScopeConvention:  true,
			ConsentURL:           "https://consent.example.com/approve",
			HandshakeActions:     "observe",
			HandshakeActionHosts: []string{"auth.example.net", "*.login.example.org"},
			MaxResponseSize:      1 << 20,
		}},
		{name: "nothing set", input: "mcpi {\n trust any\n}", want: PolicyConfig{}},
		{name: "tool without name", input: "mcpi {\n trust any\n tool\n}", err: "wrong argument count"},
		{name: "tool with inline args", input: "mcpi {\n trust any\n tool echo echo:execute\n}", err: "settings go in a block"},
		{name: "duplicate tool", input: "mcpi {\n trust any\n tool echo\n tool echo\n}", err: `tool "echo" already specified`},
		{name: "duplicate glob", input: "mcpi {\n trust any\n tool a*\n tool a* {\n scopes x\n }\n}", err: `tool "a*" already specified`},
		{name: "scopes twice", input: "mcpi {\n trust any\n tool echo {\n scopes a\n scopes b\n }\n}", err: "scopes already specified"},
		{name: "scopes empty", input: "mcpi {\n trust any\n tool echo {\n scopes\n }\n}", err: "wrong argument count"},
		{name: "unknown tool setting", input: "mcpi {\n trust any\n tool echo {\n role admin\n }\n}", err: `unrecognized setting "role"`},
		{name: "anonymous with scopes", input: "mcpi {\n trust any\n tool echo {\n allow_anonymous\n scopes a\n }\n}", err: "allow_anonymous cannot be combined with scopes"},
		{name: "anonymous with presentation", input: "mcpi {\n trust any\n tool echo {\n allow_anonymous\n require_presentation\n }\n}", err: "allow_anonymous cannot be combined with require_presentation"},
		{name: "bad glob", input: "mcpi {\n trust any\n tool [a\n}", err: "syntax error in pattern"},
		{name: "tool_default bad", input: "mcpi {\n trust any\n tool_default maybe\n}", err: "tool_default must be allow or deny"},
		{name: "tool_default twice", input: "mcpi {\n trust any\n tool_default deny\n tool_default deny\n}", err: "tool_default already specified"},
		{name: "convention without rules", input: "mcpi {\n trust any\n tool_scope_convention\n}", err: "add `tool *`"},
		{name: "consent_url relative", input: "mcpi {\n trust any\n consent_url /consent\n}", err: "consent_url"},
		{name: "consent_url userinfo", input: "mcpi {\n trust any\n consent_url https://u:p@consent.example.com/\n}", err: "consent_url"},
		{name: "consent_url twice", input: "mcpi {\n trust any\n consent_url https://a.example\n consent_url https://b.example\n}", err: "already specified"},
		{name: "handshake_actions bad", input: "mcpi {\n trust any\n handshake_actions block\n}", err: "enforce, observe or off"},
		{name: "handshake_action_hosts URL", input: "mcpi {\n trust any\n handshake_action_hosts https://auth.example.net\n}", err: "not a host name"},
		{name: "handshake_action_hosts empty", input: "mcpi {\n trust any\n handshake_action_hosts\n}", err: "wrong argument count"},
		{name: "max_response_size bad", input: "mcpi {\n trust any\n max_response_size lots\n}", err: "invalid size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := parseForTest(t, tt.input, tt.err, true)
			if !ok {
				return
			}
			if !reflect.DeepEqual(h.PolicyConfig, tt.want) {
				t.Errorf("got %+v\nwant %+v", h.PolicyConfig, tt.want)
			}
		})
	}
}

func TestNonceStoreMemoryModule(t *testing.T) {
	ctx := bareContext(t)
	a, b := &MemoryNonceStore{MaxEntries: 3}, &MemoryNonceStore{MaxEntries: 3}
	for _, s := range []*MemoryNonceStore{a, b} {
		if err := s.Provision(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rec := challenge.Record{Challenge: "c", ExpiresAt: time.Now().Add(time.Minute)}
	if err := a.Put(context.Background(), "n1", rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	// One configuration, one store: what a reload provisions sees the
	// challenges of the config it replaces, even after that one is gone.
	if err := a.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Peek(context.Background(), "n1"); err != nil || got.Challenge != "c" {
		t.Fatalf("Peek = %+v, %v", got, err)
	}
	if got, err := b.Consume(context.Background(), "n1"); err != nil || got.Challenge != "c" {
		t.Fatalf("Consume = %+v, %v", got, err)
	}
	if _, err := b.Consume(context.Background(), "n1"); !errors.Is(err, challenge.ErrNonceNotFound) {
		t.Fatalf("second Consume = %v, want ErrNonceNotFound", err)
	}
	// Bounded: the fourth live challenge is refused, closed.
	for i := range 3 {
		if err := b.Put(context.Background(), "m"+string(rune('0'+i)), rec, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Put(context.Background(), "m9", rec, time.Minute); !errors.Is(err, challenge.ErrStoreUnavailable) {
		t.Fatalf("Put into a full store = %v, want ErrStoreUnavailable", err)
	}
	key := b.key
	if err := b.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, ok := nonceStores.References(key); ok {
		t.Error("store still pooled after the last Cleanup")
	}
	if err := b.Cleanup(); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
	if err := b.Put(context.Background(), "x", rec, time.Minute); !errors.Is(err, challenge.ErrStoreUnavailable) {
		t.Errorf("Put after Cleanup = %v", err)
	}
	if _, err := b.Peek(context.Background(), "x"); !errors.Is(err, challenge.ErrStoreUnavailable) {
		t.Errorf("Peek after Cleanup = %v", err)
	}
}

func TestNonceStoreRedisModule(t *testing.T) {
	redis := redistest.Start(t)
	ctx := bareContext(t)
	s := &RedisNonceStore{RedisConfig: challenge.RedisConfig{Address: redis.Addr(), KeyPrefix: "test:", Timeout: edge.Duration(300 * time.Millisecond)}}
	if err := s.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup() })
	// The URL form of the same server is another configuration.
	u := &RedisNonceStore{RedisConfig: challenge.RedisConfig{URL: "redis://" + redis.Addr() + "/0", KeyPrefix: "test:"}}
	if err := u.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Cleanup() })

	bg := context.Background()
	rec := challenge.Record{Challenge: "c", AgentDID: "did:key:z", ExpiresAt: time.Now().Add(time.Minute)}
	if err := s.Put(bg, "n1", rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := u.Put(bg, "n1", rec, time.Minute); !errors.Is(err, challenge.ErrNonceExists) {
		t.Fatalf("Put of a stored nonce through another client = %v, want ErrNonceExists", err)
	}
	if got, err := u.Peek(bg, "n1"); err != nil || got.AgentDID != "did:key:z" {
		t.Fatalf("Peek through the other client = %+v, %v", got, err)
	}
	if got, err := u.Consume(bg, "n1"); err != nil || got.AgentDID != "did:key:z" {
		t.Fatalf("Consume through the other client = %+v, %v", got, err)
	}
	if _, err := s.Consume(bg, "n1"); !errors.Is(err, challenge.ErrNonceNotFound) {
		t.Fatalf("replay = %v, want ErrNonceNotFound", err)
	}

	redis.Stop()
	if err := s.Put(bg, "n2", rec, time.Minute); !errors.Is(err, challenge.ErrStoreUnavailable) {
		t.Fatalf("Put with Redis down = %v, want ErrStoreUnavailable", err)
	}
	redis.Restart()
	if err := s.Put(bg, "n2", rec, time.Minute); err != nil {
		t.Fatalf("Put after Redis came back = %v", err)
	}

	if err := (&RedisNonceStore{}).Provision(ctx); err == nil {
		t.Error("Provision without url or address succeeded")
	}
	if err := (&RedisNonceStore{RedisConfig: challenge.RedisConfig{URL: "http://x"}}).Provision(ctx); err == nil {
		t.Error("Provision with an http URL succeeded")
	}
}

func TestRotateKeyCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := `{
		"storage": {"module": "file_system", "root": ` + jsonString(dir) + `},
		"apps": {"http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [
			{"handler": "mcpi", "level": 2, "trusted_issuers": ["*"], "key_storage_key": "edge/keys.json", "signing_alg": "ES256", "key_publish_delay": 45000000000}
		]}]}}}}
	}`
	cfgFile := filepath.Join(dir, "caddy.json")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	st := edgeKeyStorage{&certmagic.FileStorage{Path: dir}}
	ctx := context.Background()
	first, err := assertion.LoadOrCreateWithRetention(ctx, st, "edge/keys.json", 90*time.Second,
		func() (crypto.PrivateKey, error) { return edge.GenerateEdgeKey(edge.AlgEdDSA) })
	if err != nil {
		t.Fatal(err)
	}

	before := time.Now()
	out, _, err := runCmd(t, rotateKeyCommand(), "", "--config", cfgFile)
	if err != nil {
		t.Fatalf("rotate-key: %v", err)
	}
	var res struct {
		StorageKey string `json:"storage_key"`
		Published  []struct {
			Thumbprint string    `json:"thumbprint"`
			Alg        string    `json:"alg"`
			SignsFrom  time.Time `json:"signs_from"`
		} `json:"published"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	// The new key is published beside the old one, which signs until the
	// config's key_publish_delay has passed.
	const delay = 45 * time.Second
	if res.StorageKey != "edge/keys.json" || len(res.Published) != 2 ||
		res.Published[0].Thumbprint != first.Current().Thumbprint || res.Published[1].Alg != edge.AlgES256 ||
		res.Published[1].SignsFrom.Before(before.Add(delay)) || res.Published[1].SignsFrom.After(time.Now().Add(delay)) {
		t.Errorf("rotate-key output %s", out)
	}
	data, err := st.Load(ctx, "edge/keys.json")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := assertion.ParseKeySet(data)
	if err != nil {
		t.Fatal(err)
	}
	next := res.Published[1]
	if ks.Current().Thumbprint != first.Current().Thumbprint || ks.Retention() != 90*time.Second ||
		ks.CurrentAt(next.SignsFrom).Thumbprint != next.Thumbprint {
		t.Errorf("stored current %s retention %v, at %v %s", ks.Current().Thumbprint, ks.Retention(),
			next.SignsFrom, ks.CurrentAt(next.SignsFrom).Thumbprint)
	}

	// --publish-delay 0s switches at once.
	if out, _, err = runCmd(t, rotateKeyCommand(), "", "--config", cfgFile, "--publish-delay", "0s"); err != nil {
		t.Fatal(err)
	}
	if data, err = st.Load(ctx, "edge/keys.json"); err != nil {
		t.Fatal(err)
	}
	if ks, err = assertion.ParseKeySet(data); err != nil {
		t.Fatal(err)
	}
	if cur := ks.Current(); cur.Thumbprint == first.Current().Thumbprint || cur.Thumbprint == next.Thumbprint {
		t.Errorf("after --publish-delay 0s the stored set signs with %s: %s", cur.Thumbprint, out)
	}
	if _, _, err := runCmd(t, rotateKeyCommand(), "", "--config", cfgFile, "--publish-delay", "-1s"); err == nil {
		t.Error("--publish-delay -1s accepted")
	}

	// --key and --alg override; a bad --alg is refused.
	if _, _, err := runCmd(t, rotateKeyCommand(), "", "--config", cfgFile, "--key", "other.json", "--alg", "EdDSA"); err != nil {
		t.Fatal(err)
	}
	if !st.Exists(ctx, "other.json") {
		t.Error("--key ignored")
	}
	if _, _, err := runCmd(t, rotateKeyCommand(), "", "--config", cfgFile, "--alg", "RS256"); err == nil {
		t.Error("--alg RS256 accepted")
	}
}

func TestProvisionSharesDIDCache(t *testing.T) {
	handler := func(mod func(*Handler)) *Handler {
		h := &Handler{Config: edge.Config{TrustedIssuers: []string{edge.AnyIssuer}}}
		if mod != nil {
			mod(h)
		}
		if err := h.Provision(bareContext(t)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Cleanup() })
		return h
	}
	a := handler(nil)
	b := handler(nil)
	if a.cacheKey != b.cacheKey {
		t.Fatal("same settings, different cache keys")
	}
	if err := a.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if err := a.Cleanup(); err != nil { // idempotent: Caddy may call it after a failed Provision
		t.Fatal(err)
	}
	c := handler(func(h *Handler) { h.DIDCacheTTL = edge.Duration(time.Minute) })
	if c.cacheKey == b.cacheKey {
		t.Error("different settings share a cache")
	}
}

// TestPolicyJSONConfig: the JSON field names, and Validate on JSON configs
// the Caddyfile parser would have refused.
func TestPolicyJSONConfig(t *testing.T) {
	var h Handler
	in := `{"trusted_issuers":["*"],"tools":[{"name":"echo","scopes":["echo:execute"]},{"name":"pub","allow_anonymous":true}],
		"tool_default":"deny","tool_scope_convention":true,"consent_url":"https://c.example/x","handshake_actions":"off",
		"handshake_action_hosts":["a.example"],"max_response_size":1024}`
	if err := json.Unmarshal([]byte(in), &h); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(h.Tools) != 2 || h.Tools[1].AllowAnonymous != true || h.ToolDefault != "deny" || !h.ToolScopeConvention ||
		h.ConsentURL == "" || h.HandshakeActions != "off" || len(h.HandshakeActionHosts) != 1 || h.MaxResponseSize != 1024 {
		t.Errorf("decoded %+v", h.PolicyConfig)
	}

	bad := []struct {
		name string
		cfg  PolicyConfig
		err  string
	}{
		{"empty pattern", PolicyConfig{Tools: []ToolPolicy{{}}}, "empty pattern"},
		{"duplicate", PolicyConfig{Tools: []ToolPolicy{{Name: "a"}, {Name: "a"}}}, "listed twice"},
		{"empty scope", PolicyConfig{Tools: []ToolPolicy{{Name: "a", Scopes: []string{""}}}}, "empty scope"},
		{"anonymous with scopes", PolicyConfig{Tools: []ToolPolicy{{Name: "a", AllowAnonymous: true, Scopes: []string{"s"}}}}, "allow_anonymous"},
		{"anonymous with presentation", PolicyConfig{Tools: []ToolPolicy{{Name: "a", AllowAnonymous: true, RequirePresentation: true}}}, "contradicts"},
		{"default", PolicyConfig{ToolDefault: "open"}, "tool_default"},
		{"actions", PolicyConfig{HandshakeActions: "strict"}, "handshake_actions"},
		{"host", PolicyConfig{HandshakeActionHosts: []string{"a.example:443"}}, "handshake_action_hosts"},
		{"size", PolicyConfig{MaxResponseSize: -1}, "negative"},
		{"consent scheme", PolicyConfig{ConsentURL: "javascript:alert(1)"}, "consent_url"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			h := Handler{Config: edge.Config{TrustedIssuers: []string{edge.AnyIssuer}, PolicyConfig: tt.cfg}}
			if err := h.Validate(); err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}

func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// bareContext is a caddy.Context without a config, as in unit tests.
func bareContext(t testing.TB) caddy.Context {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestEdgeKeyStorageMissingKey: Caddy's storage, adapted, says a missing
// key is fs.ErrNotExist, which assertion relies on to create the key set.
func TestEdgeKeyStorageMissingKey(t *testing.T) {
	st := edgeKeyStorage{&certmagic.FileStorage{Path: t.TempDir()}}
	if _, err := st.Load(context.Background(), "mcpi/none.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing key: %v", err)
	}
}

// TestEdgeConfigCoversEveryField: every JSON setting reaches edge.Config
// (a field of the same name), and every setting of edge.Config can be
// given in JSON, so that the two sides cannot drift apart. Each field is
// set to a non-zero value and must arrive non-zero.
func TestEdgeConfigCoversEveryField(t *testing.T) {
	var h Handler
	fill(t, reflect.ValueOf(&h).Elem(), "Handler")
	h.NonceStoreRaw = nil // a Caddy module, handed to the edge as a store
	cfg := h.edgeConfig()
	var missing []string
	walkLeaves(reflect.ValueOf(cfg), "Config", func(path string, v reflect.Value) {
		if v.IsZero() {
			missing = append(missing, path)
		}
	})
	if len(missing) > 0 {
		t.Errorf("edge.Config fields the JSON config does not set: %v", missing)
	}
	var back []string
	walkLeaves(reflect.ValueOf(h), "Handler", func(path string, v reflect.Value) {
		name := path[strings.LastIndexByte(path, '.')+1:]
		// NonceStoreRaw is a Caddy module, handed to the edge as a store;
		// UserIDPlaceholder a Caddy placeholder, handed to it as the
		// SignedInUser hook.
		if name == "NonceStoreRaw" || name == "UserIDPlaceholder" {
			return
		}
		if !hasField(reflect.TypeOf(cfg), name) {
			back = append(back, path)
		}
	})
	if len(back) > 0 {
		t.Errorf("JSON settings without an edge.Config field: %v", back)
	}
}

// fill sets every exported leaf of v to a non-zero value.
func fill(t *testing.T, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("{}"))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), path)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, path)
		fill(t, e, path)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(0.5)
	default:
		t.Fatalf("%s: no filler for %s", path, v.Kind())
	}
}

// walkLeaves calls fn for every exported leaf field of v (descending into
// structs and pointers to structs).
func walkLeaves(v reflect.Value, path string, fn func(string, reflect.Value)) {
	switch {
	case v.Kind() == reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				walkLeaves(v.Field(i), path+"."+f.Name, fn)
			}
		}
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct && !v.IsNil():
		walkLeaves(v.Elem(), path, fn)
	default:
		fn(path, v)
	}
}

// hasField reports whether a struct type t has, at any depth, a field
// named name.
func hasField(t reflect.Type, name string) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == name || hasField(f.Type, name) {
			return true
		}
	}
	return false
}
