package redistest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Replicated deployments: a master with replicas, watched by sentinels,
// and a Redis Cluster. Their ports are chosen below the kernel's ephemeral
// range, where no outgoing connection takes a port between the check and
// the listen; a cluster node also listens on its port + 10000 (the cluster
// bus), which must be free as well.

// lowPorts are the ports given out in this process.
var lowPorts sync.Map

// lowPort returns a loopback port below the ephemeral range, nothing
// listening on it (nor, with bus, on it + 10000).
func lowPort(t testing.TB, bus bool) int {
	t.Helper()
	ephemeral := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				ephemeral = n
			}
		}
	}
	lo, hi := 20000, ephemeral
	if bus {
		hi = ephemeral - 10000
	}
	if hi <= lo {
		t.Fatalf("no room for Redis ports below the ephemeral range (%d)", ephemeral)
	}
	for range 1000 {
		p := lo + rand.IntN(hi-lo)
		if !portFree(p) || (bus && !portFree(p+10000)) {
			continue
		}
		if _, taken := lowPorts.LoadOrStore(p, true); !taken {
			return p
		}
	}
	t.Fatal("no free Redis port found")
	return 0
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found in PATH: install it with `apt-get install -y redis-server` (CI does; the Redis tests need it)")
	}
	return bin
}

