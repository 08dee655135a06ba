package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// machine describes where the figures were taken.
type machine struct {
	NProc           string
	CPUModel        string
	GoVersion       string
	Kernel          string
	WrkVersion      string
	CaddyVersion    string
	Commit          string
	Pinning         string
	CaddyGOMAXPROCS int
	LoadStart       string
	LoadEnd         string
}

func describeMachine(p pinning) machine {
	m := machine{
		NProc:      firstLine(exec.Command("nproc").Output()),
		CPUModel:   cpuModel(),
		GoVersion:  firstLine(exec.Command("go", "version").Output()),
		Kernel:     strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		WrkVersion: wrkVersion(),
		Commit:     gitCommit(),
		LoadStart:  loadAverage(),
	}
	if p.on {
		m.Pinning = fmt.Sprintf("taskset: Caddy on CPU %s; wrk, the upstream, the handshake and open-loop drivers and redis-server on CPU %s", p.edge, p.other)
	} else {
		m.Pinning = "none: every process may run on every CPU"
	}
	return m
}

func readFile(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// wrkVersion: wrk -v prints its version line and usage, and exits 1.
func wrkVersion() string {
	out, _ := exec.Command("wrk", "-v").CombinedOutput()
	l, _, _ := strings.Cut(string(out), "\n")
	if i := strings.Index(l, " Copyright"); i > 0 {
		l = l[:i]
	}
	return strings.TrimSpace(l)
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " + uncommitted changes"
	}
	return c
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute averages: how busy the
// machine was with other work.
func loadAverage() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func redisPing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprint(c, "PING\r\n"); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := c.Read(buf)
	return strings.HasPrefix(string(buf[:n]), "+PONG")
}

// floor is one bare verification benchmark of vc.
type floor struct {
	Name        string
	NsPerOp     float64
	AllocsPerOp float64
}

// floorBenchmarks are the vc benchmarks run as floors: the bare signature
// checks, and the whole VC-JWT verification the edge runs per request.
const floorBenchmarks = "^(BenchmarkEd25519Verify|BenchmarkP256Verify|BenchmarkVerifyJWTEdDSA)$"

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:.*?\s([\d.]+) allocs/op)?`)

// runFloors runs the vc benchmarks on Caddy's CPU while Caddy is not
// running yet.
func (b *bench) runFloors(ctx context.Context) error {
	b.logf("vc verification floors (-benchtime %s)", b.opts.VCBenchTime)
	count := 3 // the fastest of three: other work on the machine only ever adds time
	if b.opts.Rounds == 1 {
		count = 1
	}
	cmd := b.pin.command(ctx, b.pin.edge, b.vcTest, "-test.run", "^$", "-test.bench", floorBenchmarks,
		"-test.benchtime", b.opts.VCBenchTime, "-test.count", strconv.Itoa(count), "-test.benchmem")
	cmd.Dir = filepath.Join(b.opts.Root, "vc")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("vc benchmarks: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		m := benchLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		f := floor{Name: m[1]}
		f.NsPerOp, _ = strconv.ParseFloat(m[2], 64)
		if m[3] != "" {
			f.AllocsPerOp, _ = strconv.ParseFloat(m[3], 64)
		}
		if i := slices.IndexFunc(b.rep.Floors, func(g floor) bool { return g.Name == f.Name }); i >= 0 {
			b.rep.Floors[i].NsPerOp = min(b.rep.Floors[i].NsPerOp, f.NsPerOp)
			continue
		}
		b.rep.Floors = append(b.rep.Floors, f)
	}
	if len(b.rep.Floors) < 3 {
		return fmt.Errorf("vc benchmarks %s: found %d of 3 in the output:\n%s", floorBenchmarks, len(b.rep.Floors), out)
	}
	return nil
}
