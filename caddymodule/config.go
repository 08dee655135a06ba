package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// The JSON config of http.handlers.mcpi. The settings without durations are
// edge's own types; those with durations are declared here with
// caddy.Duration (which reads "5m" as well as nanoseconds) and mapped onto
// edge's by field name (edgeConfig).
type (
	// PolicyConfig holds the MCP-aware authorization settings.
	PolicyConfig = edge.PolicyConfig
	// ToolPolicy is the rule for the tools whose name matches Name.
	ToolPolicy = edge.ToolPolicy
	// ToolAnnotationsPolicy gives scopes by tool annotation class.
	ToolAnnotationsPolicy = edge.ToolAnnotationsPolicy
	// ObservabilityConfig holds the metrics and audit log settings.
	ObservabilityConfig = edge.ObservabilityConfig
	// ProofConfig holds the KYA-OS extension settings (request and
	// response proofs, the declaration gate).
	ProofConfig = edge.ProofConfig
)

// Level2Config is the JSON form of edge.Level2Config, which documents each
// field (and docs/configuration.md each setting); durations are
// caddy.Duration.
type Level2Config struct {
	EdgeDID           string            `json:"edge_did,omitempty"`
	SigningKey        string            `json:"signing_key,omitempty"`
	SigningAlg        string            `json:"signing_alg,omitempty"`
	AssertionTTL      caddy.Duration    `json:"assertion_ttl,omitempty"`
	AssertionForm     string            `json:"assertion_form,omitempty"`
	AssertionReuse    *bool             `json:"assertion_reuse,omitempty"`
	HeaderProfile     string            `json:"header_profile,omitempty"`
	Upstream          string            `json:"upstream,omitempty"`
	UpstreamMCPI      string            `json:"upstream_mcpi,omitempty"`
	MCPIProbeTTL      caddy.Duration    `json:"mcpi_probe_ttl,omitempty"`
	Reputation        *ReputationConfig `json:"reputation,omitempty"`
	KeyStorageKey     string            `json:"key_storage_key,omitempty"`
	KeyReloadInterval caddy.Duration    `json:"key_reload_interval,omitempty"`
	KeyRetention      caddy.Duration    `json:"key_retention,omitempty"`
	KeyPublishDelay   caddy.Duration    `json:"key_publish_delay,omitempty"`
}

// Level3Config is the JSON form of edge.Level3Config, which documents each
// field (and docs/configuration.md each setting); durations are
// caddy.Duration.
type Level3Config struct {
	Handshake         string         `json:"handshake,omitempty"`
	HandshakeEndpoint string         `json:"handshake_endpoint,omitempty"`
	VerifyEndpoint    string         `json:"verify_endpoint,omitempty"`
	UpstreamDID       string         `json:"upstream_did,omitempty"`
	DiscoveryTTL      caddy.Duration `json:"discovery_ttl,omitempty"`
	HandshakePath     string         `json:"handshake_path,omitempty"`
	VerifyPath        string         `json:"verify_path,omitempty"`
	HandshakeMethod   string         `json:"handshake_method,omitempty"`
	VerifyMethod      string         `json:"verify_method,omitempty"`
	// Where presentations' single-use records, and at Level 3 the
	// challenges and proxy session bindings, are kept: a module of
	// namespace mcpi.nonce_stores, memory (default) or redis (shared by
	// replicas). Handed to the edge as edge.WithNonceStore.
	NonceStoreRaw   json.RawMessage `json:"nonce_store,omitempty" caddy:"namespace=mcpi.nonce_stores inline_key=backend"`
	ChallengeTTL    caddy.Duration  `json:"challenge_ttl,omitempty"`
	HandshakeSkew   caddy.Duration  `json:"handshake_skew,omitempty"`
	SessionTTL      caddy.Duration  `json:"session_ttl,omitempty"`
	LegacyHandshake string          `json:"legacy_handshake,omitempty"`
}

