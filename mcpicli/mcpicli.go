// Package mcpicli holds the operator commands of caddy-mcpi (keygen, issue,
// verify, rotate-key, sign-request, dpop-proof, delegations) as cobra
// commands that import no Caddy: caddymodule registers them as
// `caddy mcpi …`, and lends the commands that read a Caddy config what only
// Caddy can do (Caddy: loading and adapting the config, opening its storage
// and nonce store, reading a site address).
package mcpicli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/ldproof"
	"github.com/spf13/cobra"
)

// Keygen is `keygen`: a new signing key and its did:key.
func Keygen() *cobra.Command {
	var keyType, out string
	cmd := &cobra.Command{
		Use:   "keygen [--type ed25519|p256|secp256k1] [--out <file>]",
		Short: "Create a signing key and print its did:key",
		Long: `Creates a private key and prints {"did", "kid", "private_jwk"} as JSON.
With --out, the private JWK is written to that file (mode 0600, never
overwriting an existing file) and only the DID is printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			priv, err := didresolver.GenerateKey(didresolver.KeyType(keyType))
			if err != nil {
				return err
			}
			pub, err := didresolver.PublicKeyOf(priv)
			if err != nil {
				return err
			}
			did, kid, err := didresolver.KeyDID(pub)
			if err != nil {
				return err
			}
			jwk, err := didresolver.MarshalPrivateJWK(priv, kid)
			if err != nil {
				return err
			}
			if out != "" {
				if err := writeNewFile(out, append(jwk, '\n')); err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), did)
				return err
			}
			res, err := json.MarshalIndent(struct {
				DID        string          `json:"did"`
				KID        string          `json:"kid"`
				PrivateJWK json.RawMessage `json:"private_jwk"`
			}{did, kid, jwk}, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(res))
			return err
		},
	}
	cmd.Flags().StringVar(&keyType, "type", string(didresolver.Ed25519), "key type: ed25519, p256 or secp256k1")
	cmd.Flags().StringVar(&out, "out", "", "write the private JWK to this file instead of stdout")
	return cmd
}

// writeNewFile refuses to overwrite: clobbering a signing key by a typo would
// orphan every credential it issued.
func writeNewFile(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Issue is `issue`: a delegation credential signed by a key file.
func Issue() *cobra.Command {
	var (
		keyFile, agent, user, format, ttl, cnfJKT string
		audience, scopes                          []string
	)
	cmd := &cobra.Command{
		Use:   "issue --issuer-key <jwk file> --agent <did> [--user <did>] --audience <id>[,<id>] --scopes a,b --ttl 1h [--format jwt|json]",
		Short: "Sign a delegation credential and print it",
		Long: `Signs a DelegationCredential from the issuer (the key's DID) to the agent and
prints it: a VC-JWT (--format jwt, the default) or an MCP-I JSON VC with an
Ed25519Signature2020 proof (--format json, Ed25519 keys only).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keyData, err := os.ReadFile(keyFile)
			if err != nil {
				return err
			}
			priv, kid, err := didresolver.ParsePrivateJWK(keyData)
			if err != nil {
				return fmt.Errorf("reading issuer key: %w", err)
			}
			if kid == "" {
				// A JWK written elsewhere may have no kid: name the key by its
				// did:key, which is what keygen would have done.
				pub, err := didresolver.PublicKeyOf(priv)
				if err != nil {
					return err
				}
				if _, kid, err = didresolver.KeyDID(pub); err != nil {
					return err
				}
			}
			lifetime, err := parseDuration(ttl)
			if err != nil || lifetime <= 0 {
				return fmt.Errorf("--ttl: invalid duration %q", ttl)
			}
			now := time.Now()
			t := vc.Template{
				AgentDID:  agent,
				UserDID:   user,
				Audience:  splitList(audience),
				Scopes:    splitList(scopes),
				NotBefore: now,
				ExpiresAt: now.Add(lifetime),
				CnfJKT:    cnfJKT,
			}
			var cred string
			switch format {
			case "jwt":
				cred, err = vc.IssueJWT(priv, kid, t)
			case "json":
				edKey, ok := priv.(ed25519.PrivateKey)
				if !ok {
					return errors.New("--format json needs an Ed25519 issuer key")
				}
				var b []byte
				b, err = vc.IssueJSON(edKey, kid, t)
				cred = string(b)
			default:
				return fmt.Errorf("--format must be jwt or json, got %q", format)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), cred)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "issuer-key", "", "private JWK file of the issuer (from keygen --out)")
	f.StringVar(&agent, "agent", "", "DID of the agent the authority is delegated to")
	f.StringVar(&user, "user", "", "DID of the user on whose behalf the agent acts")
	f.StringSliceVar(&audience, "audience", nil, "audience(s) the credential is bound to, comma-separated")
	f.StringSliceVar(&scopes, "scopes", nil, "scopes granted, comma-separated")
	f.StringVar(&ttl, "ttl", "1h", "lifetime of the credential")
	f.StringVar(&format, "format", "jwt", "jwt or json")
	f.StringVar(&cnfJKT, "cnf-jkt", "", "bind the credential to the agent's DPoP key: its thumbprint (dpop-proof --thumbprint); jwt only")
	for _, name := range []string{"issuer-key", "agent", "audience"} {
		_ = cmd.MarkFlagRequired(name) // fails only for unknown flags
	}
	return cmd
}

// ErrInvalidCredential: `verify` printed why the credential is invalid (the
// command exits 1).
var ErrInvalidCredential = errors.New("invalid credential")

