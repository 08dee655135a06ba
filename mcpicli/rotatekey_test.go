package mcpicli

import "testing"

// TestPickSetting: the one value the handlers agree on, the default
// without handlers, an error when they disagree.
func TestPickSetting(t *testing.T) {
	get := func(h handlerKeySettings) string { return h.KeyStorageKey }
	if v, err := pickSetting(nil, get, "d"); v != "d" || err != nil {
		t.Errorf("none: %q %v", v, err)
	}
	if v, err := pickSetting([]handlerKeySettings{{}, {KeyStorageKey: "d"}}, get, "d"); v != "d" || err != nil {
		t.Errorf("agreeing: %q %v", v, err)
	}
	if _, err := pickSetting([]handlerKeySettings{{}, {KeyStorageKey: "x"}}, get, "d"); err == nil {
		t.Error("disagreeing handlers accepted")
	}
}
