// Command mcpi-demo runs a small MCP server (Streamable HTTP, official Go SDK)
// to put behind the caddy-mcpi edge:
//
//	go run ./cmd/mcpi-demo &
//	go run ./cmd/caddy run --config Caddyfile.example --adapter caddyfile
//
// Tools: greet (name → "Hello, <name>"), whoami (the identity headers the
// server received), count (n progress notifications over the SSE response
// stream), and one resource, mcpi-demo://about. GET /healthz answers "ok".
//
// It serves the Go SDK's stateless handler, which speaks both protocol
// eras: MCP 2026-07-28 clients (server/discover, no initialize, no session)
// and 2025-11-25 clients (initialize, then each request on a throwaway
// session; no Mcp-Session-Id is issued and GET answers 405, which 2025
// clients accept as "no server-initiated stream"). -stateful brings back
// sessions, for 2025 clients only (level 3 handshake sessions, resumable
// GET streams).
//
// It binds to loopback by default: it trusts whatever reaches it, so only the
// edge should be able to reach it.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/mcpiverify"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "listen address (MCP endpoint at "+mcpserver.Path+")")
	interval := flag.Duration("count-interval", 300*time.Millisecond, "pause between two progress notifications of the count tool")
	allowAnyHost := flag.Bool("allow-any-host", false, "disable the SDK's DNS-rebinding guard (needed if a proxy forwards a non-localhost Host header to this loopback listener)")
	verbose := flag.Bool("v", false, "log MCP SDK activity")
	stateful := flag.Bool("stateful", false, "serve the SDK's stateful handler (Mcp-Session-Id, GET stream): 2025-11-25 clients only")
	edgeJWKS := flag.String("edge-jwks", "", "the edge's JWKS URL (e.g. http://localhost:8080/.well-known/jwks.json): whoami then verifies the edge's X-Verified-Delegation assertion")
	audience := flag.String("audience", "", "this server's identifier, the aud the edge signs assertions for (default: http://<addr>)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts := mcpserver.Options{CountInterval: *interval, AllowAnyHost: *allowAnyHost, Stateless: !*stateful}
	if *edgeJWKS != "" {
		aud := *audience
		if aud == "" {
			aud = "http://" + *addr
		}
		v, err := mcpiverify.NewVerifier(mcpiverify.WithJWKSURL(*edgeJWKS), mcpiverify.WithAudience(aud))
		if err != nil {
			logger.Error("edge verifier", "error", err)
			os.Exit(2)
		}
		opts.EdgeVerifier = v
	}
	if *verbose {
		opts.Logger = logger
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		logger.Error("listen", "addr", *addr, "err", err)
		os.Exit(1)
	}
	srv := &http.Server{
		Handler: mcpserver.Handler(opts),
		// No WriteTimeout: SSE responses (count, the standalone GET stream)
		// legitimately stay open.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()

	logger.Info("mcpi-demo listening", "mcp", "http://"+ln.Addr().String()+mcpserver.Path, "health", "http://"+ln.Addr().String()+mcpserver.HealthPath)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("serve", "err", err)
		os.Exit(1)
	}
}
