package mcp

import "testing"

// confusableWalk is Confusable without mayHoldVariant: the walks alone.
func confusableWalk(msgs []Message) bool {
	for _, m := range msgs {
		if variant(m.Raw, rpcMembers) || (len(m.Params) > 0 && m.Params[0] == '{' && variant(m.Params, paramMembers)) {
			return true
		}
	}
	return false
}

// confusableBodies are JSON-RPC bodies with and without case variants of
// the members ParseStrict reads exactly, spelt every way a decoder folds.
var confusableBodies = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"A":1,"b":2}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Method","arguments":{"ID":"PARAMS"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","Params":{}}`,
	`{"jsonrpc":"2.0","Id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","iD":1,"method":"ping"}`,
	`{"JSONRPC":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"Error":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","paramſ":{}}`,
	`{"jsonrpc":"2.0","ıd":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","İd":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","metho\u0044":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","NAME":"b"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_Meta":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"Name":1,"_META":2}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"déjà vu","arguments":{"text":"naïve"}}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping","Method":"tools/call"}]`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
}

// checkConfusable fails when Confusable, with its pre-check, answers
// otherwise than the walks alone on a body ParseMessages accepts.
func checkConfusable(t *testing.T, body []byte) {
	t.Helper()
	msgs, _, err := ParseMessages(body)
	if err != nil {
		return
	}
	if got, want := Confusable(msgs), confusableWalk(msgs); got != want {
		t.Fatalf("%s: Confusable = %v, the walks say %v", body, got, want)
	}
}

func TestConfusablePreCheck(t *testing.T) {
	confusable := 0
	for _, b := range confusableBodies {
		checkConfusable(t, []byte(b))
		if msgs, _, err := ParseMessages([]byte(b)); err == nil && confusableWalk(msgs) {
			confusable++
		}
	}
	if confusable < 10 {
		t.Fatalf("only %d confusable cases: the table no longer tests the pre-check", confusable)
	}
	// The length bounds of isVariantName are those of the names.
	for _, names := range [][]string{rpcMembers, paramMembers} {
		for _, n := range names {
			if len(n) < minMemberLen || len(n) > maxMemberLen {
				t.Errorf("%q is outside [%d, %d]: isVariantName would miss its variants", n, minMemberLen, maxMemberLen)
			}
		}
	}
}

func FuzzConfusable(f *testing.F) {
	for _, b := range confusableBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(checkConfusable)
}
