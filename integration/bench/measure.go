package main

// Measuring: the warmup, the rounds and the profile, each run with
// Caddy's CPU time, allocations and the upstream's counters around it.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
	if b.opts.Warmup > 0 {
		b.logf("warmup: every configuration for %v, not recorded", b.opts.Warmup)
		for _, c := range b.configs {
			if _, err := b.measure(ctx, c, -1, b.opts.Warmup); err != nil {
				return err
			}
		}
	}
	// Every configuration runs next to a run of (a) of its own, the order
	// of the two swapped every time: the machine's other load moves
	// Caddy's CPU per request by a fifth within a minute, so a ratio
	// against a run of (a) a minute away measured that load more than the
	// handler. That run of (a) sends the configuration's own requests
	// (plainBeside), so that the ratio counts the handler, not a bigger
	// request.
	others := slices.DeleteFunc(slices.Clone(b.configs), func(c config) bool { return c.name == "a" })
	var plain config
	i := slices.IndexFunc(b.configs, func(c config) bool { return c.name == "a" })
	hasPlain := i >= 0
	if hasPlain {
		plain = b.configs[i]
	}
	n := len(others)
	for r := range b.opts.Rounds {
		order := make([]string, 0, n)
		for i := range n {
			order = append(order, others[(i+r)%n].name)
		}
		b.logf("round %d/%d, each next to a run of a: %s", r+1, b.opts.Rounds, strings.Join(order, " "))
		for i := range n {
			c := others[(i+r)%n]
			pair := []config{c}
			if hasPlain {
				beside := plainBeside(plain, c)
				pair = []config{beside, c}
				if (i+r)%2 == 1 {
					pair = []config{c, beside}
				}
			}
			for _, run := range pair {
				s, err := b.measure(ctx, run, r, b.opts.Duration)
				if err != nil {
					return err
				}
				if run.name == "a" {
					s.Pair = c.name
				}
				b.rep.Samples = append(b.rep.Samples, s)
				b.logf("  %-12s %s", s.label(), s.brief())
			}
		}
		if n == 0 && hasPlain {
			s, err := b.measure(ctx, plain, r, b.opts.Duration)
			if err != nil {
				return err
			}
			b.rep.Samples = append(b.rep.Samples, s)
			b.logf("  %-12s %s", s.label(), s.brief())
		}
	}
	if err := b.openLoopPhase(ctx); err != nil {
		return err
	}
	if p := b.rep.Pool; p.Repeats > 0 || p.PlainRepeats > 0 {
		b.note("the pool of %d credentials ran out: configuration c sent %d, %d of them repeats; (a) beside it sent %d, %d of them repeats",
			p.Size, p.Used, p.Repeats, p.PlainUsed, p.PlainRepeats)
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
			b.rep.Profiles = append(b.rep.Profiles, p)
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
	if c.name == "a" && c.load != loadHeader {
		where += " (" + c.load.String() + ")"
	}
	if c.load == loadHandshake {
		counter = "the handshake driver"
	}
	if c.load == loadProof && round != roundProfile { // profile mints its own first
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
			b.proofsUsed(c, where, s.Load.TokensUsed)
			b.rep.Proofs, b.rep.PlainProofs = b.proofs, b.plainProofs
		}
	}
	return s, err
}

// measureLoad runs one load of c and takes Caddy's CPU time and
// allocations and the upstream's counters around it; what went wrong is
// recorded as a problem of where. counter names what counted the
// responses.
func (b *bench) measureLoad(c config, round int, where, counter string, run func() (loadResult, error)) (sample, error) {
	s := sample{Config: c.name, Round: round, Kind: c.load, Handshakes: c.load == loadHandshake}
	up0, err1 := upstreamStats(b.upstream)
	m0, err2 := scrapeMemStats(b.admin)
	cpu0, err3 := cpuTime(b.caddy.cmd.Process.Pid)
	if err := errors.Join(err1, err2, err3); err != nil {
		return s, err
	}
	var redis0 redisStats
	withRedis := c.redis && b.redisAddr != ""
	if withRedis {
		var err error
		if redis0, err = b.redisCounters(); err != nil {
			return s, err
		}
	}
	res, err := run()
	if err != nil {
		return s, err
	}
	if withRedis {
		redis1, err := b.redisCounters()
		if err != nil {
			return s, err
		}
		d := redis1.minus(redis0)
		s.Redis = &d
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

// label names the run: a run of (a) paired with another configuration
// says which, as it was driven with that one's requests.
func (s sample) label() string {
	if s.Config == "a" && s.Pair != "" {
		return "a (" + s.Pair + ")"
	}
	return s.Config
}

func (s sample) brief() string {
	unit := "req"
	if s.Handshakes {
		unit = "hs"
	}
	ops := float64(max(s.Load.Ops, 1))
	line := fmt.Sprintf("%8.0f %s/s  p50 %-8v p99 %-8v cpu %6.1fµs/op  %6.1f allocs/op  %d failed",
		float64(s.Load.Ops)/s.Load.Seconds, unit, s.Load.P50, s.Load.P99,
		float64(s.CPU.Microseconds())/ops, s.Mallocs/ops, s.Load.Failed)
	if r := s.Redis; r != nil {
		line += fmt.Sprintf("  redis %.2f cmds %.3f reads %.0f B in %.0f B out %.1fµs cpu /op", r.Commands/ops, r.Reads/ops, r.InBytes/ops, r.OutBytes/ops, r.CPU/ops)
	}
	return line
}
