// Command bench is the whole-proxy benchmark of caddy-mcpi. It builds Caddy
// with the plugin (./cmd/caddy), starts a fast upstream and one Caddy with
// a server per configuration (its own port, its one route, so that every
// request pays the same routing), and drives each from a separate process over
// keep-alive connections (wrk; a Go handshake driver for Level 3),
// alternating the configurations in rounds so that the noise of a shared
// machine falls on all of them alike:
//
//	a        plain reverse_proxy: the ceiling every ratio is taken against
//	b        mcpi level 1, one credential reused
//	b-hdr    b with `carriers authorization`: no body read
//	c        level 1, a fresh credential on every request (pre-minted pool)
//	d        level 2: signed X-Verified-Delegation, reused while fresh
//	d-sign   level 2 with assertion_reuse off: one signature per request
//	e        level 1, credential in params.delegationToken: the body is
//	         read and rewritten (stands in for per-tool policy)
//	e-tool   level 1 with a per-tool policy
//	e-cel    e-tool with one CEL rule on the tool (arguments, delegation)
//	b-2026   b as a 2026-era stateless request: framing headers checked
//	p        2026-era requests each with a fresh KYA-OS request proof
//	         (pool signed right before each run), memory nonce store
//	p-redis  p with the Redis nonce store
//	f-mem    level 3 handshakes per second, memory nonce store
//	f-redis  level 3 handshakes per second, Redis nonce store
//
// For each it reports requests/s, p50/p99 latency, Caddy's CPU time and
// allocations per request, and each one's ratio to (a) in the same round;
// with the bare Ed25519/P-256 verification cost from vc's benchmarks, what
// (c), (p) and (p-redis) cost above (a) against one Ed25519 verification,
// and a CPU profile of (b). wrk is closed-loop, so an open-loop phase follows
// the rounds: the bench peer drives (a) and (b) alternately at a constant
// rate, 50 % of (a)'s peak by default, with vegeta's attacker, and the
// report gives their latency percentiles and the p99 that (b) adds to (a)
// in the same round. The result is printed and written between the
// markers of BENCHMARKS.md.
//
//	scripts/bench.sh                  # full run, about 6 minutes
//	scripts/bench.sh -quick           # 1 round × 1 s, what CI runs
//
// It is a Go module of its own (go.mod here, the plugin by a replace to
// ../..), so that vegeta and the rest of the load tooling never reach the
// go.mod of the plugin that xcaddy users resolve; run it from this
// directory (go run . -h lists every flag).
//
// It needs wrk and redis-server (scripts/bench.sh installs them with apt)
// and talks to loopback only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
)

