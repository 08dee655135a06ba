package authzen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Deciding many requests at once: a tools/list asks the PDP about every
// listed tool. One Access Evaluations request (AuthZEN 1.0's batch
// endpoint, /access/v1/evaluations beside /access/v1/evaluation) carries
// them all; a PDP without that endpoint is asked once per request, a few
// at a time, all within one timeout.

// Bounds of EvaluateEach.
const (
	// MaxEach is the most requests EvaluateEach decides; those past it
	// get no decision.
	MaxEach = 500
	// MaxBatchAnswerSize bounds the Access Evaluations answer.
	MaxBatchAnswerSize = 512 << 10
	// eachParallel is how many single evaluations run at once when the
	// PDP has no batch endpoint.
	eachParallel = 8
)

// Result is the outcome of one request of EvaluateEach: a decision, or
// Err when there is none (the caller fails closed).
type Result struct {
	Decision
	Err error
}

// batchURL is the Access Evaluations endpoint beside the evaluation
// endpoint url, "" when url does not end in the API's path.
func batchURL(url string) string {
	if strings.HasSuffix(url, EvaluationPath) {
		return url + "s"
	}
	return ""
}

// EvaluateEach decides reqs, which share subject, action and context and
// differ in the resource, answering from the cache where it can, in one
// Access Evaluations request when the PDP offers the endpoint, else one
// evaluation per request. It takes at most about the client's timeout.
func (c *Client) EvaluateEach(ctx context.Context, reqs []*Request) []Result {
	out := make([]Result, len(reqs))
	keys := make([][32]byte, len(reqs))
	var miss []int
	now := c.now()
	for i, r := range reqs {
		if i >= MaxEach {
			out[i].Err = fmt.Errorf("%w: more than %d tools to decide at once", ErrPDP, MaxEach)
			continue
		}
		body, err := json.Marshal(r)
		if err != nil {
			out[i].Err = fmt.Errorf("%w: the request cannot be written: %v", ErrPDP, err)
			continue
		}
		keys[i] = sha256.Sum256(body)
		if d, ok := c.cache.get(keys[i], now); ok {
			out[i].Decision = d
			continue
		}
		miss = append(miss, i)
	}
	if len(miss) == 0 {
		return out
	}
	if bu := batchURL(c.url); bu != "" && !c.noBatch.Load() {
		if ok := c.batch(ctx, bu, reqs, miss, keys, out); ok {
			return out
		}
	}
	c.each(ctx, reqs, miss, keys, out)
	return out
}

// batchRequest is an Access Evaluations request: the shared subject,
// action and context, and a resource per evaluation.
type batchRequest struct {
	Subject     Entity            `json:"subject"`
	Action      Action            `json:"action"`
	Context     map[string]any    `json:"context,omitempty"`
	Evaluations []batchEvaluation `json:"evaluations"`
}

type batchEvaluation struct {
	Resource Entity `json:"resource"`
}

// batch asks about reqs[miss] in one request to url and fills out; false
// when the PDP does not offer the endpoint (404, 405, 501), for the
// caller to ask one by one.
func (c *Client) batch(ctx context.Context, url string, reqs []*Request, miss []int, keys [][32]byte, out []Result) bool {
	first := reqs[miss[0]]
	br := batchRequest{Subject: first.Subject, Action: first.Action, Context: first.Context}
	for _, i := range miss {
		br.Evaluations = append(br.Evaluations, batchEvaluation{Resource: reqs[i].Resource})
	}
	fail := func(err error) bool {
		for _, i := range miss {
			out[i].Err = err
		}
		return true
	}
	body, err := json.Marshal(br)
	if err != nil {
		return fail(fmt.Errorf("%w: the request cannot be written: %v", ErrPDP, err))
	}
	b, keep, status, err := c.exchange(ctx, url, body, MaxBatchAnswerSize)
	switch {
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented:
		c.noBatch.Store(true)
		return false
	case err != nil:
		return fail(err)
	}
	ds, err := ParseBatchAnswer(b)
	if err != nil {
		return fail(err)
	}
	now := c.now()
	for k, i := range miss {
		if k >= len(ds) {
			// A PDP may stop early (a short-circuit semantic the edge
			// did not ask for): what it did not decide is not allowed.
			out[i].Err = fmt.Errorf("%w: the PDP answered %d of %d evaluations", ErrAnswer, len(ds), len(miss))
			continue
		}
		out[i].Decision = ds[k]
		if keep {
			c.cache.put(keys[i], ds[k], now)
		}
	}
	return true
}

// each asks about reqs[miss] one by one, a few at a time, until ctx is
// done or the client's timeout has passed.
func (c *Client) each(ctx context.Context, reqs []*Request, miss []int, keys [][32]byte, out []Result) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, eachParallel)
	for _, i := range miss {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i].Decision, _, out[i].Err = c.Evaluate(ctx, reqs[i])
		}()
	}
	wg.Wait()
}

// ParseBatchAnswer reads an Access Evaluations response: a JSON object
// whose "evaluations" is an array of Access Evaluation responses, in the
// order of the request's, each read as ParseAnswer reads one. Member
// names are matched exactly, as ParseAnswer matches them.
func ParseBatchAnswer(body []byte) ([]Decision, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrAnswer)
	}
	a, err := jsonscan.Object(body, "evaluations")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAnswer, err)
	}
	raw := a["evaluations"]
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("%w: no \"evaluations\" array", ErrAnswer)
	}
	c := jsonscan.NewCursor(raw)
	if !c.Array() {
		return nil, fmt.Errorf("%w: \"evaluations\" is not an array of objects", ErrAnswer)
	}
	var out []Decision
	for k := 0; c.NextElement(); k++ {
		start, end := c.Skip()
		d, err := ParseAnswer(raw[start:end])
		if err != nil {
			return nil, fmt.Errorf("evaluation %d: %w", k, err)
		}
		out = append(out, d)
	}
	if out == nil {
		out = []Decision{}
	}
	return out, nil
}
