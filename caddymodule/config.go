package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/vc"
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
)

// Level2Config holds the Level 2 settings (identity headers for MCP-I-aware
// upstreams). It is embedded in Handler, so its fields are top-level JSON
// config fields of http.handlers.mcpi. They apply only at level 2 and 3.
type Level2Config struct {
	// DID the edge signs as (iss of the assertions, prefix of their kid,
	// id of the served did.json). Default: did:web:<request host>, the
	// port's colon %3A-encoded. Replicas behind one name get the same DID
	// either way; set it when one edge answers under several names.
	EdgeDID string `json:"edge_did,omitempty"`

	// File holding the edge's private signing key (an Ed25519 or P-256
	// private JWK, or PEM). Placeholders such as {env.*} are expanded.
	// Default: a key generated once and kept in Caddy's storage (under
	// key_storage_key), shared by every instance using that storage, and
	// rotated with `caddy mcpi rotate-key`. A key from a file is never
	// rotated by the edge; replacing the file drops the old key at once.
	SigningKey string `json:"signing_key,omitempty"`

	// Algorithm of a generated key: EdDSA or ES256. With signing_key it
	// must match the key if set. Default: EdDSA.
	SigningAlg string `json:"signing_alg,omitempty"`

	// Lifetime of an X-Verified-Delegation assertion, in whole seconds, at
	// most 5m; never past the delegation's own expiry. Default: 60s.
	AssertionTTL caddy.Duration `json:"assertion_ttl,omitempty"`

	// Form of X-Verified-Delegation: "jws" (a signed assertion) or "hash"
	// (only "sha256:<hex>" of the presented credential, for upstreams that
	// trust the edge by network position). Default: jws.
	AssertionForm string `json:"assertion_form,omitempty"`

	// Reuse a signed assertion for later requests with the same credential
	// and audience while more than half of its lifetime is left (the jti
	// then repeats). Turning it off signs every request. Default: true.
	AssertionReuse *bool `json:"assertion_reuse,omitempty"`

	// Headers sent upstream: "mcpi" (X-Agent-DID, X-User-DID,
	// X-Verified-Delegation, X-Agent-Reputation-Score), "kya-os"
	// (KYA-OS-Agent-DID, KYA-OS-Delegation-Proof) or "both". Default: mcpi.
	HeaderProfile string `json:"header_profile,omitempty"`

	// Origin of the upstream (scheme://host[:port]), e.g.
	// http://127.0.0.1:9000. It is the aud of the assertions (the host
	// alone for KYA-OS proofs) and where upstream_mcpi auto looks for
	// /.well-known/mcp-i.json. Required for auto. Default aud: the origin
	// of the request.
	Upstream string `json:"upstream,omitempty"`

	// Whether the upstream gets the identity headers: "on" (the operator
	// declares it MCP-I-aware), "off" (never: Level 1 behaviour), or
	// "auto": only while the upstream declares MCP-I support, by serving
	// /.well-known/mcp-i.json or by an MCP-I-Version response header (seen
	// through reverse_proxy). Default: on.
	UpstreamMCPI string `json:"upstream_mcpi,omitempty"`

	// How long what auto learned about the upstream is trusted before it is
	// probed again (in the background). Default: 5m.
	MCPIProbeTTL caddy.Duration `json:"mcpi_probe_ttl,omitempty"`

	// Where the reputation score of the agent comes from. Without it,
	// X-Agent-Reputation-Score is never sent.
	Reputation *ReputationConfig `json:"reputation,omitempty"`

	// Storage key of the generated key set. Default: mcpi/edge-keys.json.
	KeyStorageKey string `json:"key_storage_key,omitempty"`

	// How often the key set is reloaded from storage, so that a key rotated
	// by `caddy mcpi rotate-key` or another instance is picked up. Default:
	// 30s.
	KeyReloadInterval caddy.Duration `json:"key_reload_interval,omitempty"`

	// How long a rotated-out key stays in the JWKS. It must cover
	// assertion_ttl plus key_reload_interval (an instance may sign with the
	// old key until it reloads). Default: assertion_ttl +
	// key_reload_interval + 60s of clock skew. A stored key set keeps the
	// longest retention any instance asked for.
	KeyRetention caddy.Duration `json:"key_retention,omitempty"`
}

