package mcpicli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
)

// `caddy mcpi delegations list|revoke`: the delegations users gave through
// the front door, read from the config's storage (where the edge keeps
// them) and revoked in the config's shared nonce store (where every
// replica checks them).

// Delegations is `delegations list|revoke`, on the storage and nonce
// store of a config that c loads.
func Delegations(c Caddy) *cobra.Command {
	var configFile, adapter string
	cmd := &cobra.Command{
		Use:   "delegations list|revoke",
		Short: "List or revoke the delegations users gave through the front door",
		Long: `Reads the delegations users gave through the edge's authorization server
(authorization_server) from the storage of the given config (its top-level
"storage", else Caddy's default file storage), as the edge keeps them.

  list [--user <user DID or id>]   print the live delegations as JSON
  revoke <delegation id>           revoke one on every replica

revoke records the revocation in the config's shared nonce store (nonce_store
redis), which every replica checks within seconds, and ends the delegation's
refresh tokens. With the memory nonce store only the running edge holds its
revocations: revoke from the user's page (/oauth/delegations) instead.`,
	}
	f := cmd.PersistentFlags()
	f.StringVarP(&configFile, "config", "c", "", "configuration file whose storage and nonce store the edge uses")
	f.StringVarP(&adapter, "adapter", "a", "", "name of the config adapter to apply")

	var user string
	list := &cobra.Command{
		Use:   "list [--user <user DID or id>]",
		Short: "Print the live delegations as JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			t, err := delegationsTarget(c, configFile, adapter, false)
			if err != nil {
				return err
			}
			defer t.close()
			uid := user
			if i := strings.LastIndex(user, ":oauth:users:"); i >= 0 {
				uid = user[i+len(":oauth:users:"):]
			}
			ds, err := authserver.ListDelegations(ctx, t.keys, uid, time.Now())
			if err != nil && ds == nil {
				return err
			}
			if t.store != nil {
				ds = authserver.DropRevoked(ctx, t.keys, t.store, ds)
				authserver.WithLastUse(ctx, t.store, ds)
			}
			if ds == nil {
				ds = []authserver.Delegation{}
			}
			b, _ := json.MarshalIndent(ds, "", "  ")
			if _, werr := fmt.Fprintln(cmd.OutOrStdout(), string(b)); werr != nil {
				return werr
			}
			return err
		},
	}
	list.Flags().StringVar(&user, "user", "", "only this user's: their user DID (did:web:…:oauth:users:<id>) or its id")

	revoke := &cobra.Command{
		Use:   "revoke <delegation id>",
		Short: "Revoke a delegation on every replica",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			t, err := delegationsTarget(c, configFile, adapter, true)
			if err != nil {
				return err
			}
			defer t.close()
			d, err := authserver.FindDelegation(ctx, t.keys, args[0], time.Now())
			if err != nil {
				return err
			}
			if err := authserver.RevokeDelegation(ctx, t.keys, t.store, d.UserID, d.Family, time.Until(d.Expires)+time.Minute); err != nil {
				return err
			}
			b, _ := json.Marshal(map[string]any{"revoked": d.Family, "user_did": d.UserDID, "agent_did": d.AgentDID})
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return err
		},
	}
	cmd.AddCommand(list, revoke)
	return cmd
}

type delegationsTargets struct {
	keys  authserver.ListingStorage
	store authserver.Store // nil: the memory store, out of reach
	close func()
}

// delegationsTarget loads the config's storage and, when the front door
// uses a shared nonce store, that store. needStore: fail without one.
func delegationsTarget(c Caddy, configFile, adapter string, needStore bool) (delegationsTargets, error) {
	st, _, _, err := rotateTarget(c, configFile, adapter)
	if err != nil {
		return delegationsTargets{}, err
	}
	t := delegationsTargets{keys: st, close: func() {}}
	var stores []json.RawMessage
	if configFile != "" || adapter != "" {
		cfgJSON, err := c.LoadConfig(configFile, adapter)
		if err != nil {
			return t, err
		}
		var doc any
		if err := json.Unmarshal(cfgJSON, &doc); err != nil {
			return t, fmt.Errorf("reading config: %v", err)
		}
		seen := map[string]bool{}
		eachMCPIHandler(doc, func(h map[string]any) {
			if h["authorization_server"] == nil {
				return
			}
			b, _ := json.Marshal(h["nonce_store"]) // null for the memory store
			if !seen[string(b)] {
				seen[string(b)] = true
				stores = append(stores, b)
			}
		})
	}
	var backend struct {
		Backend string `json:"backend"`
	}
	memory := len(stores) == 0 || string(stores[0]) == "null" || (json.Unmarshal(stores[0], &backend) == nil && backend.Backend == "memory")
	switch {
	case len(stores) > 1:
		return t, errors.New("the config's front doors (mcpi handlers with authorization_server) use different nonce stores: give a config with one")
	case memory && needStore:
		return t, errors.New("the front door keeps revocations in its memory nonce store, which only the running edge reaches: " +
			"revoke from the user's page (/oauth/delegations) or POST the token to /oauth/revoke; " +
			"with nonce_store redis (shared by replicas) this command revokes")
	case memory:
		return t, nil
	}
	store, closeStore, err := c.NonceStore(stores[0])
	if err != nil {
		return t, err
	}
	t.store, t.close = store, closeStore
	return t, nil
}
