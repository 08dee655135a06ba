package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

//go:embed bench.lua
var luaScript []byte

// upstreamResult is the peer upstream's one answer (peer.Result).
const upstreamResult = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Hello, Ada"}],"isError":false}}`

// Options configure one run of the bench.
type Options struct {
	// Root is the repository root (where go.mod is).
	Root string
	// Duration of one measured run of one configuration (whole seconds:
	// wrk's unit).
	Duration time.Duration
	// Rounds: every round runs every configuration once, each round in a
	// rotated order, so that a slow patch of the machine is shared out.
	Rounds int
	// Connections kept open by wrk (and by the handshake driver).
	Connections int
	// Threads of wrk.
	Threads int
	// Pool is the number of fresh credentials minted for configuration c.
	Pool int
	// Warmup runs every configuration once for this long before round 1,
	// unrecorded; 0 for none.
	Warmup time.Duration
	// Pprof takes a CPU profile of each of PprofConfigs for this long after
	// the rounds; 0 for none.
	Pprof time.Duration
	// PprofConfigs are the configurations profiled. The report summarizes
	// b's profile; every profile is kept as <config>.cpu.pprof (see -keep)
	// and its costliest functions per request are logged.
	PprofConfigs []string
	// VCBenchTime is the -benchtime of the vc verification floors; "" skips
	// them.
	VCBenchTime string
	// OpenLoop is the length of one run of the open-loop phase: after the
	// rounds, a and b alternately at a constant rate, as many rounds as
	// the closed-loop phase; 0 skips it.
	OpenLoop time.Duration
	// OpenLoopFrac is the open-loop rate as a fraction of a's peak: the
	// median req/s of a over the closed-loop rounds.
	OpenLoopFrac float64
	// OpenLoopRate, when positive, is the open-loop rate in req/s instead
	// of OpenLoopFrac × a's peak.
	OpenLoopRate int
	// Configs are the configuration names to run; nil for all.
	Configs []string
	// Pin runs Caddy on CPU 0 and the load side on CPU 1 with taskset.
	// Off by default: on this shared 2-core machine pinning left Caddy a
	// smaller and more variable share of its core (BENCHMARKS.md).
	Pin bool
	// Keep leaves the working directory (binaries, Caddyfile, pool,
	// profile, logs) in place and says where it is.
	Keep bool
	// Log receives progress lines.
	Log io.Writer
}

// DefaultOptions are the full run's settings: 3 rounds × 13
// configurations × 4 s, then 3 open-loop rounds × 2 configurations × 5 s,
// about four and a half minutes with a warm build cache (minting the
// 200k credentials of c takes 20–30 s of that, beside the build, and the
// request proofs of p and p-redis a few seconds before each of their runs).
func DefaultOptions() Options {
	return Options{
		Duration:     4 * time.Second,
		Rounds:       3,
		Connections:  32,
		Threads:      1,
		Pool:         200_000,
		Warmup:       time.Second,
		Pprof:        5 * time.Second,
		PprofConfigs: []string{"b"},
		VCBenchTime:  "1s",
		OpenLoop:     5 * time.Second,
		OpenLoopFrac: 0.5,
		Pin:          false,
		Log:          os.Stderr,
	}
}

// QuickOptions are the CI settings: 1 round × 1 s, a small pool, no
// warmup and no profile, and the open-loop phase for 1 s at a modest
// fixed rate. The figures mean nothing; the run proves every
// configuration and the open-loop driver work end to end.
func QuickOptions() Options {
	o := DefaultOptions()
	o.Duration = time.Second
	o.Rounds = 1
	o.Pool = 5_000
	o.Warmup = 0
	o.Pprof = 0
	o.VCBenchTime = "200x"
	o.OpenLoop = time.Second
	o.OpenLoopRate = quickOpenLoopRate
	return o
}

// quickOpenLoopRate is the open-loop rate of quick mode: well under what
// a busy CI machine serves, so that the check is of the driver, not of
// the machine.
const quickOpenLoopRate = 500

