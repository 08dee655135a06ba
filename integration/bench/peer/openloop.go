package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// OpenLoopResult is the JSON line printed by the openloop mode.
type OpenLoopResult struct {
	// Rate is the rate asked for, requests per second.
	Rate int `json:"rate"`
	// Requests is how many requests were sent (each gets one result).
	Requests int64 `json:"requests"`
	// SentRate is the rate at which they were sent: requests over the
	// time from the first to the last send (vegeta's Metrics.Rate).
	SentRate float64 `json:"sent_rate"`
	// Seconds is from the first send to the last response.
	Seconds float64 `json:"seconds"`
	// Errors counts transport errors, statuses other than 200 and
	// answers other than the upstream's result.
	Errors     int64          `json:"errors"`
	FirstError string         `json:"first_error,omitempty"`
	Status     map[string]int `json:"status"`
	// Latency percentiles (exact, nearest rank over every request) from
	// the moment a request was sent to the end of its response body.
	P50us  float64 `json:"p50_us"`
	P90us  float64 `json:"p90_us"`
	P99us  float64 `json:"p99_us"`
	P999us float64 `json:"p999_us"`
	MaxUS  float64 `json:"max_us"`
	// LagP99us and LagMaxUS are how late requests left against the
	// schedule (request k is due at start + (k+1)/rate): the load
	// generator's own delay, which latency measured from the send does
	// not include. Near zero means the schedule was kept.
	LagP99us float64 `json:"lag_p99_us"`
	LagMaxUS float64 `json:"lag_max_us"`
	// Connections is how many TCP connections were opened: keep-alive
	// connections are reused, so this stays far below Requests.
	Connections int64 `json:"connections"`
	// Vegeta is the version of vegeta this binary was built with.
	Vegeta string `json:"vegeta"`
}

// openLoop sends one tools/call POST to -url at a constant -rate for -d
// with vegeta's attacker, which is open-loop: it schedules every request
// by the rate, not by the answers, and starts another worker rather than
// wait for a slow answer. The requests share at most -conns keep-alive
// connections, as wrk's do; one that finds them all busy waits for one,
// and that wait is part of its latency (vegeta times a request from the
// moment its worker takes it up, before it asks for a connection). So a
// stall of the server shows up as the latency of every request sent
// during it instead of as requests not sent: no coordinated omission.
func openLoop(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("openloop", flag.ExitOnError)
	url := fs.String("url", "", "target URL, http://127.0.0.1:<port>/<config>/mcp")
	credFile := fs.String("cred", "", "file holding the credential sent as Authorization: Bearer")
	rate := fs.Int("rate", 1000, "requests per second")
	dur := fs.Duration("d", 5*time.Second, "duration of the sending")
	workers := fs.Uint64("workers", 32, "initial workers (more are started when all are busy)")
	maxConns := fs.Int("conns", 32, "keep-alive connections at most; 0 for no limit")
	timeout := fs.Duration("timeout", 10*time.Second, "timeout of one request")
	_ = fs.Parse(args)
	if *url == "" || *rate < 1 || *dur <= 0 {
		return errors.New("openloop: -url, a positive -rate and -d are required")
	}
	hdr := http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json, text/event-stream"},
	}
	if *credFile != "" {
		cred, err := os.ReadFile(*credFile)
		if err != nil {
			return err
		}
		hdr.Set("Authorization", "Bearer "+strings.TrimSpace(string(cred)))
	}
	target := vegeta.Target{
		Method: http.MethodPost,
		URL:    *url,
		Body:   []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`),
		Header: hdr,
	}

	// vegeta's own transport settings but for the limit on connections,
	// with a dialer that counts them.
	var conns atomic.Int64
	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	client := &http.Client{
		Timeout: *timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				conns.Add(1)
				return dialer.DialContext(ctx, network, addr)
			},
			MaxIdleConnsPerHost: vegeta.DefaultConnections,
			MaxConnsPerHost:     *maxConns,
			DisableCompression:  true,
		},
	}
	atk := vegeta.NewAttacker(
		vegeta.Client(client),
		vegeta.KeepAlive(true),
		vegeta.Workers(*workers),
		vegeta.MaxWorkers(math.MaxUint64),
		vegeta.Redirects(vegeta.NoFollow),
	)
	pacer := vegeta.ConstantPacer{Freq: *rate, Per: time.Second}
	interval := time.Duration(time.Second.Nanoseconds() / int64(*rate)) // as the pacer spaces them

	var (
		m          vegeta.Metrics
		lat, lag   []time.Duration
		errs       int64
		firstError string
	)
	lat = make([]time.Duration, 0, int(float64(*rate)*dur.Seconds())+16)
	lag = make([]time.Duration, 0, cap(lat))
	want := []byte(Result)
	start := time.Now() // the attacker's own start is a moment later
	for res := range atk.Attack(vegeta.NewStaticTargeter(target), pacer, *dur, "") {
		m.Add(res)
		lat = append(lat, res.Latency)
		due := start.Add(time.Duration(res.Seq+1) * interval)
		lag = append(lag, max(0, res.Timestamp.Sub(due)))
		var bad string
		switch {
		case res.Error != "":
			bad = res.Error
		case res.Code != http.StatusOK:
			bad = fmt.Sprintf("HTTP %d", res.Code)
		case !bytes.Equal(res.Body, want):
			bad = fmt.Sprintf("unexpected answer %.200q", res.Body)
		}
		if bad != "" {
			errs++
			if firstError == "" {
				firstError = bad
			}
		}
	}
	m.Close()

	out := OpenLoopResult{
		Rate:        *rate,
		Requests:    int64(m.Requests),
		SentRate:    m.Rate,
		Seconds:     (m.Duration + m.Wait).Seconds(),
		Errors:      errs,
		FirstError:  firstError,
		Status:      m.StatusCodes,
		Connections: conns.Load(),
		Vegeta:      vegetaVersion(),
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		slices.Sort(lag)
		out.P50us = micros(rank(lat, 0.50))
		out.P90us = micros(rank(lat, 0.90))
		out.P99us = micros(rank(lat, 0.99))
		out.P999us = micros(rank(lat, 0.999))
		out.MaxUS = micros(lat[len(lat)-1])
		out.LagP99us = micros(rank(lag, 0.99))
		out.LagMaxUS = micros(lag[len(lag)-1])
	}
	return json.NewEncoder(w).Encode(out)
}

// vegetaVersion is the version of vegeta's module in this binary.
func vegetaVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tsenart/vegeta/v12" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// rank is the nearest-rank q-quantile of sorted xs.
func rank(xs []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