// Pid is the server's process id (0 when stopped).
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Pause stops the process (SIGSTOP) without killing it: its connections
// stay open and nothing it is sent is answered, as a stalled server.
func (s *Server) Pause() {
	if pid := s.Pid(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
}

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() {
	if pid := s.Pid(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// CLI runs redis-cli against the server and returns its output.
func (s *Server) CLI(args ...string) (string, error) {
	out, err := exec.Command("redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.port)}, args...)...).CombinedOutput()
	return string(out), err
}

// Sentinel is a master, its replicas and the sentinels watching them.
type Sentinel struct {
	Master   *Server
	Replicas []*Server
	// links carry each replica's link to the master (StallLink).
	links     []*linkProxy
	Sentinels []*Server
	// Name is the name the sentinels know the master by.
	Name string
}

// SentinelTimings: a master is down after DownAfter without answering,
// and a failover gives up after ten times that. Short, so that a test's
// failover takes a few seconds.
const DownAfter = time.Second

// StartSentinel starts a master, replicas replicas of it, and three
// sentinels (quorum two) that fail it over about DownAfter after it stops
// answering. Every process is killed by its id when t ends.
func StartSentinel(t testing.TB, replicas int) *Sentinel {
	t.Helper()
	bin := binary(t)
	d := &Sentinel{Name: "mcpi"}
	d.Master = startOn(t, bin, lowPort(t, false))
	for range replicas {
		link := newLinkProxy(t, d.Master.Addr())
		r := startOn(t, bin, lowPort(t, false), "--replicaof", "127.0.0.1", strconv.Itoa(link.port()))
		d.Replicas = append(d.Replicas, r)
		d.links = append(d.links, link)
	}
	for _, r := range d.Replicas {
		waitFor(t, 30*time.Second, func() bool {
			out, _ := r.CLI("INFO", "replication")
			return strings.Contains(out, "master_link_status:up")
		}, "replica %s to sync with its master", r.Addr())
	}
	for range 3 {
		port := lowPort(t, false)
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		d.writeSentinelConf(t, conf)
		s := &Server{t: t, bin: bin, port: port, dir: dir, conf: conf, args: []string{"--sentinel"}}
		s.start()
		t.Cleanup(s.Stop)
		d.Sentinels = append(d.Sentinels, s)
	}
	for _, s := range d.Sentinels {
		waitFor(t, 10*time.Second, func() bool {
			out, _ := s.CLI("SENTINEL", "REPLICAS", d.Name)
			return replicas == 0 || strings.Contains(out, "127.0.0.1")
		}, "sentinel %s to find the replicas", s.Addr())
	}
	return d
}

// writeSentinelConf writes a sentinel's configuration as a new one: the
// master it monitors and the timings, and nothing it learned.
func (d *Sentinel) writeSentinelConf(t testing.TB, conf string) {
	t.Helper()
	text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
		"sentinel down-after-milliseconds %[1]s %[3]d\n"+
		"sentinel failover-timeout %[1]s %[4]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		d.Name, d.Master.port, DownAfter.Milliseconds(), 10*DownAfter.Milliseconds())
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// RestartSentinelFresh restarts sentinel i, on the same port, with a new
// configuration (a redeployed sentinel): it forgets the replicas it knew
// and learns them again from the master, which lists only those connected
// to it now. It returns once the sentinel knows the master again.
func (d *Sentinel) RestartSentinelFresh(t testing.TB, i int) {
	t.Helper()
	s := d.Sentinels[i]
	s.Stop()
	d.writeSentinelConf(t, s.conf)
	s.start()
	waitFor(t, 10*time.Second, func() bool {
		out, err := s.CLI("SENTINEL", "MASTER", d.Name)
		return err == nil && strings.Contains(out, "127.0.0.1")
	}, "sentinel %s to know the master again", s.Addr())
}

// StallLink holds replica i's link to the master: the master's writes
// stop reaching it, and its acknowledgements stop reaching the master,
// while both stay connected.
func (d *Sentinel) StallLink(i int) { d.links[i].Stall() }

// CutLink closes replica i's link, dropping what the stall held: the
// writes the master made meanwhile never reach the replica.
func (d *Sentinel) CutLink(i int) { d.links[i].Cut() }

// SentinelAddrs are the sentinels' host:port.
func (d *Sentinel) SentinelAddrs() []string {
	var a []string
	for _, s := range d.Sentinels {
		a = append(a, s.Addr())
	}
	return a
}

// MasterAddr asks a sentinel which address the master has now.
func (d *Sentinel) MasterAddr() string {
	for _, s := range d.Sentinels {
		out, err := s.CLI("SENTINEL", "GET-MASTER-ADDR-BY-NAME", d.Name)
		if f := strings.Fields(out); err == nil && len(f) == 2 {
			return f[0] + ":" + f[1]
		}
	}
	return ""
}

// Cluster is a Redis Cluster: masters, each with its replicas.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts masters*(1+replicas) nodes and joins them with
// `redis-cli --cluster create`: a node is failed over about a second
// (cluster-node-timeout) after it stops answering, and the cluster keeps
// serving the slots of the other masters meanwhile
// (cluster-require-full-coverage no). Every process is killed by its id
// when t ends.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	bin := binary(t)
	c := &Cluster{}
	var addrs []string
	for range masters * (1 + replicas) {
		n := startOn(t, bin, lowPort(t, true), "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
			"--cluster-require-full-coverage", "no")
		c.Nodes = append(c.Nodes, n)
		addrs = append(addrs, n.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.Nodes {
		waitFor(t, 20*time.Second, func() bool {
			out, _ := n.CLI("CLUSTER", "INFO")
			return strings.Contains(out, "cluster_state:ok")
		}, "cluster node %s to be ok", n.Addr())
	}
	// Every replica attached and synced, or a killed master has none to
	// take over.
	for _, n := range c.Nodes {
		waitFor(t, 20*time.Second, func() bool {
			out, _ := n.CLI("INFO", "replication")
			return strings.Contains(out, "role:master") || strings.Contains(out, "master_link_status:up")
		}, "cluster node %s to sync", n.Addr())
	}
	return c
}

// Addrs are the nodes' host:port.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr())
	}
	return a
}

// MasterOf returns the node that serves key's slot now.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Pid() == 0 {
			continue
		}
		out, err := n.CLI("CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		slot, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			continue
		}
		if owner := c.slotOwner(n, slot); owner != nil {
			return owner
		}
	}
	t.Fatalf("no node serves %q", key)
	return nil
}

// slotOwner reads CLUSTER SHARDS-less CLUSTER NODES from n: the master
// whose ranges hold slot.
func (c *Cluster) slotOwner(n *Server, slot int) *Server {
	out, err := n.CLI("CLUSTER", "NODES")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		for _, r := range f[8:] {
			lo, hi, found := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if found {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				for _, m := range c.Nodes {
					if m.Addr() == addr {
						return m
					}
				}
			}
		}
	}
	return nil
}

func waitFor(t testing.TB, within time.Duration, ok func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for "+what, args...)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
