package identity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Reputation defaults and limits.
const (
	defaultReputationCacheTTL = 5 * time.Minute
	defaultReputationTimeout  = time.Second
	// reputationFailureTTL caps how long a failed lookup is remembered, so
	// the endpoint is not asked on every request while it is down.
	reputationFailureTTL = 30 * time.Second
	maxReputationBody    = 16 << 10
	maxReputationEntries = 10000
	didPlaceholder       = "{did}"
)

// ReputationConfig says where X-Agent-Reputation-Score comes from. The
// score is informational: a lookup that fails (timeout, error status, a body
// that is not {"score": <number>}, a number out of range) only leaves the
// header out, it never fails the request.
type ReputationConfig struct {
	// Fixed scores by agent DID, 0 to 100. They take precedence over the
	// endpoint. (The Caddyfile also accepts 0.0 to 1.0 written with a
	// decimal point, and scales it.)
	Scores map[string]float64 `json:"scores,omitempty"`

	// URL of a reputation service, with {did} where the agent DID goes
	// (URL-escaped). It is asked with GET and must answer 200 with
	// {"score": <number>}: 0 to 100, or 0.0 to 1.0 written with a decimal
	// point (scaled to 0 to 100). Answers are cached.
	Endpoint string `json:"endpoint,omitempty"`

	// How long an endpoint answer is cached. Failures are cached for at
	// most 30s. Default: 5m.
	CacheTTL duration.Duration `json:"cache_ttl,omitempty"`

	// Timeout of one endpoint lookup; the request waits at most this long
	// for an uncached score. Default: 1s.
	Timeout duration.Duration `json:"timeout,omitempty"`
}

func (c *ReputationConfig) validate() error {
	if len(c.Scores) == 0 && c.Endpoint == "" {
		return errors.New("mcpi: reputation needs scores or an endpoint")
	}
	for did, s := range c.Scores {
		if _, err := didresolver.ParseDID(did); err != nil {
			return fmt.Errorf("mcpi: reputation score for %q: not a DID", did)
		}
		if math.IsNaN(s) || s < 0 || s > 100 {
			return fmt.Errorf("mcpi: reputation score for %q must be between 0 and 100, got %v", did, s)
		}
	}
	if c.Endpoint != "" {
		if !strings.Contains(c.Endpoint, didPlaceholder) {
			return fmt.Errorf("mcpi: reputation endpoint %q has no %s", c.Endpoint, didPlaceholder)
		}
		u, err := url.Parse(strings.ReplaceAll(c.Endpoint, didPlaceholder, "x"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcpi: reputation endpoint %q is not an absolute http(s) URL", c.Endpoint)
		}
	}
	if c.CacheTTL < 0 || c.Timeout < 0 {
		return errors.New("mcpi: reputation durations must not be negative")
	}
	return nil
}

// ParseReputationScore reads a score: 0 to 100, or a fraction 0.0 to 1.0 written
// with a decimal point (scaled to 0 to 100), rounded to two decimals.
func ParseReputationScore(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("score %q is not a number", s)
	}
	if strings.Contains(s, ".") && v >= 0 && v <= 1 {
		v *= 100
	}
	if v < 0 || v > 100 {
		return 0, fmt.Errorf("score %q is outside 0..100 (or 0.0..1.0)", s)
	}
	return math.Round(v*100) / 100, nil
}