// sample is one measured run of one configuration.
type sample struct {
	Config string
	Round  int
	Load   loadResult
	// CPU is the user+system time Caddy used during the run.
	CPU time.Duration
	// Mallocs and Bytes are what Caddy allocated during the run (the
	// metrics scrapes' own allocations taken out).
	Mallocs, Bytes float64
	Upstream       routeStats
	// Handshakes: the ops are Level 3 handshakes (two calls each), not
	// requests.
	Handshakes bool
}

// Report is everything a run found.
type Report struct {
	Opts    Options
	Configs []config
	Samples []sample
	// Open is the open-loop phase: its rate, and its runs of a and b.
	Open     openLoopInfo
	OpenRuns []sample
	Machine  machine
	Floors   []floor
	Pool     poolInfo
	Proofs   proofPool
	Profile  *profileSummary
	Problems []string
	Notes    []string
	Started  time.Time
	Elapsed  time.Duration
}

type poolInfo struct {
	Size       int
	Mint       time.Duration
	TokenBytes int
	Used       int64
}

// Repeats is how many pool tokens were sent a second time (or more).
func (p poolInfo) Repeats() int64 { return max(0, p.Used-int64(p.Size)) }

// bench is the state of one run.
type bench struct {
	opts    Options
	configs []config
	pin     pinning
	dir     string
	rep     *Report

	caddyBin, peerBin, vcTest string
	base, admin, upstream     string
	caddy, up, redis          *process

	luaFile, poolFile string
	token             string // the reused credential (b, d, e)
	poolUsed          int64

	agentDID, agentSeedFile, agentCredFile string

	// signer signs the request proofs of p; proofs is the current pool.
	signer proofSigner
	proofs proofPool
	// peak is the fastest req/s measured so far (warmup included): what
	// a proof pool is sized for.
	peak float64

	// scrape is what one /metrics scrape allocates in Caddy.
	scrape memStats
}

// Run builds Caddy, starts everything, measures every configuration in
// rounds and returns the report. The error lists what went wrong; the
// report holds what was measured anyway.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Rounds < 1 || opts.Duration <= 0 || opts.Connections < 1 || opts.Threads < 1 || opts.Pool < 1 {
		return nil, errors.New("rounds, duration, connections, threads and pool must be positive")
	}
	if opts.OpenLoop < 0 || opts.OpenLoopRate < 0 || (opts.OpenLoop > 0 && opts.OpenLoopRate == 0 && !(opts.OpenLoopFrac > 0)) {
		return nil, errors.New("the open-loop duration and rate must not be negative, and its fraction of a's peak must be positive")
	}
	if opts.Connections < opts.Threads {
		return nil, errors.New("connections must be at least threads (wrk gives each thread connections/threads)")
	}
	cs, err := selectConfigs(opts.Configs)
	if err != nil {
		return nil, err
	}
	b := &bench{opts: opts, configs: cs, rep: &Report{Opts: opts, Configs: cs, Started: time.Now()}}
	defer func() { b.rep.Elapsed = time.Since(b.rep.Started) }()
	if err := b.checkTools(); err != nil {
		return nil, err
	}
	b.dir, err = os.MkdirTemp("", "caddy-mcpi-bench-")
	if err != nil {
		return nil, err
	}
	defer func() {
		b.stopAll()
		if opts.Keep {
			b.logf("working directory kept: %s", b.dir)
		} else {
			os.RemoveAll(b.dir)
		}
	}()
	b.rep.Machine = describeMachine(b.pin)
	if err := b.setup(ctx); err != nil {
		return b.rep, err
	}
	b.rep.Machine.CaddyGOMAXPROCS = b.caddyGOMAXPROCS()
	if err := b.measureAll(ctx); err != nil {
		return b.rep, err
	}
	b.rep.Machine.LoadEnd = loadAverage()
	if len(b.rep.Problems) > 0 {
		return b.rep, fmt.Errorf("%d problem(s):\n  %s", len(b.rep.Problems), strings.Join(b.rep.Problems, "\n  "))
	}
	return b.rep, nil
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.opts.Log, "bench: "+format+"\n", args...)
}