// RouteLoader finds the mcpi route of a config file (adapted by adapter,
// chosen by site) and returns its edge and the host it answers to, for
// `verify --config`. The host supplies it: reading a config is its own.
type RouteLoader func(configFile, adapter, site string) (e *edge.Handler, host string, err error)

// Verify is `verify`: a credential checked as the edge checks it, alone or
// (with load, --config) as one route of a config would.
func Verify(load RouteLoader) *cobra.Command {
	var (
		trust, audience           []string
		allowPrivate              bool
		configFile, adapter, site string
	)
	cmd := &cobra.Command{
		Use: "verify [--config <file> [--adapter <name>] [--site <address>]] [--trust <did>,…|any] " +
			"[--audience <id>] [--allow-private-did-web] <file|->",
		Short: "Verify a delegation credential",
		Long: `Verifies a credential (a VC-JWT, JSON VC or presentation, from a file or "-"
for stdin) like the mcpi handler does, and prints the delegation as JSON. An
invalid credential prints "invalid: <reason>" on stderr, then what happened,
and exits 1.

With --config, the credential is verified as the mcpi route of that config
would verify it: with the route's trust, audiences (or those derived from the
site's host), required scopes, require_presentation, credential lifetime
rules, JSON-LD contexts, chain fetching and revocation settings. --site
chooses the route by its site address ([scheme://]host[:port], or :port with
the host agents use before it) when the config has several. The config is read
like "caddy run" reads it (a file named Caddyfile*, or --adapter, is adapted).
Not applied: a Level 3 presentation nonce (the challenge is not at hand) and
per-tool policies (they depend on the tool called).

Without --config: without --trust, every issuer whose DID resolves is
accepted, and a credential that names an audience is only accepted with a
matching --audience.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if configFile == "" && (site != "" || adapter != "") {
				return errors.New("--site and --adapter need --config")
			}
			if configFile != "" && (len(trust) > 0 || len(audience) > 0 || allowPrivate) {
				return errors.New("--trust, --audience and --allow-private-did-web cannot be combined with --config: the route's settings apply")
			}
			raw, err := readCredential(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			var d *vc.Delegation
			if configFile != "" {
				e, host, err := load(configFile, adapter, site)
				if err != nil {
					return err
				}
				d, err = e.VerifyCredential(ctx, raw, host)
				_ = e.Close() // it started nothing that outlives it
				if err != nil {
					return invalidCredential(cmd, err)
				}
			} else {
				if d, err = verifyStandalone(ctx, raw, trust, audience, allowPrivate); err != nil {
					if errors.Is(err, errSetup) {
						return err
					}
					return invalidCredential(cmd, err)
				}
			}
			out, err := json.MarshalIndent(d, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(out))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&configFile, "config", "c", "", "verify as the mcpi route of this config would")
	f.StringVarP(&adapter, "adapter", "a", "", "name of the config adapter to apply (with --config)")
	f.StringVar(&site, "site", "", "site address of the route (with --config), when the config has several mcpi routes")
	f.StringSliceVar(&trust, "trust", nil, "trusted issuer DIDs, comma-separated, or any (without --config)")
	f.StringSliceVar(&audience, "audience", nil, "audience(s) this verifier answers to (without --config)")
	f.BoolVar(&allowPrivate, "allow-private-did-web", false, "let did:web reach private addresses over http, tests only (without --config)")
	return cmd
}

// errSetup marks a verifyStandalone error that is not the credential's.
var errSetup = errors.New("verifier setup")

// verifyStandalone verifies raw with the flags' settings and the handler's
// defaults otherwise.
func verifyStandalone(ctx context.Context, raw []byte, trust, audience []string, allowPrivate bool) (*vc.Delegation, error) {
	res := didresolver.New(
		didresolver.WithAllowPrivateAddresses(allowPrivate),
		didresolver.WithAllowHTTP(allowPrivate),
	)
	// Linked Data proofs too, as the handler verifies them by default.
	ld, err := ldproof.New()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSetup, err)
	}
	opts := []vc.Option{vc.WithLinkedDataVerifier(ld)}
	if issuers := splitList(trust); len(issuers) > 0 && !(len(issuers) == 1 && issuers[0] == "any") {
		opts = append(opts, vc.WithTrustedIssuers(issuers...))
	}
	var checks []vc.CheckOption
	if auds := splitList(audience); len(auds) > 0 {
		checks = append(checks, vc.ForAudience(auds...))
	}
	return vc.NewVerifier(res, opts...).Verify(ctx, raw, checks...)
}

// invalidCredential prints why the credential was refused: the reason a
// request would get, what happened, and for an inline JSON-LD context what
// the operator can do about it.
func invalidCredential(cmd *cobra.Command, err error) error {
	w := cmd.ErrOrStderr()
	fmt.Fprintln(w, "invalid:", vc.Reason(err))
	fmt.Fprintln(w, " ", err)
	if errors.Is(err, ldproof.ErrInlineContext) {
		fmt.Fprintln(w, "  No setting accepts inline contexts: have the issuer publish its context at a URL,"+
			" name it in @context, and serve the document with jsonld_context <url> <file>.")
	}
	// The reason is printed; cobra must not print it again, nor the usage
	// (the invocation was fine).
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	return ErrInvalidCredential
}

// maxCLICredential bounds what verify reads; the verifier's own limit is
// smaller, this only keeps a wrong file from being slurped whole.
const maxCLICredential = 1 << 20

func readCredential(stdin io.Reader, name string) ([]byte, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxCLICredential+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCLICredential {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxCLICredential)
	}
	return bytes.TrimSpace(b), nil
}

// splitList flattens flag values that may also be comma-separated and drops
// empty items.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// parseDuration reads a Go duration, or whole days as "<n>d", as Caddy's
// durations are written.
func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