func formatReputationScore(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// reputationSource answers the score of an agent: fixed, or from the
// endpoint through a bounded cache, one lookup per DID at a time.
type reputationSource struct {
	ctx     context.Context // cancelled at cleanup
	static  map[string]string
	tmpl    string
	inQuery bool // {did} sits in the query: escape it as a query value
	ttl     time.Duration
	timeout time.Duration
	client  *http.Client
	logger  *zap.Logger

	mu       sync.Mutex
	cache    map[string]repEntry
	inflight map[string]*repCall
}

type repEntry struct {
	score   string // "" when the lookup failed
	expires time.Time
}

type repCall struct {
	done  chan struct{}
	score string
}

func newReputationSource(ctx context.Context, c *ReputationConfig, logger *zap.Logger) (*reputationSource, error) {
	s := &reputationSource{
		ctx:      ctx,
		static:   make(map[string]string, len(c.Scores)),
		tmpl:     c.Endpoint,
		ttl:      time.Duration(c.CacheTTL),
		timeout:  time.Duration(c.Timeout),
		logger:   logger,
		cache:    make(map[string]repEntry),
		inflight: make(map[string]*repCall),
	}
	for did, v := range c.Scores {
		s.static[did] = formatReputationScore(math.Round(v*100) / 100)
	}
	if s.ttl == 0 {
		s.ttl = defaultReputationCacheTTL
	}
	if s.timeout == 0 {
		s.timeout = defaultReputationTimeout
	}
	if q := strings.IndexByte(s.tmpl, '?'); q >= 0 && strings.Index(s.tmpl, didPlaceholder) > q {
		s.inQuery = true
	}
	s.client = &http.Client{
		Timeout:       s.timeout,
		Transport:     &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// score returns the header value for did, and false when there is none.
func (s *reputationSource) score(ctx context.Context, did string) (string, bool) {
	if v, ok := s.static[did]; ok {
		return v, true
	}
	if s.tmpl == "" {
		return "", false
	}
	now := time.Now()
	s.mu.Lock()
	if e, ok := s.cache[did]; ok && now.Before(e.expires) {
		s.mu.Unlock()
		return e.score, e.score != ""
	}
	call, running := s.inflight[did]
	if !running {
		call = &repCall{done: make(chan struct{})}
		s.inflight[did] = call
		go s.lookup(did, call)
	}
	s.mu.Unlock()
	select {
	case <-call.done:
		return call.score, call.score != ""
	case <-ctx.Done():
		return "", false
	}
}

// lookup asks the endpoint, caches the answer and wakes the waiters. It
// runs on the source's context (bounded by the timeout), not the request's,
// since other requests may wait for it.
func (s *reputationSource) lookup(did string, call *repCall) {
	score, err := s.fetch(did)
	ttl := s.ttl
	if err != nil {
		ttl = min(ttl, reputationFailureTTL)
		if c := s.logger.Check(zapcore.DebugLevel, "reputation lookup failed"); c != nil {
			c.Write(zap.String("agent_did", did), zap.Error(err))
		}
	}
	s.mu.Lock()
	if len(s.cache) >= maxReputationEntries {
		now := time.Now()
		for k, e := range s.cache {
			if !now.Before(e.expires) {
				delete(s.cache, k)
			}
		}
		for k := range s.cache {
			if len(s.cache) < maxReputationEntries {
				break
			}
			delete(s.cache, k)
		}
	}
	if s.ctx.Err() == nil {
		s.cache[did] = repEntry{score: score, expires: time.Now().Add(ttl)}
	}
	delete(s.inflight, did)
	call.score = score
	s.mu.Unlock()
	close(call.done)
}

func (s *reputationSource) fetch(did string) (string, error) {
	esc := url.PathEscape(did)
	if s.inQuery {
		esc = url.QueryEscape(did)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.ReplaceAll(s.tmpl, didPlaceholder, esc), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("reputation endpoint answered HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReputationBody+1))
	if err != nil {
		return "", err
	}
	if len(body) > maxReputationBody {
		return "", errors.New("reputation answer too large")
	}
	score, err := reputationScore(body)
	if err != nil {
		return "", err
	}
	f, err := ParseReputationScore(score)
	if err != nil {
		return "", err
	}
	return formatReputationScore(f), nil
}

var errReputationAnswer = errors.New(`reputation answer is not {"score": <number>}`)

// reputationScore returns the score of a reputation answer, a JSON number
// as written. The answer is read strictly (jsonscan.Object): one object,
// nothing after it, no member name repeated in some letter case and no
// "Score" for "score", since readers that keep the first repeat, or match
// case-insensitively, would see another score than the edge forwards.
func reputationScore(body []byte) (string, error) {
	m, err := jsonscan.Object(body, "score")
	if err != nil {
		return "", errReputationAnswer
	}
	v := m["score"]
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return "", errReputationAnswer
	}
	return string(v), nil
}

// Reputation returns the score of the agent did, 0 to 100, as the
// X-Agent-Reputation-Score header would carry it; false when there is no
// reputation source or no score (a failed lookup, like the header, is no
// score).
func (id *Identity) Reputation(ctx context.Context, did string) (float64, bool) {
	if id == nil || id.rep == nil || did == "" {
		return 0, false
	}
	s, ok := id.rep.score(ctx, did)
	if !ok {
		return 0, false
	}
	v, err := ParseReputationScore(s)
	return v, err == nil
}
