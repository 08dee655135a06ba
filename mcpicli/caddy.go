package mcpicli

import (
	"context"
	"encoding/json"

	"github.com/mcpi-edge/caddy-mcpi/assertion"

	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
)

// Caddy is what the commands that read a Caddy config (verify --config,
// rotate-key, delegations) need of Caddy. caddymodule implements it; this
// package reads the JSON config, picks the route or handlers, and runs the
// command.
type Caddy interface {
	// LoadConfig reads a config file and adapts it to JSON, as `caddy run`
	// does.
	LoadConfig(configFile, adapter string) ([]byte, error)
	// Storage opens the storage a config's top-level "storage" names, or
	// Caddy's default file storage when raw is empty, and names it for
	// the command's output.
	Storage(raw json.RawMessage) (Storage, string, error)
	// NonceStore loads a handler's "nonce_store" module; close releases it.
	NonceStore(raw json.RawMessage) (store authserver.Store, close func(), err error)
	// EdgeConfig reads an mcpi handler's JSON config (without its
	// "handler" member) as Caddy decodes the module's, checks it as the
	// module does, and returns it as the edge takes it.
	EdgeConfig(handler []byte) (edge.Config, error)
	// ParseSite reads a site address as the Caddyfile writes it:
	// [scheme://]host[:port] or :port, without a path.
	ParseSite(site string) (scheme, host, port string, err error)
	// ListenPort is the port of a server's listen address, "" when it has
	// none or a range.
	ListenPort(listen string) string
	// MatchHost reports whether host matches a host matcher's pattern
	// (which may be a wildcard, as Caddy matches it).
	MatchHost(host, pattern string) bool
}

// Storage is Caddy's storage as the commands use it: where the edge keeps
// its key set (assertion.Storage) and the front door the delegations users
// gave (List, Delete: authserver.ListingStorage).
type Storage interface {
	assertion.Storage
	List(ctx context.Context, prefix string, recursive bool) ([]string, error)
	Delete(ctx context.Context, key string) error
}
