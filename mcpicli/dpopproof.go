package mcpicli

import (
	"crypto"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/spf13/cobra"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
)

// DPoPProof is `dpop-proof`: makes the DPoP proof (RFC 9449) for one
// request with a DPoP-bound credential, so that an operator can try a
// bound credential with curl; or, with --thumbprint, prints the key's
// thumbprint and did:jwk, what `issue --cnf-jkt` and `--agent` take.
func DPoPProof() *cobra.Command {
	var keyFile, method, url, token string
	var thumbprint bool
	cmd := &cobra.Command{
		Use:   "dpop-proof --key <agent.jwk> (--method M --url U [--token <credential>] | --thumbprint)",
		Short: "Make a DPoP proof for one request, or print a key's DPoP thumbprint",
		Long: `Signs a DPoP proof (RFC 9449) with the agent's private JWK (Ed25519 or P-256)
for one request: --method and --url as the client sends them (query and
fragment are dropped), --token the credential sent with it ("-" reads it
from stdin). A proof is good for one request, for 60 seconds: make it right
before sending.

  caddy mcpi dpop-proof --key agent.jwk --thumbprint     # jkt, then did:jwk
  VC=$(caddy mcpi issue --issuer-key user.jwk --agent <did:jwk> --cnf-jkt <jkt> \
       --audience https://mcp.example.com)
  curl -H "Authorization: DPoP $VC" \
       -H "DPoP: $(caddy mcpi dpop-proof --key agent.jwk --method POST \
                   --url https://mcp.example.com/mcp --token "$VC")" \
       -H 'Content-Type: application/json' --data @call.json https://mcp.example.com/mcp

--thumbprint prints two lines: the key's RFC 7638 thumbprint (cnf.jkt) and
its did:jwk (the agent DID the edge's authorization server gives it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keyFile == "" {
				return errors.New("--key is required")
			}
			data, err := os.ReadFile(keyFile)
			if err != nil {
				return err
			}
			priv, _, err := didresolver.ParsePrivateJWK(data)
			if err != nil {
				return fmt.Errorf("%s: %w", keyFile, err)
			}
			signer, ok := priv.(crypto.Signer)
			if !ok {
				return fmt.Errorf("%s: not a signing key", keyFile)
			}
			if thumbprint {
				pub, err := jwk.FromRaw(signer.Public())
				if err != nil {
					return err
				}
				jkt, err := dpop.Thumbprint(pub)
				if err != nil {
					return err
				}
				did, err := didresolver.JWKDID(signer.Public())
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n%s\n", jkt, did)
				return err
			}
			if method == "" || url == "" {
				return errors.New("--method and --url are required (or --thumbprint)")
			}
			if token == "-" {
				b, err := readCredential(cmd.InOrStdin(), "-")
				if err != nil {
					return err
				}
				token = strings.TrimSpace(string(b))
			}
			proof, err := dpop.NewProof(signer, method, url, token, time.Now())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), proof)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "key", "", "the agent's private JWK, Ed25519 or P-256 (caddy mcpi keygen --out)")
	f.StringVar(&method, "method", "", "the request's HTTP method")
	f.StringVar(&url, "url", "", "the request's URL, as the client sends it")
	f.StringVar(&token, "token", "", `the credential sent with the proof ("-": read it from stdin)`)
	f.BoolVar(&thumbprint, "thumbprint", false, "print the key's thumbprint and did:jwk instead of a proof")
	return cmd
}