// Level3Config holds the Level 3 settings (the JSON-RPC challenge-response
// handshake, MCPI-WIRE §5). It is embedded in Handler, so its fields are
// top-level JSON config fields of http.handlers.mcpi. They apply only at
// level 3; Validate refuses them at a lower level.
type Level3Config struct {
	// How the edge takes part in the handshake. "terminate": the edge
	// answers handshake and verify itself and issues an edge session that
	// later requests present instead of the credential. "proxy": the edge
	// forwards both to the upstream's handshake endpoints, records the
	// upstream's challenges in its nonce store on the way back, and checks
	// every verify (signature, single use, credential) before the upstream
	// sees it, adding the Level 2 identity headers. Default: terminate.
	Handshake string `json:"handshake,omitempty"`

	// Proxy mode: the upstream's handshake endpoint, a path on the
	// route's upstream (forwarded through the rest of the route, normally
	// reverse_proxy, with the path rewritten; so is a URL on the Level 2
	// `upstream` origin) or an absolute http(s) URL of another origin
	// (forwarded by the edge's own client). Unset: discovered from the
	// upstream's /.well-known/mcp-i.json (fetched from the Level 2
	// `upstream` origin when set, else through the route), else the
	// services of upstream_did's document, else the edge's own handshake
	// paths on the route's upstream.
	HandshakeEndpoint string `json:"handshake_endpoint,omitempty"`
	// Proxy mode: the upstream's verify endpoint, as handshake_endpoint.
	// Default: handshake_endpoint when that is set (one JSON-RPC endpoint
	// for both methods).
	VerifyEndpoint string `json:"verify_endpoint,omitempty"`
	// Proxy mode: DID of the upstream; its document's services of type
	// mcp-i or JSON-RPC name the endpoints when /.well-known/mcp-i.json
	// does not.
	UpstreamDID string `json:"upstream_did,omitempty"`
	// Proxy mode: how long discovered endpoints are cached. Default: 5m.
	DiscoveryTTL caddy.Duration `json:"discovery_ttl,omitempty"`

	// Path at which the edge takes handshake calls. Default:
	// /api/mcp/handshake.
	HandshakePath string `json:"handshake_path,omitempty"`
	// Path at which the edge takes verify calls. Default: /api/mcp/verify.
	// Either path takes either method; the JSON-RPC method decides.
	VerifyPath string `json:"verify_path,omitempty"`
	// JSON-RPC method name of the handshake call. Default: handshake.
	HandshakeMethod string `json:"handshake_method,omitempty"`
	// JSON-RPC method name of the verify call. Default: verify.
	VerifyMethod string `json:"verify_method,omitempty"`

	// Where issued (terminate) or seen (proxy) challenges are kept until
	// answered, module namespace mcpi.nonce_stores: memory (default) or
	// redis (shared by replicas).
	NonceStoreRaw json.RawMessage `json:"nonce_store,omitempty" caddy:"namespace=mcpi.nonce_stores inline_key=backend"`

	// Lifetime of a challenge. Default: 5m.
	ChallengeTTL caddy.Duration `json:"challenge_ttl,omitempty"`
	// Tolerated difference between the signed timestamp and the edge's
	// clock. Default: 2m.
	HandshakeSkew caddy.Duration `json:"handshake_skew,omitempty"`
	// Lifetime of a handshake session, never beyond the credential's
	// expiry. Terminate mode: of the edge's session token. Proxy mode: of
	// the edge's binding of the upstream's session id to the verified
	// delegation (never beyond the upstream's expiresAt either). Default:
	// 15m.
	SessionTTL caddy.Duration `json:"session_ttl,omitempty"`

	// The older KYA handshake forms (JSON-RPC handshake with {nonce,
	// audience, timestamp, agentDid}, tools/call of _mcpi_handshake,
	// _kyaos_handshake or _mcpi) are always forwarded untouched.
	// "verify": like any request, they need a credential or an edge
	// session. "pass": without either, they are forwarded anyway, with no
	// identity (this is how a KYA agent obtains its credential). Default:
	// verify.
	LegacyHandshake string `json:"legacy_handshake,omitempty"`
}

