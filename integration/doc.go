// Package integration holds the end-to-end tests of caddy-mcpi: they build
// the real Caddy binary with the plugin (./cmd/caddy), run it as a process in
// front of the demo MCP server (integration/mcpserver) and drive it with the
// official MCP Go SDK client and raw JSON-RPC requests.
//
//	go test -race ./integration/
package integration