func (b *bench) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.rep.Problems = append(b.rep.Problems, msg)
	b.logf("PROBLEM: %s", msg)
}

func (b *bench) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.rep.Notes = append(b.rep.Notes, msg)
	b.logf("note: %s", msg)
}

// checkTools fails early, and clearly, on a missing tool.
func (b *bench) checkTools() error {
	need := []string{"go", "wrk"}
	if b.opts.Pin {
		if runtime.NumCPU() >= 2 {
			need = append(need, "taskset")
			b.pin = pinning{on: true, edge: "0", other: "1"}
		}
	}
	if b.usesRedis() {
		need = append(need, "redis-server")
	}
	var missing []string
	for _, t := range need {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: install with `apt-get install -y %s` (scripts/bench.sh and scripts/test.sh do)",
			strings.Join(missing, ", "), strings.ReplaceAll(strings.Join(missing, " "), "taskset", "util-linux"))
	}
	return nil
}

// has reports whether a selected configuration is driven by kind (and,
// with redis, uses the Redis store).
func (b *bench) has(kind loadKind, redis bool) bool {
	for _, c := range b.configs {
		if c.load == kind && (!redis || c.redis) {
			return true
		}
	}
	return false
}

// usesRedis reports whether a selected configuration's nonce store is
// the bench's redis-server.
func (b *bench) usesRedis() bool {
	for _, c := range b.configs {
		if c.redis {
			return true
		}
	}
	return false
}

func (b *bench) hasConfig(name string) bool {
	for _, c := range b.configs {
		if c.name == name {
			return true
		}
	}
	return false
}

func (b *bench) stopAll() {
	b.caddy.stop()
	b.up.stop()
	b.redis.stop()
}

// party is a key with its did:key.
type party struct {
	key crypto.PrivateKey
	did string
	kid string
}

func newParty() (party, error) {
	priv, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		return party{}, err
	}
	pub, err := didresolver.PublicKeyOf(priv)
	if err != nil {
		return party{}, err
	}
	did, kid, err := didresolver.KeyDID(pub)
	return party{key: priv, did: did, kid: kid}, err
}

