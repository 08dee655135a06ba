package main

// Setup: the binaries, the parties and their credentials, and the
// processes the bench measures (redis-server, the upstream, Caddy).

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// setup builds the binaries, mints the credentials, runs the verification
// floors and starts redis-server, the upstream and Caddy.
func (b *bench) setup(ctx context.Context) error {
	adminPort, err := b.pickPorts()
	if err != nil {
		return err
	}
	b.admin = "http://127.0.0.1:" + strconv.Itoa(adminPort)

	issuer, err1 := newParty()
	agent, err2 := newParty()
	user, err3 := newParty()
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	now := time.Now()
	// The audience is each server's own (servers.go).
	tmpl := vc.Template{
		AgentDID:  agent.did,
		UserDID:   user.did,
		Scopes:    []string{"greet:execute"},
		NotBefore: now.Add(-time.Minute),
		ExpiresAt: now.Add(6 * time.Hour),
	}
	if err := b.mintTokens(issuer, tmpl); err != nil {
		return err
	}
	b.agentDID = agent.did
	b.signer = proofSigner{key: agent.key, kid: agent.kid}
	b.proofs.file = filepath.Join(b.dir, "proofs.txt")
	b.plainProofs.file = filepath.Join(b.dir, "proofs-a.txt")
	b.agentSeedFile = filepath.Join(b.dir, "agent.seed")
	b.luaFile = filepath.Join(b.dir, "bench.lua")
	b.poolFile = filepath.Join(b.dir, "pool.txt")
	err1 = os.WriteFile(b.agentSeedFile, []byte(hex.EncodeToString(agent.key.(ed25519.PrivateKey).Seed())), 0o600)
	err2 = os.WriteFile(b.luaFile, luaScript, 0o600)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}

	// Build while minting: both take a few seconds.
	b.logf("building cmd/caddy and the bench peer; minting credentials")
	var buildErr error
	var wg sync.WaitGroup
	wg.Go(func() { buildErr = b.build(ctx) })
	if b.has(loadPool, false) {
		start := time.Now()
		aud, err := b.poolAudience()
		if err != nil {
			wg.Wait()
			return err
		}
		tmpl.Audience = []string{aud}
		size, err := mintPool(b.poolFile, b.opts.Pool, issuer, tmpl)
		if err != nil {
			wg.Wait()
			return err
		}
		b.rep.Pool = poolInfo{Size: b.opts.Pool, Mint: time.Since(start), TokenBytes: size}
		b.logf("minted %d fresh credentials in %v (%d bytes each)", b.opts.Pool, b.rep.Pool.Mint.Round(time.Millisecond), size)
	}
	wg.Wait()
	if buildErr != nil {
		return buildErr
	}
	b.rep.Machine.CaddyVersion = firstLine(exec.Command(b.caddyBin, "version").Output())
	if err := b.probeConfigs(issuer.did); err != nil {
		return err
	}

	if b.vcTest != "" {
		if err := b.runFloors(ctx); err != nil {
			return err
		}
	}

	redisURL := ""
	if b.usesRedis() {
		if redisURL, err = b.startRedis(); err != nil {
			return err
		}
	}
	if err := b.startUpstream(); err != nil {
		return err
	}
	cf := caddyfile(b.configs, b.ports(), adminPort, filepath.Join(b.dir, "storage"), b.upstream, issuer.did, redisURL)
	if err := b.startCaddy(cf); err != nil {
		return err
	}
	for _, c := range b.configs {
		if err := b.sanity(c); err != nil {
			return fmt.Errorf("configuration %s does not answer as it should before any load: %w", c.name, err)
		}
	}
	return b.calibrate()
}

// build compiles Caddy with the plugin (in the plugin's module) and the
// peer (in the bench's own module), and the vc test binary for the floors.
func (b *bench) build(ctx context.Context) error {
	binDir := b.dir + string(filepath.Separator)
	for _, step := range []struct{ dir, pkg string }{
		{b.opts.Root, "./cmd/caddy"},
		{filepath.Join(b.opts.Root, "integration", "bench"), "./peer"},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binDir, step.pkg)
		cmd.Dir = step.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s (in %s): %v\n%s", step.pkg, step.dir, err, out)
		}
	}
	b.caddyBin = filepath.Join(b.dir, "caddy")
	b.peerBin = filepath.Join(b.dir, "peer")
	out, err := exec.Command(b.caddyBin, "list-modules").Output()
	if err != nil || !bytes.Contains(out, []byte("http.handlers.mcpi")) {
		return fmt.Errorf("cmd/caddy does not register http.handlers.mcpi (err=%v)", err)
	}
	if b.opts.VCBenchTime != "" {
		vcTest := filepath.Join(b.dir, "vc.test")
		cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", vcTest, "./vc/")
		cmd.Dir = b.opts.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go test -c ./vc/: %v\n%s", err, out)
		}
		b.vcTest = vcTest
	}
	return nil
}

