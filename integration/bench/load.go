package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// loadResult is what one load run reports, from wrk or the handshake
// driver.
type loadResult struct {
	// Ops are completed requests (wrk) or handshakes.
	Ops     int64
	Seconds float64
	P50     time.Duration
	P99     time.Duration
	// Failed counts non-2xx responses and socket errors (wrk), or failed
	// handshakes; FirstError says what went wrong, when known.
	Failed     int64
	FirstError string
	// TokensUsed is how many pool tokens (loadPool) or signed bodies
	// (loadProof) wrk sent.
	TokensUsed int64
	// Open is set by the open-loop driver only.
	Open *openLoopResult
}

// wrkResult is the MCPI_RESULT line of bench.lua.
type wrkResult struct {
	Requests   int64   `json:"requests"`
	DurationUS int64   `json:"duration_us"`
	Connect    int64   `json:"connect"`
	Read       int64   `json:"read"`
	Write      int64   `json:"write"`
	Status     int64   `json:"status"`
	Timeout    int64   `json:"timeout"`
	P50US      int64   `json:"p50_us"`
	P99US      int64   `json:"p99_us"`
	MeanUS     float64 `json:"mean_us"`
	TokensUsed int64   `json:"tokens_used"`
}

// wrkSeconds is a duration as wrk takes it: whole seconds, at least 1.
func wrkSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// runWrk drives one configuration with wrk for d.
func (b *bench) runWrk(ctx context.Context, c config, d time.Duration) (loadResult, error) {
	env := append(os.Environ(), "MCPI_BENCH_THREADS="+strconv.Itoa(b.opts.Threads))
	switch c.load {
	case loadHeader:
		env = append(env, "MCPI_BENCH_MODE=header", "MCPI_BENCH_TOKEN="+b.token(c))
	case loadBody:
		env = append(env, "MCPI_BENCH_MODE=body", "MCPI_BENCH_TOKEN="+b.token(c))
	case loadPool:
		env = append(env, "MCPI_BENCH_MODE=pool", "MCPI_BENCH_TOKEN="+b.token(c),
			"MCPI_BENCH_TOKENS="+b.poolFile, "MCPI_BENCH_OFFSET="+strconv.FormatInt(b.poolUsed, 10))
	case load2026:
		env = append(env, "MCPI_BENCH_MODE=2026", "MCPI_BENCH_TOKEN="+b.token(c))
	case loadProof:
		env = append(env, "MCPI_BENCH_MODE=proof", "MCPI_BENCH_TOKEN="+b.token(c), "MCPI_BENCH_BODIES="+b.proofPoolOf(c).file)
	default:
		return loadResult{}, fmt.Errorf("config %s is not driven by wrk", c.name)
	}
	secs := wrkSeconds(d)
	cctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+60*time.Second)
	defer cancel()
	cmd := b.pin.command(cctx, b.pin.other, "wrk",
		"-t", strconv.Itoa(b.opts.Threads), "-c", strconv.Itoa(b.opts.Connections),
		"-d", strconv.Itoa(secs)+"s", "--timeout", "10s",
		"-s", b.luaFile, b.endpoint(c))
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return loadResult{}, fmt.Errorf("wrk on %s: %v\n%s", c.name, err, tail(out.String(), 2000))
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if s, ok := strings.CutPrefix(l, "MCPI_RESULT "); ok {
			line = s
		}
	}
	var w wrkResult
	if line == "" || json.Unmarshal([]byte(line), &w) != nil {
		return loadResult{}, fmt.Errorf("wrk on %s printed no MCPI_RESULT line:\n%s", c.name, tail(out.String(), 2000))
	}
	r := loadResult{
		Ops:        w.Requests,
		Seconds:    float64(w.DurationUS) / 1e6,
		P50:        time.Duration(w.P50US) * time.Microsecond,
		P99:        time.Duration(w.P99US) * time.Microsecond,
		Failed:     w.Status + w.Connect + w.Read + w.Write + w.Timeout,
		TokensUsed: w.TokensUsed,
	}
	if r.Failed > 0 {
		r.FirstError = fmt.Sprintf("wrk: %d non-2xx/3xx, socket errors connect %d read %d write %d timeout %d",
			w.Status, w.Connect, w.Read, w.Write, w.Timeout)
	}
	if c.load == loadPool {
		b.poolSent(c, w.TokensUsed)
	}
	return r, nil
}

// poolSent records that a run of c sent used tokens from the pool, from
// the next unused offset on: c and (a) beside it share one offset, so
// that no token goes out twice while the pool lasts, and each is told its
// own repeats.
func (b *bench) poolSent(c config, used int64) {
	repeats := poolRepeats(b.poolUsed, used, b.rep.Pool.Size)
	b.poolUsed += used
	p := &b.rep.Pool
	if c.name == "a" {
		p.PlainUsed += used
		p.PlainRepeats += repeats
		return
	}
	p.Used += used
	p.Repeats += repeats
}

// runHandshakes drives a Level 3 configuration with the peer's handshake
// driver for d.
func (b *bench) runHandshakes(ctx context.Context, c config, d time.Duration) (loadResult, error) {
	d = time.Duration(wrkSeconds(d)) * time.Second // as wrk runs
	cctx, cancel := context.WithTimeout(ctx, d+60*time.Second)
	defer cancel()
	cmd := b.pin.command(cctx, b.pin.other, b.peerBin, "handshakes",
		"-url", b.origin(c), "-hs", "/"+c.name+"/handshake", "-vf", "/"+c.name+"/verify",
		"-agent-did", b.agentDID, "-agent-seed", b.agentSeedFile, "-cred", b.servers[c.name].credFile,
		"-c", strconv.Itoa(b.opts.Connections), "-d", d.String())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return loadResult{}, fmt.Errorf("handshake driver on %s: %v\n%s", c.name, err, tail(errOut.String(), 2000))
	}
	var h struct {
		Handshakes int64   `json:"handshakes"`
		Errors     int64   `json:"errors"`
		FirstError string  `json:"first_error"`
		Seconds    float64 `json:"seconds"`
		P50us      float64 `json:"p50_us"`
		P99us      float64 `json:"p99_us"`
	}
	if err := json.Unmarshal(out.Bytes(), &h); err != nil {
		return loadResult{}, fmt.Errorf("handshake driver on %s: %v: %s", c.name, err, out.String())
	}
	return loadResult{
		Ops:        h.Handshakes,
		Seconds:    h.Seconds,
		P50:        time.Duration(h.P50us) * time.Microsecond,
		P99:        time.Duration(h.P99us) * time.Microsecond,
		Failed:     h.Errors,
		FirstError: h.FirstError,
	}, nil
}
