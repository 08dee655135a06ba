package main

import (
	"context"
	"crypto"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
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
		Duration:     3 * time.Second,
		Rounds:       3,
		Connections:  32,
		Threads:      1,
		Pool:         200_000,
		Warmup:       time.Second,
		Pprof:        5 * time.Second,
		PprofConfigs: []string{"a", "b", "c", "p"},
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
	o.Pool = 50_000 // c and (a) beside it each take theirs: up to about 20k each on a quiet machine
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
	// Pair is, for a run of (a), the configuration it was paired with in
	// its round: that configuration's ratios are taken against it.
	Pair string
	// Kind is the request the run sent: the configuration's own, or for a
	// run of (a) its pair's (plainBeside).
	Kind loadKind
	Load loadResult
	// CPU is the user+system time Caddy used during the run.
	CPU time.Duration
	// Mallocs and Bytes are what Caddy allocated during the run (the
	// metrics scrapes' own allocations taken out).
	Mallocs, Bytes float64
	Upstream       routeStats
	// Redis is what redis-server counted during the run, for a
	// configuration with the Redis store.
	Redis *redisStats
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
	// PlainProofs are the bodies of (a)'s runs paired with p or p-redis:
	// pools of their own, so that p's are each sent once.
	PlainProofs proofPool
	Profile     *profileSummary
	// Profiles are every configuration's profile, in -pprof-configs order.
	Profiles []*profileSummary
	Problems []string
	Notes    []string
	Started  time.Time
	Elapsed  time.Duration
}

type poolInfo struct {
	Size       int
	Mint       time.Duration
	TokenBytes int
	// Used and Repeats are what the configuration driven from the pool
	// (c) sent, and how many of those had been sent before (by it or by
	// (a)): the pool ran out.
	Used, Repeats int64
	// PlainUsed and PlainRepeats are the same for (a)'s runs paired with
	// it, which take the pool's next tokens too.
	PlainUsed, PlainRepeats int64
}

// poolRepeats is how many of the used tokens sent from offset on were
// sent before: those past the end of a pool of size (the script wraps).
func poolRepeats(offset, used int64, size int) int64 {
	n := int64(size)
	return max(0, offset+used-n) - max(0, offset-n)
}

// bench is the state of one run.
type bench struct {
	opts    Options
	configs []config
	pin     pinning
	dir     string
	rep     *Report

	caddyBin, peerBin, vcTest string
	admin, upstream           string
	caddy, up, redis          *process
	// redisAddr is redis-server's host:port, once started.
	redisAddr string

	// servers are the configurations' Caddy servers, by name: each has
	// its own port, audience and reused credential (servers.go).
	servers map[string]*server

	luaFile, poolFile string
	poolUsed          int64

	agentDID, agentSeedFile string

	// signer signs the request proofs of p; proofs is p's current pool,
	// plainProofs that of (a) paired with p.
	signer      proofSigner
	proofs      proofPool
	plainProofs proofPool
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