// probeConfigs adapts each configuration's site alone with the built
// Caddy. A configuration whose Caddyfile is refused fails the run, or, if
// it is optional (its feature is still landing), is skipped with a note.
func (b *bench) probeConfigs(issuerDID string) error {
	var kept []config
	for _, c := range b.configs {
		if c.mcpi == "" {
			kept = append(kept, c)
			continue
		}
		path := filepath.Join(b.dir, "probe-"+c.name+".Caddyfile")
		cf := caddyfile([]config{c}, map[string]int{c.name: 1}, 2, filepath.Join(b.dir, "probe-storage"), "127.0.0.1:1", issuerDID, "redis://127.0.0.1:1")
		if err := os.WriteFile(path, []byte(cf), 0o600); err != nil {
			return err
		}
		out, err := exec.Command(b.caddyBin, "adapt", "--config", path, "--adapter", "caddyfile").CombinedOutput()
		switch {
		case err == nil:
			kept = append(kept, c)
		case c.optional:
			b.note("configuration %s (%s) skipped: this Caddy does not accept its Caddyfile yet: %s", c.name, c.label, lastLine(out))
		default:
			return fmt.Errorf("configuration %s: caddy adapt refused its Caddyfile: %v\n%s\n%s", c.name, err, out, cf)
		}
	}
	b.configs = kept
	b.rep.Configs = kept
	return nil
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func (b *bench) startRedis() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(b.dir, "redis")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	cmd := b.pin.command(context.Background(), b.pin.other, "redis-server", "--port", strconv.Itoa(port),
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	if b.redis, err = startProcess("redis-server", filepath.Join(b.dir, "redis.log"), cmd); err != nil {
		return "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := b.redis.alive(); err != nil {
			return "", err
		}
		if redisPing(addr) {
			b.redisAddr = addr
			return "redis://" + addr, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("redis-server on %s did not answer PING within 10s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) startUpstream() error {
	cmd := b.pin.command(context.Background(), b.pin.other, b.peerBin, "upstream", "-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if b.up, err = startProcess("upstream", filepath.Join(b.dir, "upstream.log"), cmd); err != nil {
		return err
	}
	addr, err := readLine(stdout, "listening ", 10*time.Second)
	if err != nil {
		return fmt.Errorf("upstream: %v\n%s", err, b.up.output())
	}
	b.upstream = addr
	return nil
}

func (b *bench) startCaddy(cf string) error {
	path := filepath.Join(b.dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(cf), 0o600); err != nil {
		return err
	}
	cmd := b.pin.command(context.Background(), b.pin.edge, b.caddyBin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+b.dir, "XDG_DATA_HOME="+b.dir, "XDG_CONFIG_HOME="+b.dir)
	var err error
	if b.caddy, err = startProcess("caddy", filepath.Join(b.dir, "caddy.log"), cmd); err != nil {
		return err
	}
	for _, c := range b.configs {
		if err := waitHTTP(b.origin(c)+"/", b.caddy, 30*time.Second); err != nil {
			return fmt.Errorf("%v\nCaddyfile:\n%s", err, cf)
		}
	}
	return nil
}

// sanity sends one request of c from Go and checks the answer is the
// upstream's, so that a misconfigured route fails before any load.
func (b *bench) sanity(c config) error {
	if c.load == loadHandshake {
		return nil // the handshake driver checks every handshake it makes
	}
	if c.load == load2026 || c.load == loadProof {
		return b.sanity2026(c)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`
	if c.load == loadBody {
		body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"},"delegationToken":"` + b.token(c) + `"}}`
	}
	req, err := b.newPost(c, body)
	if err != nil {
		return err
	}
	if c.load != loadBody {
		req.Header.Set("Authorization", "Bearer "+b.token(c))
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != upstreamResult {
		return fmt.Errorf("HTTP %d %.300s", resp.StatusCode, got)
	}
	return nil
}

// newPost is a JSON POST of body to c's endpoint, as the bench's clients
// send it.
func (b *bench) newPost(c config, body string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, b.endpoint(c), strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return req, nil
}
