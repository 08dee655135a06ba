package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// pinning says where the processes run. With -pin and two or more cores,
// Caddy gets CPU 0 and everything that generates load (wrk, the upstream,
// the handshake and open-loop drivers, redis-server) shares CPU 1, so the
// load side never takes cycles from the process being measured. Without
// it (the default) the scheduler places everything.
type pinning struct {
	on          bool
	edge, other string // taskset CPU lists
}

// command returns an exec.Cmd running name pinned to cpus (if pinning).
func (p pinning) command(ctx context.Context, cpus, name string, args ...string) *exec.Cmd {
	if !p.on {
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, "taskset", append([]string{"-c", cpus, name}, args...)...)
}

// process is a started child process; its output goes to a file of the
// working directory (Caddy's audit log writes a line per request: kept out
// of the harness's memory).
type process struct {
	name    string
	cmd     *exec.Cmd
	outPath string
	exited  chan struct{}
	err     error
}

func startProcess(name, outPath string, cmd *exec.Cmd) (*process, error) {
	f, err := os.Create(outPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy
	p := &process{name: name, cmd: cmd, outPath: outPath, exited: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = f
	}
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop kills the process (it is ours: started by startProcess) and waits.
func (p *process) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func (p *process) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.output())
	default:
		return nil
	}
}

// output is the end of what the process wrote.
func (p *process) output() string {
	return tail(readFile(p.outPath), 4000)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago: each stays bound until all are picked, so that none comes twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitHTTP polls url until it answers HTTP at all (any status).
func waitHTTP(url string, p *process, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if err := p.alive(); err != nil {
			return err
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s within %v: %v", p.name, url, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clockTicks is the unit of utime and stime in /proc/<pid>/stat.
var clockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return float64(n)
		}
	}
	return 100 // USER_HZ on every Linux architecture Go runs on
}()

// cpuTime returns the user+system CPU time of pid so far (all threads).
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(float64(ut+st) / clockTicks * float64(time.Second)), nil
}

// memStats are Caddy's Go allocation counters, from the admin /metrics.
type memStats struct {
	mallocs, bytes float64
}

var metricsClient = &http.Client{Timeout: 10 * time.Second}

func scrapeMemStats(admin string) (memStats, error) {
	resp, err := metricsClient.Get(admin + "/metrics")
	if err != nil {
		return memStats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return memStats{}, fmt.Errorf("GET %s/metrics: HTTP %d", admin, resp.StatusCode)
	}
	var m memStats
	var gotM, gotB bool
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_memstats_mallocs_total":
			m.mallocs, err = strconv.ParseFloat(strings.TrimSpace(val), 64)
			gotM = err == nil
		case "go_memstats_alloc_bytes_total":
			m.bytes, err = strconv.ParseFloat(strings.TrimSpace(val), 64)
			gotB = err == nil
		}
	}
	if err := sc.Err(); err != nil {
		return memStats{}, err
	}
	if !gotM || !gotB {
		return memStats{}, errors.New("admin /metrics has no go_memstats_mallocs_total / go_memstats_alloc_bytes_total")
	}
	return m, nil
}

// upstreamStats reads the upstream's per-route counters.
func upstreamStats(upstream string) (map[string]routeStats, error) {
	resp, err := metricsClient.Get("http://" + upstream + "/__stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]routeStats
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("upstream stats: %w", err)
	}
	return out, nil
}

// readLine reads the first line of r that starts with prefix, within limit.
func readLine(r io.Reader, prefix string, limit time.Duration) (string, error) {
	ch := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				ch <- s
				_, _ = io.Copy(io.Discard, r)
				return
			}
		}
		close(ch)
	}()
	select {
	case s, ok := <-ch:
		if !ok {
			return "", fmt.Errorf("no %q line", prefix)
		}
		return s, nil
	case <-time.After(limit):
		return "", fmt.Errorf("no %q line within %v", prefix, limit)
	}
}
