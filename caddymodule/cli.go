package caddymodule

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/mcpi-edge/caddy-mcpi/mcpicli"
	"github.com/spf13/cobra"
)

// Registering a command is what Caddy plugins do from init (like
// RegisterModule): it only records the command, it runs nothing.
func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "mcpi",
		Usage: "keygen|issue|verify|rotate-key|sign-request|delegations [flags]",
		Short: "Issue and check MCP-I delegation credentials",
		Long: `
Operator tools for caddy-mcpi:

  keygen   create a signing key and print its did:key
  issue    sign a delegation credential (VC-JWT or JSON VC)
  verify   verify a delegation credential the way the mcpi handler does
  rotate-key  rotate the edge's Level 2 signing key in Caddy's storage
  sign-request  add a KYA-OS request proof to a JSON-RPC request
  delegations   list or revoke the delegations users gave (front door)

Keys are JWK files; keep them private.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.AddCommand(mcpicli.Keygen(), mcpicli.Issue(), verifyCommand(), rotateKeyCommand(), mcpicli.SignRequest(), mcpicli.DPoPProof(), delegationsCommand())
		},
	})
}

// verifyCommand is `verify`, reading configs as Caddy does.
func verifyCommand() *cobra.Command { return mcpicli.Verify(loadRoute) }
