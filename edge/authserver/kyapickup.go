package authserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// The draft-kya-http-02 pickup endpoint: GET /oauth/kya/pickup/<sid>
// with X-KYA-Pickup-Token. The first poll pins the SHA-256 of its token
// to the session; later polls with another token are refused. Answers:
// 202 pending, 200 ready with the delegation, 403 kyaos/pickup-pinned, 404
// kyaos/invalid-session, 410 kyaos/pickup-expired, 429 (faster than the
// interval) with Retry-After, 401 without a token; every one no-store.
//
// The delegation is handed out once: the first 200 takes it from the
// store, and later polls get 410 saying so. The reference answers 200
// again and again; but the pickup token travels in a header that access
// logs record, and a log reader holding it could then collect the
// delegation as often as the agent. Taking it also settles racing first
// polls: whatever they pinned, one of them gets it.

const (
	pathPickup        = "/oauth/kya/pickup/"
	pickupTokenHeader = "X-KYA-Pickup-Token"
	pinPrefix         = "kya-pin:"
	pickedPrefix      = "kya-picked:"
	ownedKindPin      = "kya-pin"
	// Pickup tokens are 32 random bytes, base64url (43 characters); longer
	// ones are accepted up to this bound.
	minPickupToken = 43
	maxPickupToken = 128
)

type pin struct {
	Holder string `json:"p"` // hex SHA-256 of the pickup token
	Last   int64  `json:"l"` // Unix ms of the holder's last poll
}

type pickupReady struct {
	Status     string `json:"status"`
	TokenType  string `json:"token_type,omitempty"`
	Delegation string `json:"delegation,omitempty"`
	ExpiresIn  int64  `json:"expires_in"`
}

// validPickupToken: base64url characters, of a length a 32-byte secret
// has or more, bounded.
func validPickupToken(t string) bool {
	if len(t) < minPickupToken || len(t) > maxPickupToken {
		return false
	}
	return strings.Trim(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == ""
}

func kyaError(w http.ResponseWriter, status int, code string) { kyaErrorDesc(w, status, code, "") }

// kyaErrorDesc adds a description, for the agent's operator, to the
// error code an agent acts on.
func kyaErrorDesc(w http.ResponseWriter, status int, code, desc string) {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
		Desc  string `json:"error_description,omitempty"`
	}{code, desc})
	writeJSON(w, status, body, "no-store")
}