// setup builds the binaries, mints the credentials, runs the verification
// floors and starts redis-server, the upstream and Caddy.
func (b *bench) setup(ctx context.Context) error {
	port, err1 := freePort()
	adminPort, err2 := freePort()
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	b.base = "http://127.0.0.1:" + strconv.Itoa(port)
	b.admin = "http://127.0.0.1:" + strconv.Itoa(adminPort)
	audience := "did:web:127.0.0.1%3A" + strconv.Itoa(port) // what the edge derives from Host

	issuer, err1 := newParty()
	agent, err2 := newParty()
	user, err3 := newParty()
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	now := time.Now()
	tmpl := vc.Template{
		AgentDID:  agent.did,
		UserDID:   user.did,
		Audience:  []string{audience},
		Scopes:    []string{"greet:execute"},
		NotBefore: now.Add(-time.Minute),
		ExpiresAt: now.Add(6 * time.Hour),
	}
	var err error
	if b.token, err = vc.IssueJWT(issuer.key, issuer.kid, tmpl); err != nil {
		return err
	}
	b.agentDID = agent.did
	b.signer = proofSigner{key: agent.key, kid: agent.kid, audience: audience}
	b.proofs.file = filepath.Join(b.dir, "proofs.txt")
	b.agentSeedFile = filepath.Join(b.dir, "agent.seed")
	b.agentCredFile = filepath.Join(b.dir, "agent.jwt")
	b.luaFile = filepath.Join(b.dir, "bench.lua")
	b.poolFile = filepath.Join(b.dir, "pool.txt")
	err1 = os.WriteFile(b.agentSeedFile, []byte(hex.EncodeToString(agent.key.(ed25519.PrivateKey).Seed())), 0o600)
	err2 = os.WriteFile(b.agentCredFile, []byte(b.token), 0o600)
	err3 = os.WriteFile(b.luaFile, luaScript, 0o600)
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}

	// Build while minting: both take a few seconds.
	b.logf("building cmd/caddy and the bench peer; minting credentials")
	var buildErr error
	var wg sync.WaitGroup
	wg.Go(func() { buildErr = b.build(ctx) })
	if b.has(loadPool, false) {
		start := time.Now()
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
	cf := caddyfile(b.configs, port, adminPort, filepath.Join(b.dir, "storage"), b.upstream, issuer.did, redisURL)
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

// build compiles Caddy with the plugin and the peer in one go build, and
// the vc test binary for the floors.
func (b *bench) build(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", b.dir+string(filepath.Separator),
		"./cmd/caddy", "./integration/bench/peer")
	cmd.Dir = b.opts.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/caddy ./integration/bench/peer: %v\n%s", err, out)
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

// probeConfigs adapts each configuration's route alone with the built
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
		cf := caddyfile([]config{c}, 1, 2, filepath.Join(b.dir, "probe-storage"), "127.0.0.1:1", issuerDID, "redis://127.0.0.1:1")
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
	if err := waitHTTP(b.base+"/", b.caddy, 30*time.Second); err != nil {
		return fmt.Errorf("%v\nCaddyfile:\n%s", err, cf)
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
	req, err := http.NewRequest(http.MethodPost, b.base+"/"+c.name+"/mcp", nil)
	if err != nil {
		return err
	}
	if c.load == loadBody {
		body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"},"delegationToken":"` + b.token + `"}}`
	} else {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	req.Body = io.NopCloser(strings.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
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

// calibrate measures what one /metrics scrape allocates in Caddy, to take
// it out of every run's figures.
func (b *bench) calibrate() error {
	var ms []memStats
	for range 4 {
		m, err := scrapeMemStats(b.admin)
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	n := float64(len(ms) - 1)
	b.scrape = memStats{(ms[len(ms)-1].mallocs - ms[0].mallocs) / n, (ms[len(ms)-1].bytes - ms[0].bytes) / n}
	return nil
}

// measureAll runs the warmup, the rounds and the profile.
func (b *bench) measureAll(ctx context.Context) error {
	n := len(b.configs)
	if b.opts.Warmup > 0 {
		b.logf("warmup: every configuration for %v, not recorded", b.opts.Warmup)
		for _, c := range b.configs {
			if _, err := b.measure(ctx, c, -1, b.opts.Warmup); err != nil {
				return err
			}
		}
	}
	for r := range b.opts.Rounds {
		order := make([]string, 0, n)
		for i := range n {
			order = append(order, b.configs[(i+r)%n].name)
		}
		b.logf("round %d/%d: %s", r+1, b.opts.Rounds, strings.Join(order, " "))
		for i := range n {
			c := b.configs[(i+r)%n]
			s, err := b.measure(ctx, c, r, b.opts.Duration)
			if err != nil {
				return err
			}
			b.rep.Samples = append(b.rep.Samples, s)
			b.logf("  %-7s %s", c.name, s.brief())
		}
	}
	if err := b.openLoopPhase(ctx); err != nil {
		return err
	}
	b.rep.Pool.Used = b.poolUsed
	if b.rep.Pool.Repeats() > 0 {
		b.note("configuration c sent %d credentials from a pool of %d: %d were repeats", b.poolUsed, b.rep.Pool.Size, b.rep.Pool.Repeats())
	}
	if b.opts.Pprof > 0 {
		for _, name := range b.opts.PprofConfigs {
			if !b.hasConfig(name) {
				b.note("no profile of %s: the configuration is not selected", name)
				continue
			}
			p, err := b.profile(ctx, name)
			if err != nil {
				b.problem("profile of %s: %v", name, err)
				continue
			}
			if name == "b" {
				b.rep.Profile = p
			}
		}
	}
	return nil
}

// roundProfile is measure's round for the run under a CPU profile.
const roundProfile = -2

// measure runs c once for d and takes Caddy's CPU time and allocations
// around it. Round -1 is the warmup, roundProfile the run under a profile.
func (b *bench) measure(ctx context.Context, c config, round int, d time.Duration) (sample, error) {
	where, counter := c.name, "wrk"
	switch {
	case round >= 0:
		where += " round " + strconv.Itoa(round+1)
	case round == roundProfile:
		where += " profile"
	default:
		where += " warmup"
	}
	if c.load == loadHandshake {
		counter = "the handshake driver"
	}
	if c.load == loadProof {
		if err := b.mintProofs(c, d); err != nil {
			return sample{}, err
		}
	}
	s, err := b.measureLoad(c, round, where, counter, func() (loadResult, error) {
		if c.load == loadHandshake {
			return b.runHandshakes(ctx, c, d)
		}
		return b.runWrk(ctx, c, d)
	})
	if err == nil && c.load != loadHandshake && s.Load.Seconds > 0 {
		b.peak = max(b.peak, float64(s.Load.Ops)/s.Load.Seconds)
		if c.load == loadProof {
			b.proofsUsed(where, s.Load.TokensUsed)
			b.rep.Proofs = b.proofs
		}
	}
	return s, err
}

// measureLoad runs one load of c and takes Caddy's CPU time and
// allocations and the upstream's counters around it; what went wrong is
// recorded as a problem of where. counter names what counted the
// responses.
func (b *bench) measureLoad(c config, round int, where, counter string, run func() (loadResult, error)) (sample, error) {
	s := sample{Config: c.name, Round: round, Handshakes: c.load == loadHandshake}
	up0, err1 := upstreamStats(b.upstream)
	m0, err2 := scrapeMemStats(b.admin)
	cpu0, err3 := cpuTime(b.caddy.cmd.Process.Pid)
	if err := errors.Join(err1, err2, err3); err != nil {
		return s, err
	}
	res, err := run()
	if err != nil {
		return s, err
	}
	cpu1, err1 := cpuTime(b.caddy.cmd.Process.Pid)
	m1, err2 := scrapeMemStats(b.admin)
	up1, err3 := upstreamStats(b.upstream)
	if err := errors.Join(err1, err2, err3, b.caddy.alive()); err != nil {
		return s, err
	}
	s.Load = res
	s.CPU = cpu1 - cpu0
	s.Mallocs = m1.mallocs - m0.mallocs - b.scrape.mallocs
	s.Bytes = m1.bytes - m0.bytes - b.scrape.bytes
	s.Upstream = up1[c.name].minus(up0[c.name])

	if res.Ops == 0 {
		b.problem("%s: no request completed", where)
	}
	if res.Failed > 0 {
		b.problem("%s: %d failed (%s)", where, res.Failed, res.FirstError)
	}
	if c.load != loadHandshake && s.Upstream.Requests < res.Ops {
		b.problem("%s: %s counted %d responses but the upstream saw %d requests", where, counter, res.Ops, s.Upstream.Requests)
	}
	if c.check != nil {
		if err := c.check(s.Upstream); err != nil {
			b.problem("%s: %v", where, err)
		}
	}
	return s, nil
}

func (s sample) brief() string {
	unit := "req"
	if s.Handshakes {
		unit = "hs"
	}
	ops := float64(max(s.Load.Ops, 1))
	return fmt.Sprintf("%8.0f %s/s  p50 %-8v p99 %-8v cpu %6.1fµs/op  %6.1f allocs/op  %d failed",
		float64(s.Load.Ops)/s.Load.Seconds, unit, s.Load.P50, s.Load.P99,
		float64(s.CPU.Microseconds())/ops, s.Mallocs/ops, s.Load.Failed)
}

// caddyGOMAXPROCS reads Caddy's GOMAXPROCS from its runtime metrics; 0 if
// they do not say.
func (b *bench) caddyGOMAXPROCS() int {
	resp, err := metricsClient.Get(b.admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "go_sched_gomaxprocs_threads "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(n)
		}
	}
	return 0
}

func firstLine(out []byte, err error) string {
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return l
}
