package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
// agentDID for scopes, of a new family (revocable as any other).
func (s *Server) issueForAgent(r *http.Request, uid, agentDID string, scopes []string, now time.Time) (string, time.Time, error) {
	key, err := s.users.key(r.Context(), uid, true)
	if err != nil {
		return "", time.Time{}, err
	}
	origin := s.issuer(r)
	aud := []string{origin}
	if s.deps.EdgeAudience != nil {
		if a := s.deps.EdgeAudience(r); a != "" && a != origin {
			aud = append(aud, a)
		}
	}
	fam := randomToken()[:22]
	exp := now.Add(s.cfg.CredentialLifetime)
	user := userDID(origin, uid)
	tok, err := vc.IssueJWT(key, user+userKeyFragment, vc.Template{
		AgentDID: agentDID, UserDID: user, Audience: aud, Scopes: scopes, ExpiresAt: exp,
		ID: CredentialIDPrefix + fam + ":" + randomToken()[:16], DelegationID: fam,
	})
	return tok, exp, err
}

// approve issues the ticket's delegation for the signed-in user and keeps
// it for the retry or the poll.
func (s *Server) approve(r *http.Request, t ticket, uid string, now time.Time) error {
	ob, err := s.owned()
	if err != nil {
		return err
	}
	tok, exp, err := s.issueForAgent(r, uid, t.AgentDID, t.Grant, now)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(approval{AgentDID: t.AgentDID, Delegation: tok, Expires: exp.Unix()})
	ttl := t.Expires.Sub(now)
	if ttl <= 0 {
		return errTicketExpired
	}
	return ob.BindOwned(r.Context(), ownedKindApproval, uid, approvalKey(t.Kind, t.Key), body, ttl, maxApprovalsPerUser)
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

// Approved is the delegation the user approved for the prompt that issued
// resumeToken to agentDID; ok is false when there is none (not approved
// yet, expired, or approved for another agent). A store failure is an
// error.
func (s *Server) Approved(ctx context.Context, resumeToken, agentDID string) (string, bool, error) {
	if resumeToken == "" || agentDID == "" {
		return "", false, nil
	}
	a, ok, err := s.lookupApproval(ctx, kindResume, resumeToken)
	if err != nil || !ok || a.AgentDID != agentDID || !time.Now().Before(time.Unix(a.Expires, 0)) {
		return "", false, err
	}
	return a.Delegation, true, nil
}