func (s *Server) servePickup(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Cache-Control", "no-store")
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	if s.cfg.KYAHTTP == nil {
		kyaError(w, http.StatusNotFound, "kyaos/invalid-session")
		return
	}
	sess, err := s.parseSID(id)
	if err != nil {
		kyaError(w, http.StatusNotFound, "kyaos/invalid-session")
		return
	}
	now := time.Now()
	if !now.Before(sess.Expires) {
		kyaError(w, http.StatusGone, "kyaos/pickup-expired")
		return
	}
	tok := r.Header.Get(pickupTokenHeader)
	if tok == "" {
		w.Header().Set("WWW-Authenticate", `Pickup-Token header="`+pickupTokenHeader+`"`)
		writeJSON(w, http.StatusUnauthorized, []byte(`{"error":"kyaos/authorization-required","pin":{"header":"`+pickupTokenHeader+`"}}`), "no-store")
		return
	}
	if len(r.Header.Values(pickupTokenHeader)) != 1 || !validPickupToken(tok) {
		kyaError(w, http.StatusBadRequest, "kyaos/invalid-request")
		return
	}
	sum := sha256.Sum256([]byte(tok))
	holder := hex.EncodeToString(sum[:])
	interval := s.cfg.KYAHTTP.interval()
	switch status, err := s.pinPoll(r, sess, holder, interval, now); {
	case err != nil:
		s.deps.Logger.Warn("pickup pin", zapErr(err))
		w.Header().Set("Retry-After", strconv.Itoa(int(interval/time.Second)))
		kyaError(w, http.StatusServiceUnavailable, "kyaos/authorization-host-unavailable")
		return
	case status == http.StatusForbidden:
		kyaError(w, status, "kyaos/pickup-pinned")
		return
	case status == http.StatusTooManyRequests:
		h := w.Header()
		h.Set("Retry-After", strconv.Itoa(int(interval/time.Second)))
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		return
	}
	// The session names its agent by tag; the approval was made for the
	// agent of the session's consent link.
	a, ok, err := s.takeApproval(r.Context(), kindPickup, sess.ID, func(agent string) bool {
		return hex.EncodeToString(s.agentTag(agent)) == sess.AgentTag
	})
	if err == nil && ok {
		// Later polls learn it was handed out, not that it is pending.
		err = s.deps.Store.Bind(r.Context(), digest(pickedPrefix, sess.ID), []byte{1}, sess.Expires.Sub(now)+time.Minute)
		if err != nil {
			s.deps.Logger.Warn("pickup: handed out, not recorded as such", zapErr(err))
			err = nil
		}
	}
	if err == nil && !ok {
		_, err = s.deps.Store.Lookup(r.Context(), digest(pickedPrefix, sess.ID))
		switch {
		case err == nil:
			kyaErrorDesc(w, http.StatusGone, "kyaos/pickup-expired", "the delegation of this session was already handed out (once, to the first poll after approval); call the tool again for a new challenge")
			return
		case errors.Is(err, challenge.ErrBindingNotFound):
			err = nil
		}
	}
	if err != nil {
		s.deps.Logger.Warn("pickup approval", zapErr(err))
		w.Header().Set("Retry-After", strconv.Itoa(int(interval/time.Second)))
		kyaError(w, http.StatusServiceUnavailable, "kyaos/authorization-host-unavailable")
		return
	}
	if !ok {
		body, _ := json.Marshal(pickupReady{Status: "pending", ExpiresIn: int64(sess.Expires.Sub(now) / time.Second)})
		writeJSON(w, http.StatusAccepted, body, "no-store")
		return
	}
	body, _ := json.Marshal(pickupReady{Status: "ready", TokenType: "Bearer", Delegation: a.Delegation,
		ExpiresIn: max(0, a.Expires-now.Unix())})
	writeJSON(w, http.StatusOK, body, "no-store")
}

// pinPoll pins holder to the session on the first poll and checks later
// ones: 0 (go on), 403 (another holder's), or 429 (sooner than half the
// interval after the holder's last poll). The pin counts against the
// agent the session was issued to.
func (s *Server) pinPoll(r *http.Request, sess kyaSession, holder string, interval time.Duration, now time.Time) (int, error) {
	ob, err := s.owned()
	if err != nil {
		return 0, err
	}
	ctx := r.Context()
	key := digest(pinPrefix, sess.ID)
	ttl := sess.Expires.Sub(now)
	raw, err := ob.Lookup(ctx, key)
	var p pin
	switch {
	case errors.Is(err, challenge.ErrBindingNotFound):
		body, _ := json.Marshal(pin{Holder: holder, Last: now.UnixMilli()})
		if err := ob.BindOwned(ctx, ownedKindPin, sess.AgentTag, key, body, ttl, maxPinsPerAgent); err != nil {
			return 0, err
		}
		// Two first polls racing: the one whose pin stayed wins.
		if raw, err = ob.Lookup(ctx, key); err != nil {
			return 0, err
		}
		if json.Unmarshal(raw, &p) != nil || p.Holder != holder {
			return http.StatusForbidden, nil
		}
		return 0, nil
	case err != nil:
		return 0, err
	}
	if json.Unmarshal(raw, &p) != nil {
		return 0, errors.New("authserver: unreadable pickup pin")
	}
	if p.Holder != holder {
		return http.StatusForbidden, nil
	}
	if now.UnixMilli()-p.Last < (interval / 2).Milliseconds() {
		return http.StatusTooManyRequests, nil
	}
	body, _ := json.Marshal(pin{Holder: holder, Last: now.UnixMilli()})
	return 0, ob.BindOwned(ctx, ownedKindPin, sess.AgentTag, key, body, ttl, maxPinsPerAgent)
}
