package authserver

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSessionIDs: a session id is accepted only as this server made it:
// any change, another server's id, or another shape is not one.
func TestSessionIDs(t *testing.T) {
	s, other := newTestServer(t), newTestServer(t)
	exp := time.Now().Add(time.Minute).Truncate(time.Second)
	id := s.newSID("did:key:zAgent", exp)
	sess, err := s.parseSID(id)
	if err != nil || !sess.Expires.Equal(exp) || sess.AgentTag == "" || sess.ID != id {
		t.Fatalf("own id %q: %+v %v", id, sess, err)
	}
	if sess2, _ := s.parseSID(s.newSID("did:key:zOther", exp)); sess2.AgentTag == sess.AgentTag {
		t.Error("two agents' sessions share an owner tag")
	}
	flip := []byte(id)
	flip[len(flip)-1] ^= 1
	if flip[len(flip)-1] > 'f' || flip[len(flip)-1] < '0' {
		flip[len(flip)-1] = '0'
	}
	for _, bad := range []string{
		"", "kya-", "kya-00", id[:len(id)-1], id + "0", strings.ToUpper(id), "KYA-" + id[4:],
		"kyb-" + id[4:], string(flip), other.newSID("did:key:zAgent", exp),
		"kya-" + strings.Repeat("0", 64), "kya-" + strings.Repeat("g", 64), id + "/x", " " + id,
	} {
		if _, err := s.parseSID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestTickets: a consent link opens only as the edge made it, unexpired;
// a parameter changed, missing or repeated is refused.
func TestTickets(t *testing.T) {
	s := newTestServer(t)
	now := time.Now()
	link, ok := s.ConsentURL("https://edge.example", AgentPrompt{AgentDID: "did:key:zA", Tool: "t", Missing: []string{"a"}}, "resume1", now)
	if !ok {
		t.Fatal("no link")
	}
	u, _ := url.Parse(link)
	good := u.Query()
	if tk, err := s.readTicket(good, now); err != nil || tk.Key != "resume1" || tk.AgentDID != "did:key:zA" || strings.Join(tk.Grant, " ") != "a" {
		t.Fatalf("own ticket: %+v %v", tk, err)
	}
	if _, err := s.readTicket(good, now.Add(agentConsentTTL+time.Second)); err != errTicketExpired {
		t.Errorf("late: %v, want expired", err)
	}
	for name, mutate := range map[string]func(url.Values){
		"agent changed":    func(v url.Values) { v.Set("agent_did", "did:key:zB") },
		"grant widened":    func(v url.Values) { v.Set("grant", "a b") },
		"kind changed":     func(v url.Values) { v.Set("kind", kindPickup) },
		"key changed":      func(v url.Values) { v.Set("key", "resume2") },
		"exp extended":     func(v url.Values) { v.Set("exp", "99999999999") },
		"exp not a number": func(v url.Values) { v.Set("exp", "soon") },
		"mac missing":      func(v url.Values) { v.Del(ticketMACParam) },
		"mac garbled":      func(v url.Values) { v.Set(ticketMACParam, "%%%") },
		"tool repeated":    func(v url.Values) { v.Add("tool", "t") },
		"param too long":   func(v url.Values) { v.Set("tool", strings.Repeat("t", maxParamLen+1)) },
	} {
		v := url.Values{}
		for k, vs := range good {
			v[k] = append([]string(nil), vs...)
		}
		mutate(v)
		if _, err := s.readTicket(v, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A scope the route does not have cannot be consented to.
	if _, ok := s.ConsentURL("https://edge.example", AgentPrompt{AgentDID: "did:key:zA", Missing: []string{"zzz"}}, "r", now); ok {
		t.Error("a link for a scope the route does not have")
	}
}

// TestPickupTokens: base64url, 43 to 128 characters.
func TestPickupTokens(t *testing.T) {
	for tok, ok := range map[string]bool{
		strings.Repeat("A", 43):       true,
		strings.Repeat("a-_", 20):     true,
		strings.Repeat("A", 128):      true,
		strings.Repeat("A", 42):       false,
		strings.Repeat("A", 129):      false,
		strings.Repeat("A", 42) + "=": false,
		strings.Repeat("A", 42) + "+": false,
		strings.Repeat("A", 42) + " ": false,
		"":                            false,
	} {
		if validPickupToken(tok) != ok {
			t.Errorf("%q: want %t", tok, ok)
		}
	}
}

func FuzzSessionID(f *testing.F) {
	s := newTestServer(f)
	f.Add(s.newSID("did:key:zA", time.Now().Add(time.Minute)))
	f.Add("kya-" + strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, id string) {
		sess, err := s.parseSID(id)
		if err == nil && (sess.ID != id || len(id) != sidTextLen) {
			t.Fatalf("accepted %q as %+v", id, sess)
		}
	})
}

func FuzzTicket(f *testing.F) {
	s := newTestServer(f)
	now := time.Now()
	link, _ := s.ConsentURL("https://edge.example", AgentPrompt{AgentDID: "did:key:zA", Tool: "t", Missing: []string{"a"}}, "r", now)
	u, _ := url.Parse(link)
	f.Add(u.RawQuery)
	f.Add("kind=resume&key=r&agent_did=x&tool=&missing=&grant=a&exp=1&kya_ticket=AA")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		tk, err := s.readTicket(v, now)
		if err == nil && (tk.AgentDID == "" || len(tk.Grant) == 0 || !now.Before(tk.Expires)) {
			t.Fatalf("accepted an incomplete ticket %+v", tk)
		}
	})
}

func FuzzPickupToken(f *testing.F) {
	f.Add(strings.Repeat("A", 43))
	f.Fuzz(func(t *testing.T, tok string) {
		if validPickupToken(tok) && (len(tok) < minPickupToken || len(tok) > maxPickupToken || strings.ContainsAny(tok, "+/= \t")) {
			t.Fatalf("accepted %q", tok)
		}
	})
}