// DelegationConfig is the JSON form of edge.DelegationConfig, which documents each
// field (and docs/configuration.md each setting); durations are
// caddy.Duration.
type DelegationConfig struct {
	StatusListTTL      caddy.Duration    `json:"status_list_ttl,omitempty"`
	StatusStaleIfError caddy.Duration    `json:"status_stale_if_error,omitempty"`
	DisableJSONLD      bool              `json:"disable_jsonld,omitempty"`
	JSONLDContexts     map[string]string `json:"jsonld_contexts,omitempty"`
	ChainFetch         *ChainFetchConfig `json:"chain_fetch,omitempty"`
	// jsonldSet: the Caddyfile already gave `jsonld`; chainFetchSet:
	// `chain_fetch`.
	jsonldSet, chainFetchSet bool
}

// ChainFetchConfig is the JSON form of edge.ChainFetchConfig, which documents each
// field (and docs/configuration.md each setting); durations are
// caddy.Duration.
type ChainFetchConfig struct {
	Allow    []string       `json:"allow,omitempty"`
	Timeout  caddy.Duration `json:"timeout,omitempty"`
	MaxSize  int64          `json:"max_size,omitempty"`
	CacheTTL caddy.Duration `json:"cache_ttl,omitempty"`
}

// ReputationConfig is the JSON form of edge.ReputationConfig, which documents each
// field (and docs/configuration.md each setting); durations are
// caddy.Duration.
type ReputationConfig struct {
	Scores   map[string]float64 `json:"scores,omitempty"`
	Endpoint string             `json:"endpoint,omitempty"`
	CacheTTL caddy.Duration     `json:"cache_ttl,omitempty"`
	Timeout  caddy.Duration     `json:"timeout,omitempty"`
}

// edgeConfig is h's configuration as edge.Config: every field of the same
// name, caddy.Duration as time.Duration. TestEdgeConfigCoversEveryField
// keeps the two sides in step.
func (h *Handler) edgeConfig() edge.Config {
	var cfg edge.Config
	copyFields(reflect.ValueOf(&cfg).Elem(), reflect.ValueOf(h).Elem())
	return cfg
}

// copyFields copies the exported fields of src into the fields of the same
// name of dst, descending into structs, pointers to structs, slices and
// maps whose types differ; fields without a counterpart are skipped.
func copyFields(dst, src reflect.Value) {
	if src.Type().AssignableTo(dst.Type()) {
		dst.Set(src)
		return
	}
	switch src.Kind() {
	case reflect.Struct:
		for i := 0; i < src.NumField(); i++ {
			f := src.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Anonymous {
				if d := dst.FieldByName(f.Name); d.IsValid() {
					copyFields(d, src.Field(i))
				}
				continue
			}
			if d := dst.FieldByName(f.Name); d.IsValid() && d.CanSet() {
				copyFields(d, src.Field(i))
			}
		}
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		dst.Set(reflect.New(dst.Type().Elem()))
		copyFields(dst.Elem(), src.Elem())
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		dst.Set(reflect.MakeSlice(dst.Type(), src.Len(), src.Len()))
		for i := 0; i < src.Len(); i++ {
			copyFields(dst.Index(i), src.Index(i))
		}
	default:
		if src.Type().ConvertibleTo(dst.Type()) {
			dst.Set(src.Convert(dst.Type()))
			return
		}
		panic(fmt.Sprintf("mcpi: config field of type %s has no mapping to %s", src.Type(), dst.Type()))
	}
}

// caddyHooks give the edge what Caddy knows of a request.
// Identity is set per handler (placeholders.go).
var caddyHooks = edge.Hooks{
	RequestID: func(r *http.Request) string {
		// {http.request.uuid} is generated on first use and kept for the
		// request; using it also adds it to the access log entry as
		// "uuid", which is how an audit entry and an access log entry are
		// matched.
		if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
			id, _ := repl.GetString("http.request.uuid")
			return id
		}
		return ""
	},
	ClientIP: func(r *http.Request) string {
		ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
		return ip
	},
	TrustedProxy: func(r *http.Request) bool {
		trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
		return trusted
	},
	Original: func(r *http.Request) (string, *url.URL) {
		orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
		if !ok {
			return "", nil
		}
		return orig.Method, orig.URL
	},
	UpstreamHeader: func(r *http.Request, name string) (string, bool) {
		// reverse_proxy leaves the upstream's response headers in
		// {http.reverse_proxy.header.*}.
		repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if !ok || repl == nil {
			return "", false
		}
		return repl.GetString("http.reverse_proxy.header." + name)
	},
}