func main() {
	opts := DefaultOptions()
	quick := flag.Bool("quick", false, fmt.Sprintf("CI mode: 1 round × 1s, a 20k pool, no warmup, no profile, open-loop 1s at %d req/s (flags given explicitly still win)", quickOpenLoopRate))
	duration := flag.Duration("duration", opts.Duration, "length of one measured run (rounded up to whole seconds)")
	rounds := flag.Int("rounds", opts.Rounds, "rounds; each runs every configuration once, in a rotated order")
	conns := flag.Int("connections", opts.Connections, "keep-alive connections (wrk -c, and the handshake and open-loop drivers' at most)")
	threads := flag.Int("threads", opts.Threads, "wrk threads")
	pool := flag.Int("pool", opts.Pool, "fresh credentials minted for configuration c")
	warmup := flag.Duration("warmup", opts.Warmup, "unrecorded run of every configuration before round 1; 0 for none")
	pprof := flag.Duration("pprof", opts.Pprof, "CPU profile of each of -pprof-configs after the rounds; 0 for none")
	pprofConfigs := flag.String("pprof-configs", strings.Join(opts.PprofConfigs, ","), "configurations profiled (the report summarizes b; with -keep every profile stays in the working directory)")
	vcBench := flag.String("vcbench", opts.VCBenchTime, `-benchtime of the vc verification floors; "" to skip`)
	openLoop := flag.Duration("openloop", opts.OpenLoop, "length of one open-loop run (a and b at a constant rate after the rounds, as many rounds); 0 to skip")
	openFrac := flag.Float64("openloop-frac", opts.OpenLoopFrac, "open-loop rate as a fraction of a's peak (its median req/s over the rounds)")
	openRate := flag.Int("openloop-rate", opts.OpenLoopRate, "open-loop rate in req/s instead of -openloop-frac of a's peak; 0 for the fraction")
	configs := flag.String("configs", "", "comma-separated configurations to run (default all: "+configNames(allConfigs)+")")
	pin := flag.Bool("pin", opts.Pin, "taskset: Caddy on CPU 0, the load side (wrk, upstream, handshake and open-loop drivers, redis) on CPU 1")
	keep := flag.Bool("keep", false, "keep the working directory (binaries, Caddyfile, pool, profile)")
	out := flag.String("out", "", `file whose generated section to rewrite (default BENCHMARKS.md at the repository root; "-" for none; -quick writes none unless given)`)
	flag.Parse()

	if *quick {
		q := QuickOptions()
		opts.Duration, opts.Rounds, opts.Pool, opts.Warmup, opts.Pprof, opts.VCBenchTime = q.Duration, q.Rounds, q.Pool, q.Warmup, q.Pprof, q.VCBenchTime
		opts.OpenLoop, opts.OpenLoopRate = q.OpenLoop, q.OpenLoopRate
	}
	set := make(map[string]bool)
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	apply := func(name string, fn func()) {
		if set[name] {
			fn()
		}
	}
	apply("duration", func() { opts.Duration = *duration })
	apply("rounds", func() { opts.Rounds = *rounds })
	apply("connections", func() { opts.Connections = *conns })
	apply("threads", func() { opts.Threads = *threads })
	apply("pool", func() { opts.Pool = *pool })
	apply("warmup", func() { opts.Warmup = *warmup })
	apply("pprof", func() { opts.Pprof = *pprof })
	apply("pprof-configs", func() { opts.PprofConfigs = strings.Split(*pprofConfigs, ",") })
	apply("vcbench", func() { opts.VCBenchTime = *vcBench })
	apply("openloop", func() { opts.OpenLoop = *openLoop })
	apply("openloop-rate", func() { opts.OpenLoopRate = *openRate })
	apply("openloop-frac", func() {
		opts.OpenLoopFrac = *openFrac
		if !set["openloop-rate"] {
			opts.OpenLoopRate = 0 // a fraction given, even in quick mode, is what is wanted
		}
	})
	opts.Pin, opts.Keep = *pin, *keep
	if *configs != "" {
		opts.Configs = strings.Split(*configs, ",")
	}

	root, err := repoRoot()
	if err != nil {
		fatal(err)
	}
	opts.Root = root
	outPath := *out
	switch {
	case outPath == "-":
		outPath = ""
	case outPath == "" && !*quick:
		outPath = filepath.Join(root, "BENCHMARKS.md")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, runErr := Run(ctx, opts)
	if rep != nil && len(rep.Samples) > 0 {
		md := rep.Markdown(commandLine())
		fmt.Println(md)
		if outPath != "" {
			if err := writeMarkdown(outPath, md); err != nil {
				fatal(err)
			}
			fmt.Fprintf(os.Stderr, "bench: wrote %s\n", outPath)
		}
	}
	if runErr != nil {
		fatal(runErr)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// repoRoot is the plugin's repository root: the nearest directory above the
// bench's own module (integration/bench has a go.mod of its own, so that
// its load tools stay out of the plugin's) whose go.mod declares the
// plugin's module.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the bench's module: run it from integration/bench (scripts/bench.sh does)")
	}
	for dir := filepath.Dir(filepath.Dir(mod)); ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresPlugin(data) {
			return dir, nil
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", fmt.Errorf("no go.mod of %s above %s: the bench runs inside a checkout of the plugin", pluginModule, mod)
		}
	}
}

// pluginModule is the module the bench builds Caddy with.
const pluginModule = "github.com/mcpi-edge/caddy-mcpi"

func declaresPlugin(gomod []byte) bool {
	for _, l := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == pluginModule {
			return true
		}
	}
	return false
}

func commandLine() string {
	if os.Getenv("MCPI_BENCH_COMMAND") != "" {
		return os.Getenv("MCPI_BENCH_COMMAND")
	}
	args := []string{"go", "run", "."}
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " '\"|*?$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
