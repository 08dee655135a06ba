package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// An approval is the delegation the user issued at the agent consent page,
// kept in the shared store under the consent's key (resume token or pickup
// session) until the consent link expires, so that the retry or the poll
// reaching any replica finds it.

const (
	approvalPrefix = "kya-approval:"
	// ownedKindApproval partitions approvals in the store.
	ownedKindApproval = "kya-approval"
)

type approval struct {
	AgentDID   string `json:"a"`
	Delegation string `json:"d"`
	Expires    int64  `json:"x"` // the delegation's exp, Unix seconds
}

func approvalKey(kind, key string) string { return digest(approvalPrefix, kind+"\x00"+key) }

// owned is the store's OwnedBinder, which every store the edge offers
// (memory, Redis) is.
func (s *Server) owned() (challenge.OwnedBinder, error) {
	ob, ok := s.deps.Store.(challenge.OwnedBinder)
	if !ok {
		return nil, fmt.Errorf("authserver: agent consent needs a store that bounds records per caller (memory or redis), got %T", s.deps.Store)
	}
	return ob, nil
}

// issueForAgent has the user with opaque id uid issue a delegation to
// agentDID for scopes, of a new family (revocable as any other), and
// returns it with its family and end.
func (s *Server) issueForAgent(r *http.Request, uid, agentDID string, scopes []string, now time.Time) (tok, fam string, exp time.Time, err error) {
	key, err := s.users.key(r.Context(), uid, true)
	if err != nil {
		return "", "", time.Time{}, err
	}
	origin := s.issuer(r)
	aud := []string{origin}
	if s.deps.EdgeAudience != nil {
		if a := s.deps.EdgeAudience(r); a != "" && a != origin {
			aud = append(aud, a)
		}
	}
	fam = randomToken()[:22]
	exp = now.Add(s.cfg.CredentialLifetime)
	user := userDID(origin, uid)
	tok, err = vc.IssueJWT(key, user+userKeyFragment, vc.Template{
		AgentDID: agentDID, UserDID: user, Audience: aud, Scopes: scopes, ExpiresAt: exp,
		ID: CredentialIDPrefix + fam + ":" + randomToken()[:16], DelegationID: fam,
	})
	return tok, fam, exp, err
}

// answeredPrefix marks a consent link approved: the first approval of a
// link wins, whoever posts it and however often the form is posted again,
// so one link makes at most one delegation.
const answeredPrefix = "kya-answered:"

var errLinkAnswered = errors.New("this consent link was already approved: ask the agent to call the tool again for a new one")

// approve issues the ticket's delegation for the signed-in user, records it
// among the user's delegations (listed, counted and revocable as any
// other), and keeps it for the retry or the poll, which takes it once.
func (s *Server) approve(r *http.Request, t ticket, uid string, now time.Time) error {
	ob, err := s.owned()
	if err != nil {
		return err
	}
	ttl := t.Expires.Sub(now)
	if ttl <= 0 {
		return errTicketExpired
	}
	ctx := r.Context()
	// Set-if-absent across replicas: of racing approvals, one goes on.
	mark := challenge.Record{Challenge: "approved", IssuedAt: now, ExpiresAt: t.Expires.Add(time.Minute)}
	if err := s.deps.Store.Put(ctx, digest(answeredPrefix, t.Kind+"\x00"+t.Key), mark, ttl+time.Minute); err != nil {
		if errors.Is(err, challenge.ErrNonceExists) {
			return errLinkAnswered
		}
		return err
	}
	tok, fam, exp, err := s.issueForAgent(r, uid, t.AgentDID, t.Grant, now)
	if err != nil {
		return err
	}
	origin := s.issuer(r)
	if err := s.recordDelegation(ctx, Delegation{
		Family: fam, UserID: uid, UserDID: userDID(origin, uid), AgentDID: t.AgentDID,
		Scopes: slices.Clone(t.Grant), Resource: origin,
		Created: now.UTC().Truncate(time.Second), Expires: exp.UTC().Truncate(time.Second),
	}); err != nil {
		return err
	}
	body, _ := json.Marshal(approval{AgentDID: t.AgentDID, Delegation: tok, Expires: exp.Unix()})
	return ob.BindOwned(ctx, ownedKindApproval, uid, approvalKey(t.Kind, t.Key), body, ttl, maxApprovalsPerUser)
}

// lookupApproval is the approval under (kind, key), or ok=false.
func (s *Server) lookupApproval(ctx context.Context, kind, key string) (approval, bool, error) {
	raw, err := s.deps.Store.Lookup(ctx, approvalKey(kind, key))
	switch {
	case errors.Is(err, challenge.ErrBindingNotFound):
		return approval{}, false, nil
	case err != nil:
		return approval{}, false, err
	}
	var a approval
	if json.Unmarshal(raw, &a) != nil || a.Delegation == "" {
		return approval{}, false, nil
	}
	return a, true, nil
}

// takeApproval takes the approval under (kind, key) when its agent is
// one for, in one step across replicas: of concurrent takers, at most one
// gets it. Another agent's lookup leaves it in place.
func (s *Server) takeApproval(ctx context.Context, kind, key string, forAgent func(agentDID string) bool) (approval, bool, error) {
	a, ok, err := s.lookupApproval(ctx, kind, key)
	if err != nil || !ok || !forAgent(a.AgentDID) {
		return approval{}, false, err
	}
	ob, err := s.owned()
	if err != nil {
		return approval{}, false, err
	}
	raw, err := ob.Take(ctx, approvalKey(kind, key))
	switch {
	case errors.Is(err, challenge.ErrBindingNotFound):
		return approval{}, false, nil // another request took it first
	case err != nil:
		return approval{}, false, err
	}
	if json.Unmarshal(raw, &a) != nil || a.Delegation == "" || !forAgent(a.AgentDID) {
		return approval{}, false, nil
	}
	return a, true, nil
}

// Approved is the delegation the user approved for the prompt that issued
// resumeToken to agentDID; ok is false when there is none (not approved
// yet, expired, approved for another agent, or already used). The first
// retry to get it takes it: of retries racing on any replica, one goes
// on with it. A store failure is an error.
func (s *Server) Approved(ctx context.Context, resumeToken, agentDID string) (string, bool, error) {
	if resumeToken == "" || agentDID == "" {
		return "", false, nil
	}
	a, ok, err := s.takeApproval(ctx, kindResume, resumeToken, func(a string) bool { return a == agentDID })
	if err != nil || !ok || !time.Now().Before(time.Unix(a.Expires, 0)) {
		return "", false, err
	}
	return a.Delegation, true, nil
}
