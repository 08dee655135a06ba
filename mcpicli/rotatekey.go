package mcpicli

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

// RotateKey is `rotate-key`: a new Level 2 signing key in the storage of
// a config that c loads.
func RotateKey(c Caddy) *cobra.Command {
	var configFile, adapter, storageKey, alg, delayFlag string
	cmd := &cobra.Command{
		Use:   "rotate-key [--config <file> [--adapter <name>]] [--key <storage key>] [--alg EdDSA|ES256] [--publish-delay <duration>]",
		Short: "Rotate the edge's Level 2 signing key in Caddy's storage",
		Long: `Replaces the key the mcpi handlers sign X-Verified-Delegation with by a new
one, in the storage of the given config (its top-level "storage", else
Caddy's default file storage), under the storage lock. The new key is
published in /.well-known/jwks.json at once but signs only after
key_publish_delay (default 20s), so that verifiers which refetch the JWKS
on an unknown kid, at most once per interval, know it before they meet it;
--publish-delay 0 switches at once (for a leaked key). The old key stays in
/.well-known/jwks.json for the retention recorded with the key set (at least
assertion_ttl + key_reload_interval + 60s by default), so assertions it signed
verify until they expire. Running instances sharing the storage switch to
the new key at its activation time, or at their next reload (within
key_reload_interval) when they load it later.

The storage key, algorithm and delay default to those of the Level 2 mcpi
handlers of the config (key_storage_key, signing_alg, key_publish_delay),
else mcpi/edge-keys.json, EdDSA and 20s. Prints the new state as JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, name, handlers, err := rotateTarget(c, configFile, adapter)
			if err != nil {
				return err
			}
			if storageKey == "" {
				if storageKey, err = pickSetting(handlers, func(h handlerKeySettings) string { return h.KeyStorageKey }, edge.DefaultKeyStorageKey); err != nil {
					return fmt.Errorf("%v: choose one with --key", err)
				}
			}
			if alg == "" {
				if alg, err = pickSetting(handlers, func(h handlerKeySettings) string { return h.SigningAlg }, edge.AlgEdDSA); err != nil {
					return fmt.Errorf("%v: choose one with --alg", err)
				}
			}
			if alg != edge.AlgEdDSA && alg != edge.AlgES256 {
				return fmt.Errorf("--alg must be EdDSA or ES256, got %q", alg)
			}
			if delayFlag == "" {
				if delayFlag, err = pickSetting(handlers, func(h handlerKeySettings) string {
					if h.KeyPublishDelay == 0 {
						return ""
					}
					return time.Duration(h.KeyPublishDelay).String()
				}, edge.DefaultKeyPublishDelay.String()); err != nil {
					return fmt.Errorf("%v: choose one with --publish-delay", err)
				}
			}
			delay, err := duration.Parse(delayFlag)
			if err != nil || delay < 0 {
				return fmt.Errorf("--publish-delay must be a duration of 0s or more, got %q", delayFlag)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			now := time.Now()
			ks, err := assertion.ScheduleStored(ctx, st, storageKey, now, delay,
				func() (crypto.PrivateKey, error) { return edge.GenerateEdgeKey(alg) })
			if err != nil {
				return err
			}
			type keyInfo struct {
				Thumbprint string    `json:"thumbprint"`
				Alg        string    `json:"alg"`
				SignsFrom  time.Time `json:"signs_from,omitzero"`
				RetiredAt  time.Time `json:"retired_at,omitzero"`
				Until      time.Time `json:"published_until,omitzero"`
			}
			out := struct {
				Storage          string    `json:"storage"`
				StorageKey       string    `json:"storage_key"`
				RetentionSeconds int64     `json:"retention_seconds"`
				Published        []keyInfo `json:"published"`
			}{Storage: name, StorageKey: storageKey, RetentionSeconds: int64(ks.Retention() / time.Second)}
			for _, k := range ks.Published(now) {
				ki := keyInfo{Thumbprint: k.Thumbprint, Alg: k.Alg, SignsFrom: k.ActivatesAt, RetiredAt: k.RetiredAt}
				if !k.RetiredAt.IsZero() {
					ki.Until = k.RetiredAt.Add(k.Retention)
				}
				out.Published = append(out.Published, ki)
			}
			b, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&configFile, "config", "c", "", "configuration file whose storage (and mcpi settings) to use")
	f.StringVarP(&adapter, "adapter", "a", "", "name of the config adapter to apply")
	f.StringVar(&storageKey, "key", "", "storage key of the key set (default: key_storage_key of the config, else "+edge.DefaultKeyStorageKey+")")
	f.StringVar(&alg, "alg", "", "algorithm of the new key: EdDSA or ES256 (default: signing_alg of the config, else EdDSA)")
	f.StringVar(&delayFlag, "publish-delay", "", "how long the new key is published before it signs; 0s switches at once "+
		"(default: key_publish_delay of the config, else "+edge.DefaultKeyPublishDelay.String()+")")
	return cmd
}

// handlerKeySettings are the key settings of one mcpi handler in a config.
type handlerKeySettings struct {
	Level         int    `json:"level"`
	SigningKey    string `json:"signing_key"`
	SigningAlg    string `json:"signing_alg"`
	KeyStorageKey string `json:"key_storage_key"`
	// Both forms a JSON config may hold: nanoseconds (as an adapted
	// Caddyfile writes it) or a string such as "20s".
	KeyPublishDelay duration.Duration `json:"key_publish_delay"`
}

// rotateTarget loads the config like `caddy storage export` does and
// returns its storage (Caddy's default file storage when the config names
// none, or when there is no config), the storage's name, and its Level 2
// mcpi handlers that keep their key in storage.
func rotateTarget(c Caddy, configFile, adapter string) (Storage, string, []handlerKeySettings, error) {
	var (
		cfgJSON []byte
		err     error
	)
	if configFile != "" || adapter != "" {
		if err := checkConfigPlaceholders(configFile, adapter); err != nil {
			return nil, "", nil, err
		}
		if cfgJSON, err = c.LoadConfig(configFile, adapter); err != nil {
			return nil, "", nil, err
		}
	}
	var top struct {
		Storage json.RawMessage `json:"storage,omitempty"`
	}
	var handlers []handlerKeySettings
	if len(cfgJSON) > 0 {
		if err := json.Unmarshal(cfgJSON, &top); err != nil {
			return nil, "", nil, fmt.Errorf("reading config: %v", err)
		}
		var doc any
		if err := json.Unmarshal(cfgJSON, &doc); err != nil {
			return nil, "", nil, fmt.Errorf("reading config: %v", err)
		}
		handlers = findMCPIHandlers(doc, nil)
	}
	if len(top.Storage) > 0 {
		if err := checkStoragePlaceholders(top.Storage); err != nil {
			return nil, "", nil, err
		}
	}
	st, name, err := c.Storage(top.Storage)
	if err != nil {
		return nil, "", nil, err
	}
	return st, name, handlers, nil
}

// findMCPIHandlers walks a JSON config for {"handler": "mcpi", ...} objects
// at level 2 or 3 without a signing_key file.
func findMCPIHandlers(v any, out []handlerKeySettings) []handlerKeySettings {
	eachMCPIHandler(v, func(t map[string]any) {
		b, _ := json.Marshal(t)
		var hs handlerKeySettings
		if json.Unmarshal(b, &hs) == nil && hs.Level >= 2 && hs.SigningKey == "" {
			out = append(out, hs)
		}
	})
	return out
}

// eachMCPIHandler calls fn with every {"handler": "mcpi", ...} object in v,
// a decoded JSON config or part of one, wherever it is nested (subroutes).
func eachMCPIHandler(v any, fn func(map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		if t["handler"] == "mcpi" {
			fn(t)
		}
		for _, c := range t {
			eachMCPIHandler(c, fn)
		}
	case []any:
		for _, c := range t {
			eachMCPIHandler(c, fn)
		}
	}
}

// pickSetting returns the one value of a setting the handlers agree on
// (def for a handler that leaves it unset), def without handlers, or an
// error when they disagree.
func pickSetting(hs []handlerKeySettings, get func(handlerKeySettings) string, def string) (string, error) {
	var vals []string
	for _, h := range hs {
		v := get(h)
		if v == "" {
			v = def
		}
		if !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	switch len(vals) {
	case 0:
		return def, nil
	case 1:
		return vals[0], nil
	}
	return "", errors.New("the config's mcpi handlers use different values " + fmt.Sprint(vals))
}
