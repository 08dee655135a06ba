package mcpicli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// SignRequest is `sign-request`: adds a KYA-OS request proof to a JSON-RPC
// request, so that an operator can try a proof-protected route with curl.
func SignRequest() *cobra.Command {
	var keyFile, audience, kid string
	var ttl time.Duration
	var cnf bool
	cmd := &cobra.Command{
		Use:   "sign-request --agent-key <agent.jwk> --audience <did> [request.json|-]",
		Short: "Add a KYA-OS request proof to a JSON-RPC request",
		Long: `Reads a JSON-RPC request (a file, or stdin with - or no argument), signs it
with the agent's private JWK and prints it with the proof in
params._meta["org.kya-os/request-proof"]. Nothing outside params._meta
changes. --audience is the DID of the route (its edge_did, or upstream_did).
The proof is single use and valid for at most 60 seconds: sign right before
sending.

  caddy mcpi sign-request --agent-key agent.jwk --audience did:web:mcp.example.com call.json |
    curl -H 'Content-Type: application/json' -H "KYA-OS-Delegation-Credential: $VC" \
         --data-binary @- https://mcp.example.com/mcp`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" || audience == "" {
				return errors.New("--agent-key and --audience are required")
			}
			data, err := os.ReadFile(keyFile)
			if err != nil {
				return err
			}
			priv, jwkKID, err := didresolver.ParsePrivateJWK(data)
			if err != nil {
				return fmt.Errorf("%s: %w", keyFile, err)
			}
			if kid == "" {
				kid = jwkKID
			}
			if kid == "" {
				pub, err := didresolver.PublicKeyOf(priv)
				if err != nil {
					return err
				}
				if _, kid, err = didresolver.KeyDID(pub); err != nil {
					return err
				}
			}
			name := "-"
			if len(args) == 1 {
				name = args[0]
			}
			body, err := readCredential(cmd.InOrStdin(), name)
			if err != nil {
				return err
			}
			out, _, err := kyaos.SignRequest(body, priv, kyaos.SignOptions{KID: kid, Audience: audience, TTL: ttl, Cnf: cnf})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), strings.TrimSpace(string(out)))
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "agent-key", "", "the agent's private JWK (caddy mcpi keygen --out)")
	cmd.Flags().StringVar(&audience, "audience", "", "the route's DID: edge_did, or upstream_did when set")
	cmd.Flags().StringVar(&kid, "kid", "", "verification method id (default: the JWK's kid, else the did:key's)")
	cmd.Flags().DurationVar(&ttl, "ttl", 60*time.Second, "validity window, at most 60s")
	cmd.Flags().BoolVar(&cnf, "cnf", false, "add cnf.jkt, the key's thumbprint")
	return cmd
}
