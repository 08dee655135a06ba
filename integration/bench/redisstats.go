package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// redisStats are redis-server's counters around a run (INFO stats): what
// one request of a configuration with the Redis store costs Redis.
// Reads counts the reads Redis made from its clients' connections: one per
// round trip, however many commands a pipeline carried.
type redisStats struct {
	Commands, Reads, InBytes, OutBytes float64
	// CPU is redis-server's user+system time (/proc), in µs: it shares the
	// machine with Caddy, and Caddy's CPU figure leaves it out.
	CPU float64
}

func (s redisStats) minus(o redisStats) redisStats {
	return redisStats{s.Commands - o.Commands, s.Reads - o.Reads, s.InBytes - o.InBytes, s.OutBytes - o.OutBytes, s.CPU - o.CPU}
}

// redisInfo reads the counters from the redis-server at addr. The INFO
// command itself is one command and one read, which the caller's
// difference of two readings counts once.
func redisInfo(addr string) (redisStats, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return redisStats{}, fmt.Errorf("redis INFO: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprint(c, "INFO stats\r\n"); err != nil {
		return redisStats{}, fmt.Errorf("redis INFO: %v", err)
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return redisStats{}, fmt.Errorf("redis INFO: reply %q: %v", head, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 || n > 1<<20 {
		return redisStats{}, fmt.Errorf("redis INFO: reply length %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return redisStats{}, fmt.Errorf("redis INFO: %v", err)
	}
	return parseRedisInfo(string(body))
}

// parseRedisInfo reads the counters from the text of INFO stats.
func parseRedisInfo(body string) (redisStats, error) {
	var s redisStats
	fields := map[string]*float64{
		"total_commands_processed": &s.Commands,
		"total_reads_processed":    &s.Reads,
		"total_net_input_bytes":    &s.InBytes,
		"total_net_output_bytes":   &s.OutBytes,
	}
	for line := range strings.SplitSeq(body, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if p := fields[k]; ok && p != nil {
			var err error
			if *p, err = strconv.ParseFloat(v, 64); err != nil {
				return redisStats{}, fmt.Errorf("redis INFO: %s %q", k, v)
			}
			delete(fields, k)
		}
	}
	for k, p := range fields {
		if k != "total_reads_processed" { // Redis 6 has no read count
			return redisStats{}, fmt.Errorf("redis INFO: no %s", k)
		}
		*p = math.NaN()
	}
	return s, nil
}

// redisMarkdown writes what one request of each configuration with the
// Redis store cost Redis: medians over the rounds.
func (r *Report) redisMarkdown(b *strings.Builder) {
	per := map[string][]redisStats{}
	var names []string
	for _, s := range r.Samples {
		if s.Redis == nil || s.Round < 0 || s.Load.Ops == 0 {
			continue
		}
		if per[s.Config] == nil {
			names = append(names, s.Config)
		}
		ops := float64(s.Load.Ops)
		per[s.Config] = append(per[s.Config], redisStats{s.Redis.Commands / ops, s.Redis.Reads / ops, s.Redis.InBytes / ops, s.Redis.OutBytes / ops, s.Redis.CPU / ops})
	}
	if len(names) == 0 {
		return
	}
	b.WriteString("\n### Redis per request\n\n")
	b.WriteString("redis-server's own counters (`INFO stats`) around each run, per request, medians over the rounds: commands, reads from its clients' connections (one per round trip, however many commands a pipeline carries; the edge writes concurrent proofs' nonces as one pipeline) and bytes each way, and redis-server's CPU per request (not in Caddy's figures, but on the same cores). The two INFO calls of a run count as one command and one read.\n\n")
	b.WriteString("| config | commands/req | reads (round trips)/req | bytes in/req | bytes out/req | redis-server CPU µs/req |\n|---|--:|--:|--:|--:|--:|\n")
	for _, n := range names {
		col := func(f func(redisStats) float64) float64 {
			var xs []float64
			for _, s := range per[n] {
				xs = append(xs, f(s))
			}
			return median(xs)
		}
		fmt.Fprintf(b, "| %s | %.2f | %.3f | %.0f | %.0f | %.1f |\n", n,
			col(func(s redisStats) float64 { return s.Commands }), col(func(s redisStats) float64 { return s.Reads }),
			col(func(s redisStats) float64 { return s.InBytes }), col(func(s redisStats) float64 { return s.OutBytes }),
			col(func(s redisStats) float64 { return s.CPU }))
	}
}

// redisCounters reads the bench's redis-server's counters and CPU time.
func (b *bench) redisCounters() (redisStats, error) {
	s, err := redisInfo(b.redisAddr)
	if err != nil {
		return s, err
	}
	cpu, err := cpuTime(b.redis.cmd.Process.Pid)
	if err != nil {
		return s, fmt.Errorf("redis-server CPU: %v", err)
	}
	s.CPU = float64(cpu.Microseconds())
	return s, nil
}
