package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const modulePath = "github.com/mcpi-edge/caddy-mcpi/"

// profileSummary is what the CPU profile of configuration b shows.
type profileSummary struct {
	Seconds int
	// Samples is pprof's "Total samples" line.
	Total string
	// Mcpi are the module's functions by cumulative share, largest first.
	Mcpi []profileFunc
	// Flat are the functions with the largest own (flat) share.
	Flat []profileFunc
	// Buckets add up the flat shares by where the code lives.
	Buckets []bucket
	// Config is the configuration profiled, and PerOp its Caddy CPU per
	// request in the profiled run: a bucket's share of PerOp is what that
	// code cost one request.
	Config string
	PerOp  float64 // µs
}

type profileFunc struct {
	Name      string
	Flat, Cum float64 // percent of all samples
}

type bucket struct {
	Name string
	Flat float64
}

// buckets classify a function by its name; the first match wins.
type bucketRule struct {
	name     string
	prefixes []string
}

var bucketRules = []bucketRule{
	// The module's own Ed25519 arithmetic (internal/ed25519v) counts as
	// crypto: it replaces crypto/ed25519's, which would be there otherwise.
	{"crypto (crypto/*, x/crypto, filippo.io, internal/ed25519v)", []string{modulePath + "internal/ed25519v.", "crypto/", "golang.org/x/crypto", "filippo.io/", "vendor/golang.org/x/crypto"}},
	{"caddy-mcpi (every other package of this module)", []string{modulePath}},
	{"encoding (json, base64, …)", []string{"encoding/", "github.com/gowebpki/jcs"}},
	{"Caddy and net/http (routing, reverse_proxy, HTTP/1 parsing)", []string{"github.com/caddyserver/", "net/http", "net/textproto", "net/url", "bufio"}},
	{"network syscalls and poller", []string{"syscall.", "internal/poll", "net.", "internal/runtime/syscall", "runtime.netpoll"}},
	{"runtime (GC, allocation, scheduling)", []string{"runtime.", "internal/runtime", "sync", "gcWriteBarrier", "internal/"}},
}

func classify(fn string) string {
	for _, r := range bucketRules {
		for _, p := range r.prefixes {
			if strings.HasPrefix(fn, p) {
				return r.name
			}
		}
	}
	return "other"
}

// profile runs configuration name under its load while taking a CPU
// profile from Caddy's admin endpoint, logs the functions that cost the
// most Caddy CPU per request in it, and summarizes it with go tool pprof.
// The load runs through measure, so the pools of c and p are used as in
// the rounds (no credential or proof repeats).
func (b *bench) profile(ctx context.Context, name string) (*profileSummary, error) {
	c, _ := selectConfigs([]string{name})
	secs := wrkSeconds(b.opts.Pprof)
	b.logf("CPU profile of %s: %ds from %s/debug/pprof/profile while it runs", name, secs, b.admin)
	path := filepath.Join(b.dir, name+".cpu.pprof")
	d := time.Duration(secs+2) * time.Second
	if c[0].load == loadProof {
		// Minted before the profile starts, or it would profile Caddy idle
		// while the pool is signed (measure leaves it to this run).
		if err := b.mintProofs(c[0], d); err != nil {
			return nil, err
		}
	}
	fetched := make(chan error, 1)
	go func() {
		time.Sleep(time.Second) // let the connections settle
		fetched <- fetch(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", b.admin, secs), path, time.Duration(secs+30)*time.Second)
	}()
	s, err := b.measure(ctx, c[0], roundProfile, d)
	if fetchErr := <-fetched; err == nil {
		err = fetchErr
	}
	if err != nil {
		return nil, err
	}
	p := &profileSummary{Seconds: secs, Config: name}
	if s.Load.Ops > 0 {
		p.PerOp = s.CPU.Seconds() * 1e6 / float64(s.Load.Ops)
	}
	all, total, err := pprofTop(b.opts.Root, b.caddyBin, path)
	if err != nil {
		return nil, err
	}
	p.Total = total
	sums := make(map[string]float64)
	for _, f := range all {
		sums[classify(f.Name)] += f.Flat
		if strings.HasPrefix(f.Name, modulePath) {
			p.Mcpi = append(p.Mcpi, profileFunc{Name: strings.TrimPrefix(f.Name, modulePath), Flat: f.Flat, Cum: f.Cum})
		}
	}
	slices.SortStableFunc(p.Mcpi, func(x, y profileFunc) int { return cmpDesc(x.Cum, y.Cum) })
	p.Mcpi = p.Mcpi[:min(len(p.Mcpi), 15)]
	flat := slices.Clone(all)
	slices.SortStableFunc(flat, func(x, y profileFunc) int { return cmpDesc(x.Flat, y.Flat) })
	p.Flat = flat[:min(len(flat), 15)]
	for _, r := range bucketRules {
		p.Buckets = append(p.Buckets, bucket{r.name, sums[r.name]})
	}
	p.Buckets = append(p.Buckets, bucket{"other", sums["other"]})
	b.logPerRequest(name, all, p.PerOp)
	return p, nil
}

// logPerRequest logs the profile's costliest functions in µs of Caddy CPU
// per request: the profile's share of each, times the CPU per request of
// the load it was taken under. Comparing two configurations' lists shows
// where the difference between them goes.
func (b *bench) logPerRequest(name string, all []profileFunc, perOp float64) {
	if perOp == 0 {
		return
	}
	b.logf("  %s: %.1f µs of Caddy CPU per request; by flat share:", name, perOp)
	flat := slices.Clone(all)
	slices.SortStableFunc(flat, func(x, y profileFunc) int { return cmpDesc(x.Flat, y.Flat) })
	for _, f := range flat[:min(len(flat), 25)] {
		b.logf("  %7.2f µs  %5.1f %%  %s", perOp*f.Flat/100, f.Flat, f.Name)
	}
	b.logf("  by bucket:")
	sums := make(map[string]float64)
	for _, f := range all {
		sums[classify(f.Name)] += f.Flat
	}
	for _, r := range append(bucketRules, bucketRule{name: "other"}) {
		b.logf("  %7.2f µs  %5.1f %%  %s", perOp*sums[r.name]/100, sums[r.name], r.name)
	}
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func fetch(url, path string, timeout time.Duration) error {
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return fmt.Errorf("GET %s: HTTP %d %s", url, resp.StatusCode, msg)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pprofTop returns every function of the profile with its flat and cum
// percentages (go tool pprof -top), and the "Total samples" line.
func pprofTop(root, bin, profile string) ([]profileFunc, string, error) {
	cmd := exec.Command("go", "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0", bin, profile)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("go tool pprof: %v", err)
	}
	var fns []profileFunc
	var total string
	header := false
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "Total samples") {
			total = strings.TrimSpace(l)
		}
		f := strings.Fields(l)
		if !header {
			header = len(f) >= 5 && f[0] == "flat" && f[1] == "flat%"
			continue
		}
		if len(f) < 6 {
			continue
		}
		flat, err1 := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		cum, err2 := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		name := strings.TrimSuffix(strings.Join(f[5:], " "), " (inline)")
		fns = append(fns, profileFunc{Name: name, Flat: flat, Cum: cum})
	}
	if len(fns) == 0 {
		return nil, "", fmt.Errorf("go tool pprof printed no functions:\n%s", tail(string(out), 1000))
	}
	return fns, total, nil
}
