package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Redis failovers under load, with real processes: two Caddy replicas
// share a Sentinel-managed master (or a Redis Cluster) and admit requests
// that each carry a fresh KYA-OS request proof. The replica's link is
// stalled, then the master is killed by its pid and the replica promoted.
// What a user must see: no proof admitted twice (the upstream got each
// request once, and every admitted proof sent again after the failover is
// refused), refusals during the failover are 503 never 401, and the edge
// admits again once the new master is in place.

// sent is one request proof sent during the load.
type sent struct {
	ref    string
	body   string
	status int
	at     time.Time
}

// failoverLoad sends fresh proofs to the edges in turn from a few workers
// until stop is closed, and returns what each got.
func failoverLoad(t *testing.T, edges []*harness, cred string, w *world, stop <-chan struct{}) []sent {
	var (
		mu   sync.Mutex
		out  []sent
		seq  atomic.Int64
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := seq.Add(1)
				ref := fmt.Sprintf("r%d", n)
				body := proveAs(t, w.agent, "did:web:mcp.example.test", time.Now(),
					`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"transfer","arguments":{"amount":"1.00","ref":"`+ref+`"}}}`)
				status, err := postProof(client, edges[(g+i)%len(edges)], cred, body)
				if err != nil {
					errs.Add(1)
					continue
				}
				mu.Lock()
				out = append(out, sent{ref: ref, body: body, status: status, at: time.Now()})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := errs.Load(); n > 0 {
		t.Errorf("%d requests got no HTTP answer at all", n)
	}
	return out
}

// postProof posts body with the credential and returns the HTTP status.
func postProof(c *http.Client, h *harness, cred, body string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, h.base+"/mcp", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("KYA-OS-Delegation-Credential", cred)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// checkFailover asserts what the user must see of a failover: statuses,
// the upstream's count of each request, replays refused, and admission
// again within recovered of the kill.
func checkFailover(t *testing.T, edges []*harness, cred string, results []sent, killed time.Time, recovered time.Duration) {
	t.Helper()
	var admitted []sent
	statuses := map[int]int{}
	var firstAfter time.Time
	for _, r := range results {
		statuses[r.status]++
		if r.status == http.StatusOK {
			admitted = append(admitted, r)
			if r.at.After(killed) && (firstAfter.IsZero() || r.at.Before(firstAfter)) {
				firstAfter = r.at
			}
		}
	}
	t.Logf("statuses during the load: %v; first admission %v after the kill", statuses, firstAfter.Sub(killed))
	for s, n := range statuses {
		if s != http.StatusOK && s != http.StatusServiceUnavailable {
			t.Errorf("%d requests got %d during the failover; refusals must be 503", n, s)
		}
	}
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Error("no request was refused with 503: the failover was not under load")
	}
	if firstAfter.IsZero() || firstAfter.Sub(killed) > recovered {
		t.Fatalf("the edge did not admit again within %v of the kill", recovered)
	}
	// Every admitted proof once more, at the other edge: refused, all.
	client := &http.Client{Timeout: 10 * time.Second}
	for i, r := range admitted {
		status, err := postProof(client, edges[(i+1)%len(edges)], cred, r.body)
		if err != nil {
			t.Fatalf("replay of %s: %v", r.ref, err)
		}
		if status == http.StatusOK {
			t.Errorf("proof %s (admitted at %v) was admitted again after the failover", r.ref, r.at.Sub(killed))
		}
	}
	// And the upstreams saw each admitted request once, and no other.
	seen := map[string]int{}
	for _, e := range edges {
		for _, req := range e.upstream.Requests() {
			if i := bytes.Index(req.Body, []byte(`"ref":"`)); i >= 0 {
				ref, _, _ := strings.Cut(string(req.Body[i+7:]), `"`)
				seen[ref]++
			}
		}
	}
	for _, r := range admitted {
		if seen[r.ref] != 1 {
			t.Errorf("upstream got request %s %d times", r.ref, seen[r.ref])
		}
	}
	if len(seen) != len(admitted) {
		t.Errorf("upstream got %d distinct requests, %d were admitted", len(seen), len(admitted))
	}
}

// failoverEdges starts two edges with nonce store store, and a credential
// both accept.
func failoverEdges(t *testing.T, store string) ([]*harness, *world, string) {
	storage := sharedStorage(t)
	extra := "level 2\nedge_did did:web:mcp.example.test\nrequest_proof required\n" + store
	a := startL3Edge(t, extra, jsonRPCUpstream(), storage)
	b := startL3Edge(t, extra, jsonRPCUpstream(), storage)
	w := newWorld(t, a)
	cred := w.jwt(t, func(tm *vc.Template) {
		tm.Audience = []string{a.hostAudience(), b.hostAudience()}
		tm.ExpiresAt = time.Now().Add(10 * time.Minute)
	})
	return []*harness{a, b}, w, cred
}

// stallAndKill runs the load, stalls the replica's link (stall), kills
// master while it is stalled, ends the stall (unstall) and keeps the load
// on until recovered(): the moment of the kill is returned with the
// results.
func stallAndKill(t *testing.T, edges []*harness, w *world, cred string, master *redistest.Server, stall, unstall func(), recovered func() bool) ([]sent, time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	stop := make(chan struct{})
	done := make(chan []sent, 1)
	go func() { done <- failoverLoad(t, edges, cred, w, stop) }()
	time.Sleep(time.Second)
	stall()
	time.Sleep(1500 * time.Millisecond)
	killed := time.Now()
	master.Stop() // SIGKILL, by its pid
	unstall()
	for !recovered() && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // admissions on the new master
	close(stop)
	return <-done, killed
}

// sentinelFailover runs a master, a replica and three sentinels under two
// edges with wait_replicas auto: stall(d) holds the replica's link, the
// master is killed, the link is cut, and once the sentinels have promoted
// the replica no proof may have been admitted twice and the edge must admit
// again within the given time of the kill.
func sentinelFailover(t *testing.T, stall func(d *redistest.Sentinel), within time.Duration) {
	d := redistest.StartSentinel(t, 1)
	edges, w, cred := failoverEdges(t, "nonce_store redis {\n sentinel "+d.Name+" "+strings.Join(d.SentinelAddrs(), " ")+"\n}")
	promoted := func() bool { return d.MasterAddr() == d.Replicas[0].Addr() }
	results, killed := stallAndKill(t, edges, w, cred, d.Master, func() { stall(d) }, func() { d.CutLink(0) }, promoted)
	if !promoted() {
		t.Fatal("the sentinels did not promote the replica")
	}
	checkFailover(t, edges, cred, results, killed, within)
}

// TestRedisSentinelFailoverNoReplays: the link is held, then cut with what
// it held: writes the master acknowledged in those 1.5 s never reach the
// replica it is replaced by. Only waiting for the replica keeps them from
// being admitted: with wait_replicas off, every proof admitted during the
// stall is admitted again after the failover.
func TestRedisSentinelFailoverNoReplays(t *testing.T) {
	sentinelFailover(t, func(d *redistest.Sentinel) { d.StallLink(0) }, 15*time.Second)
}

// TestRedisSentinelPartitionedReplicaNoReplays: the replica loses its
// link to the master (the master then counts no replica connected) but the
// sentinels still see it, and promote it when the master dies. Under
// wait_replicas auto the edge asks the sentinels, not only the master, how
// many replicas a failover could promote: it keeps waiting for one, refuses
// (503) while none acknowledges, and admits nothing twice.
func TestRedisSentinelPartitionedReplicaNoReplays(t *testing.T) {
	sentinelFailover(t, dropReplicaLink, 15*time.Second)
}

// dropReplicaLink drops the replica's link and holds its reconnection: the
// master forgets its replica, the sentinels do not.
func dropReplicaLink(d *redistest.Sentinel) {
	d.StallLink(0)
	d.CutLink(0)
	d.StallLink(0)
}

// TestRedisSentinelFreshSentinelNoReplays: as above, and the first
// sentinel the edge knows is then redeployed with a fresh configuration.
// It learns replicas from the master only, and lists none; the other two
// still list the cut replica and promote it when the master dies. The edge
// asks every sentinel and waits for the most replicas any of them lists:
// trusting the first that answers, it waits for nobody, and every proof
// admitted from then on is admitted again after the failover.
func TestRedisSentinelFreshSentinelNoReplays(t *testing.T) {
	// A sentinel restarted without its state may cost the election a
	// retry (one failover timeout, 10 s here) before the replica is
	// promoted: the edge's recovery is measured from the kill.
	sentinelFailover(t, func(d *redistest.Sentinel) {
		dropReplicaLink(d)
		d.RestartSentinelFresh(t, 0)
		if out, _ := d.Sentinels[0].CLI("SENTINEL", "REPLICAS", d.Name); strings.Contains(out, "127.0.0.1") {
			t.Logf("the restarted sentinel still lists a replica: %s", out)
		}
	}, 45*time.Second)
}

func TestRedisClusterFailoverNoReplays(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	// The master whose replica is stalled, then promoted.
	var master, replica *redistest.Server
	for _, n := range c.Nodes {
		out, _ := n.CLI("INFO", "replication")
		if strings.Contains(out, "role:slave") {
			for _, m := range c.Nodes {
				if strings.Contains(out, fmt.Sprintf("master_port:%d\r", m.Port())) {
					master, replica = m, n
				}
			}
		}
		if master != nil {
			break
		}
	}
	if master == nil {
		t.Fatal("no replica found in the cluster")
	}
	edges, w, cred := failoverEdges(t, "nonce_store redis {\n cluster "+strings.Join(c.Addrs(), " ")+"\n}")
	// A cluster replica's link is not ours to carry (the cluster names
	// the master's address), so it is cut from the replica's side and its
	// reconnection held: the replica drops the link and cannot log in to
	// the master again (a user the master does not have). Writes the
	// master takes from then on never reach the replica it is replaced by,
	// and the master no longer counts it; the cluster still lists it and
	// promotes it. Only waiting for the replicas the cluster lists keeps
	// those writes from being admitted: counting the master's connected
	// replicas alone, every proof admitted after the cut is admitted again
	// after the failover.
	results, killed := stallAndKill(t, edges, w, cred, master,
		func() {
			for _, cmd := range [][]string{{"CONFIG", "SET", "masteruser", "nobody"}, {"CONFIG", "SET", "masterauth", "wrong"}, {"CLIENT", "KILL", "TYPE", "master"}} {
				if out, err := replica.CLI(cmd...); err != nil {
					t.Errorf("cutting the replica's link: %v: %v %s", cmd, err, out)
				}
			}
		}, func() {}, func() bool {
			out, _ := replica.CLI("INFO", "replication")
			return strings.Contains(out, "role:master")
		})
	checkFailover(t, edges, cred, results, killed, 15*time.Second)
}
