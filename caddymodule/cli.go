package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/certmagic"
	"github.com/spf13/cobra"

	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/mcpicli"
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

func verifyCommand() *cobra.Command      { return mcpicli.Verify(mcpicli.Routes(cliCaddy{})) }
func rotateKeyCommand() *cobra.Command   { return mcpicli.RotateKey(cliCaddy{}) }
func delegationsCommand() *cobra.Command { return mcpicli.Delegations(cliCaddy{}) }

// cliCaddy is what the commands need of Caddy (mcpicli.Caddy).
type cliCaddy struct{}

func (cliCaddy) LoadConfig(configFile, adapter string) ([]byte, error) {
	cfgJSON, _, _, err := caddycmd.LoadConfig(configFile, adapter)
	return cfgJSON, err
}

func (cliCaddy) Storage(raw json.RawMessage) (mcpicli.Storage, string, error) {
	if len(raw) == 0 {
		return edgeKeyStorage{caddy.DefaultStorage}, fmt.Sprint(caddy.DefaultStorage), nil
	}
	top := struct {
		StorageRaw json.RawMessage `json:"storage,omitempty" caddy:"namespace=caddy.storage inline_key=module"`
	}{StorageRaw: raw}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	val, err := ctx.LoadModule(&top, "StorageRaw")
	if err != nil {
		return nil, "", fmt.Errorf("loading storage module: %v", err)
	}
	st, err := val.(caddy.StorageConverter).CertMagicStorage()
	if err != nil {
		return nil, "", fmt.Errorf("creating storage value: %v", err)
	}
	return edgeKeyStorage{st}, fmt.Sprint(st), nil
}

func (cliCaddy) NonceStore(raw json.RawMessage) (authserver.Store, func(), error) {
	holder := struct {
		NonceStoreRaw json.RawMessage `json:"nonce_store,omitempty" caddy:"namespace=mcpi.nonce_stores inline_key=backend"`
	}{NonceStoreRaw: raw}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	mod, err := ctx.LoadModule(&holder, "NonceStoreRaw")
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("loading the nonce store: %v", err)
	}
	store, ok := mod.(authserver.Store)
	if !ok {
		cancel()
		return nil, nil, fmt.Errorf("the nonce store %T keeps no bindings", mod)
	}
	return store, cancel, nil
}

func (cliCaddy) EdgeConfig(handler []byte) (edge.Config, error) {
	h := new(Handler)
	if err := caddy.StrictUnmarshalJSON(handler, h); err != nil {
		return edge.Config{}, err
	}
	if err := h.Validate(); err != nil {
		return edge.Config{}, err
	}
	return h.edgeConfig(), nil
}

func (cliCaddy) ParseSite(site string) (scheme, host, port string, err error) {
	addr, err := httpcaddyfile.ParseAddress(site)
	if err == nil && addr.Path != "" {
		err = errors.New("a site address has no path")
	}
	return addr.Scheme, addr.Host, addr.Port, err
}

func (cliCaddy) ListenPort(l string) string {
	na, err := caddy.ParseNetworkAddress(l)
	if err != nil || na.StartPort != na.EndPort || na.IsUnixNetwork() {
		return ""
	}
	return strconv.FormatUint(uint64(na.StartPort), 10)
}

func (cliCaddy) MatchHost(host, pattern string) bool { return certmagic.MatchWildcard(host, pattern) }

var _ mcpicli.Caddy = cliCaddy{}
