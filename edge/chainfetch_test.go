package edge

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Tests of chainfetch.go: chain_fetch through the handler, its Caddyfile
// and its validation.

// credServer serves parent credentials over TLS (httptest's certificate,
// for 127.0.0.1).
type credServer struct {
	*httptest.Server
	mu    sync.Mutex
	paths map[string]string // path → VC-JWT
	hits  map[string]int
}

func newCredServer(t testing.TB) *credServer {
	s := &credServer{paths: map[string]string{}, hits: map[string]int{}}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.hits[r.URL.Path]++
		b, ok := s.paths[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vc+jwt")
		_, _ = w.Write([]byte(b))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *credServer) set(path, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paths[path] = body
}

func (s *credServer) hitCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// leafNaming is a delegation from c.mid to the agent whose parent is the
// root, named by parentId and by parentCredentialUrl url.
func (c chainFixture) leafNaming(t testing.TB, url string) string {
	t.Helper()
	return issueAs(t, c.mid, c.template(func(tm *vc.Template) {
		tm.ID = "urn:uuid:" + randomID(t)
		tm.Scopes = []string{"tools:read"}
	}), func(_, cred map[string]any) {
		setDelegation(cred, "parentId", c.rootDlgt)
		setDelegation(cred, "parentCredentialUrl", url)
	})
}

func TestChainFetchHandler(t *testing.T) {
	c := newChainFixture(t)
	srv := newCredServer(t)
	srv.set("/chain/root", c.root)
	fetching := func(mod func(*setup)) *Handler {
		return c.handler(t, func(c *setup) {
			c.AllowPrivateDIDWeb = true
			c.ChainFetch = &ChainFetchConfig{Allow: []string{srv.URL + "/chain/"}, client: srv.Client()}
			if mod != nil {
				mod(c)
			}
		})
	}
	h := fetching(nil)
	leaf := c.leafNaming(t, srv.URL+"/chain/root")

	t.Run("leaf alone, parent fetched", func(t *testing.T) {
		res := serve(t, h, bearer(leaf))
		wantAdmitted(t, res)
		for k, want := range map[string]string{
			"mcpi.user_did": c.user.did, "mcpi.agent_did": c.agent.did, "mcpi.issuer": c.mid.did,
		} {
			if got, _ := res.repl.GetString(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		wantAdmitted(t, serve(t, h, bearer(vpOf(t, c.agent, "", nil, leaf))))
		if n := srv.hitCount("/chain/root"); n != 1 {
			t.Errorf("parent fetched %d times", n)
		}
	})
	t.Run("parent presented: not fetched", func(t *testing.T) {
		other := c.leafNaming(t, srv.URL+"/chain/presented")
		r := bearer(other)
		r.Header.Set("KYA-OS-Delegation-Chain", c.root)
		wantAdmitted(t, serve(t, h, r))
		if n := srv.hitCount("/chain/presented"); n != 0 {
			t.Errorf("fetched %d times", n)
		}
	})
	t.Run("fetch off", func(t *testing.T) {
		off := c.handler(t, func(c *setup) { c.AllowPrivateDIDWeb = true })
		wantRejected(t, serve(t, off, bearer(leaf)), http.StatusUnauthorized, "chain_incomplete")
	})
	t.Run("URL not on the allow-list", func(t *testing.T) {
		res := serve(t, h, bearer(c.leafNaming(t, srv.URL+"/elsewhere/root")))
		wantRejected(t, res, http.StatusUnauthorized, "chain_incomplete")
		if n := srv.hitCount("/elsewhere/root"); n != 0 {
			t.Errorf("fetched %d times", n)
		}
	})
	t.Run("not found", func(t *testing.T) {
		res := serve(t, h, bearer(c.leafNaming(t, srv.URL+"/chain/missing")))
		wantRejected(t, res, http.StatusServiceUnavailable, "chain_fetch_failed")
		b := decodeErr(t, res.rec)
		if b.Error != "temporarily_unavailable" || b.ErrorDescription != vc.ErrChainFetch.Error() {
			t.Errorf("body %+v", b)
		}
		if res.rec.Header().Get("WWW-Authenticate") != "" {
			t.Error("503 with a credential challenge")
		}
	})
	t.Run("forged parent", func(t *testing.T) {
		srv.set("/chain/forged", tamperJWS(c.root))
		wantRejected(t, serve(t, h, bearer(c.leafNaming(t, srv.URL+"/chain/forged"))), http.StatusUnauthorized, "bad_signature")
	})
	t.Run("private address refused by default", func(t *testing.T) {
		guarded := fetching(func(c *setup) { c.AllowPrivateDIDWeb = false })
		wantRejected(t, serve(t, guarded, bearer(c.leafNaming(t, srv.URL+"/chain/root"))), http.StatusServiceUnavailable, "chain_fetch_failed")
	})
	t.Run("defaults", func(t *testing.T) {
		cf := h.cfg.ChainFetch
		if cf.Timeout != Duration(5*time.Second) || cf.MaxSize != 64<<10 || cf.CacheTTL != Duration(5*time.Minute) {
			t.Errorf("defaults %+v", cf)
		}
	})
}