// DelegationConfig holds the settings of revocation checking and Linked
// Data proofs. It is embedded in Handler, so its fields are top-level JSON
// config fields of http.handlers.mcpi.
type DelegationConfig struct {
	// How long a fetched status list (a credential's credentialStatus,
	// StatusList2021 or Bitstring Status List) is used before it is fetched
	// again. Default: 60s.
	StatusListTTL caddy.Duration `json:"status_list_ttl,omitempty"`

	// How long past its TTL a status list that can no longer be fetched
	// (or whose new copy does not verify) is still used. Default: 0: a
	// revocation status that cannot be established fails closed with 503
	// status_unavailable. A longer window keeps the edge up through a
	// status server outage, at the cost of learning of revocations later.
	StatusStaleIfError caddy.Duration `json:"status_stale_if_error,omitempty"`

	// Turn off JSON-LD Linked Data proofs (Ed25519Signature2018, the
	// JSON-LD Ed25519Signature2020, JsonWebSignature2020,
	// EcdsaSecp256k1Signature2019, eddsa-rdfc-2022). On by default; their
	// contexts are embedded, never fetched. Off, such credentials get 401
	// unsupported_format.
	DisableJSONLD bool `json:"disable_jsonld,omitempty"`

	// Extra JSON-LD context documents, context URL → file, read at
	// provisioning, for credentials naming contexts that are not embedded.
	// A context decides what a signature covers: supply only documents
	// you trust.
	JSONLDContexts map[string]string `json:"jsonld_contexts,omitempty"`

	// Fetch a chain's missing parent credentials from the https URL their
	// child names, within an allow-list of URL prefixes (chainfetch.go).
	// Off unless set.
	ChainFetch *ChainFetchConfig `json:"chain_fetch,omitempty"`

	// jsonldSet: the Caddyfile already gave `jsonld`; chainFetchSet:
	// `chain_fetch`.
	jsonldSet, chainFetchSet bool
}

// ChainFetchConfig turns on fetching a delegation chain's missing parents
// from the https URL their child names. A parent is fetched only when it
// was not presented (in a Verifiable Presentation or the
// KYA-OS-Delegation-Chain header) and its child's issuer is not trusted
// directly; what is fetched is verified like every other ancestor.
type ChainFetchConfig struct {
	// URL prefixes parents may be fetched from, each
	// https://host[:port]/path/ (path ending with "/", no query): a URL is
	// fetched only when it has the same host and port and its path lies
	// under the prefix's. Required: the URLs come from credentials anyone
	// can mint, and the edge must not be made to fetch from anywhere else.
	Allow []string `json:"allow,omitempty"`

	// Timeout of one fetch. Default: 5s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Largest parent credential fetched, in bytes. Default: 65536.
	MaxSize int64 `json:"max_size,omitempty"`

	// How long a fetched parent is reused before it is fetched again; it
	// is verified on every use all the same. Failures are remembered for
	// 5s (or this TTL if shorter). Default: 5m.
	CacheTTL caddy.Duration `json:"cache_ttl,omitempty"`
}

// ReputationConfig says where X-Agent-Reputation-Score comes from. The
// score is informational: a lookup that fails (timeout, error status, a body
// that is not {"score": <number>}, a number out of range) only leaves the
// header out, it never fails the request.
type ReputationConfig struct {
	// Fixed scores by agent DID, 0 to 100. They take precedence over the
	// endpoint. (The Caddyfile also accepts 0.0 to 1.0 written with a
	// decimal point, and scales it.)
	Scores map[string]float64 `json:"scores,omitempty"`

	// URL of a reputation service, with {did} where the agent DID goes
	// (URL-escaped). It is asked with GET and must answer 200 with
	// {"score": <number>}: 0 to 100, or 0.0 to 1.0 written with a decimal
	// point (scaled to 0 to 100). Answers are cached.
	Endpoint string `json:"endpoint,omitempty"`

	// How long an endpoint answer is cached. Failures are cached for at
	// most 30s. Default: 5m.
	CacheTTL caddy.Duration `json:"cache_ttl,omitempty"`

	// Timeout of one endpoint lookup; the request waits at most this long
	// for an uncached score. Default: 1s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
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
var caddyHooks = edge.Hooks{
	Identity: setPlaceholders,
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

// setPlaceholders sets the placeholders of a verified delegation:
// {http.auth.user.*}, which the access log picks up, and {mcpi.*}.
func setPlaceholders(r *http.Request, d *vc.Delegation) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	// A string in an interface is a copy on the heap: each DID is put in
	// one once, for all the placeholders that hold it.
	var agent, user any = d.AgentDID, d.UserDID
	repl.Set("http.auth.user.id", agent)
	repl.Set("http.auth.user.agent_did", agent)
	repl.Set("http.auth.user.user_did", user)
	repl.Set("mcpi.agent_did", agent)
	repl.Set("mcpi.user_did", user)
	repl.Set("mcpi.scopes", strings.Join(d.Scopes, " "))
	repl.Set("mcpi.delegation_id", d.DelegationID)
	repl.Set("mcpi.issuer", d.Issuer)
}
