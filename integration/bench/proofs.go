package main

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// The 2026-era configurations: b-2026 (framing headers on a stateless
// request) and p, p-redis (a fresh KYA-OS request proof on every request).
// A proof is good for at most 60 s and its nonce for one request, so p's
// bodies cannot be minted once for the whole run like c's credentials: a
// pool is minted right before each run of p (Caddy idle, so its CPU figures
// do not see the minting), sized from the fastest rate measured so far,
// and wrk sends each body once.

// body2026 is the bench's tools/call as a 2026-era client sends it (the
// same as bench.lua's call2026).
const body2026 = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`

const (
	// proofRateGuess is the rate a proof pool is sized for before any run
	// has been measured: above what (a) reaches on the bench's machines.
	proofRateGuess = 30_000
	// proofPoolMax bounds one pool (about 1 KiB a body, held by the
	// harness and by wrk).
	proofPoolMax = 300_000
	// proofRunMax is the longest run of p: minting, the run and the skew
	// must fit in a proof's 60 s window.
	proofRunMax = 40 * time.Second
	// proofNonceEntries is p's memory nonce store bound. Every admitted
	// proof holds an entry for 71 s (docs/protocol/kyaos.md#order-of-checks); the default 100000
	// would refuse (503) the bench's rate after a few seconds, as it would
	// any deployment serving more than 1400 proofs/s. Sized as a real one
	// would be: peak rate × 71 s.
	proofNonceEntries = 1_500_000
)

// proofPool is the signed bodies of the current run of p, and what minting
// them took over the whole bench.
type proofPool struct {
	file     string
	size     int // bodies in file
	minted   int // over every run
	mint     time.Duration
	runs     int
	bodySize int
	repeats  int64 // bodies sent a second time (the pool ran out)
}

// proofSigner is the agent that signs p's requests: the subject of the
// bench credential, as the edge requires (delegation_holder_mismatch).
// audience is the server's the proofs go to (bench.signerFor).
type proofSigner struct {
	key      crypto.PrivateKey
	kid      string
	audience string
}

// proofPoolSize is how many bodies a run of d needs at peak req/s (the
// fastest rate seen so far; proofRateGuess before any), with a quarter to
// spare and a body for every connection's last request in flight.
func proofPoolSize(peak float64, d time.Duration, conns int) int {
	if !(peak > 0) {
		peak = proofRateGuess
	}
	n := int(math.Ceil(peak*1.25*float64(wrkSeconds(d)))) + conns
	return min(n, proofPoolMax)
}

// signBodies signs n copies of body2026, each with its own nonce, created
// now, on every core.
func signBodies(n int, s proofSigner, now time.Time) ([][]byte, error) {
	out := make([][]byte, n)
	err := onEveryCore(n, func(i int) error {
		signed, _, err := kyaos.SignRequest([]byte(body2026), s.key, kyaos.SignOptions{KID: s.kid, Audience: s.audience, Now: now})
		if err != nil {
			return err
		}
		if bytes.IndexByte(signed, '\n') >= 0 {
			return errors.New("a signed body spans lines")
		}
		out[i] = signed
		return nil
	})
	return out, err
}

// proofPoolOf is the pool c's run sends: p's own, or for (a), paired with
// p, one of its own. (a) verifies no proof, but a body of p's sent to it
// would be one p could not send again.
func (b *bench) proofPoolOf(c config) *proofPool {
	if c.name == "a" {
		return &b.plainProofs
	}
	return &b.proofs
}

// mintProofs writes a fresh pool for one run of c lasting d.
func (b *bench) mintProofs(c config, d time.Duration) error {
	if time.Duration(wrkSeconds(d))*time.Second > proofRunMax {
		return fmt.Errorf("configuration %s: a run of %v outlives its request proofs (at most %v)", c.name, d, proofRunMax)
	}
	pool := b.proofPoolOf(c)
	n := proofPoolSize(b.peak, d, b.opts.Connections)
	start := time.Now()
	bodies, err := signBodies(n, b.signerFor(c), start)
	if err != nil {
		return fmt.Errorf("signing request proofs for %s: %w", c.name, err)
	}
	f, err := os.Create(pool.file)
	if err != nil {
		return err
	}
	for _, body := range bodies {
		if _, err := f.Write(append(body, '\n')); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	took := time.Since(start)
	pool.size = n
	pool.minted += n
	pool.mint += took
	pool.runs++
	pool.bodySize = len(bodies[0])
	b.logf("  %-7s minted %d request proofs in %v", c.name, n, took.Round(time.Millisecond))
	return nil
}

// proofsUsed records what a run of c with request proofs sent: a body sent
// twice is a replay, which p's edge refuses, so p running out is a
// problem. (a) verifies none: its repeats are only counted.
func (b *bench) proofsUsed(c config, where string, used int64) {
	pool := b.proofPoolOf(c)
	over := used - int64(pool.size)
	if over <= 0 {
		return
	}
	pool.repeats += over
	if pool == &b.plainProofs {
		return
	}
	b.problem("%s: wrk sent %d requests from a pool of %d request proofs (sized for %.0f req/s); the repeats were refused as replays",
		where, used, pool.size, b.peak)
}

// sanity2026 checks a 2026-era route before any load: a good request
// reaches the upstream, and what the route claims to check is checked —
// a Mcp-Name that disagrees with the body is refused (-32020); with
// proofs, a replayed proof and a missing one are refused.
func (b *bench) sanity2026(c config) error {
	good := body2026
	if c.load == loadProof {
		signed, err := signBodies(1, b.signerFor(c), time.Now())
		if err != nil {
			return err
		}
		good = string(signed[0])
	}
	if status, body, err := b.post2026(c, good, "greet"); err != nil || status != http.StatusOK || body != upstreamResult {
		return fmt.Errorf("a good 2026 request: HTTP %d %.300s (%v)", status, body, err)
	}
	type refusal struct{ what, body, name, want string }
	refusals := []refusal{{"Mcp-Name disagreeing with params.name", body2026, "other", `"code":-32020`}}
	if c.load == loadProof {
		refusals = append(refusals,
			refusal{"the same proof again", good, "greet", "nonce_replayed"},
			refusal{"no proof", body2026, "greet", "proof_missing"})
	}
	for _, r := range refusals {
		status, body, err := b.post2026(c, r.body, r.name)
		if err != nil {
			return err
		}
		if status == http.StatusOK || !strings.Contains(body, r.want) {
			return fmt.Errorf("%s: want a refusal with %s, got HTTP %d %.300s", r.what, r.want, status, body)
		}
	}
	return nil
}

// post2026 sends body to c's route as a 2026-era client, with the bench
// credential, Mcp-Name name.
func (b *bench) post2026(c config, body, name string) (int, string, error) {
	req, err := b.newPost(c, body)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+b.token(c))
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	resp, err := metricsClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got), err
}
