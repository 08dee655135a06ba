package carrier

import (
	"strings"
	"testing"
)

// benchBodies are tools/call bodies without and with a body carrier, with
// small and about 8 KiB of nested arguments.
func benchBodies() map[string][]byte {
	item := `{"id":7,"name":"item","tags":["a","b","c"],"text":"` + strings.Repeat("lorem ipsum ", 6) + `","n":{"x":1.5e3,"y":null,"z":true}}`
	big := `{"items":[` + strings.Repeat(item+",", 63) + item + `]}`
	tok := strings.Repeat("eyJhbGciOiJFZERTQSJ9", 80) // a VC-JWT's length
	out := map[string][]byte{}
	for _, args := range []struct{ name, json string }{{"small", `{"text":"hi"}`}, {"8KiB", big}} {
		out["none/"+args.name] = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + args.json + `}}`)
		out["token/"+args.name] = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","delegationToken":"` + tok + `","arguments":` + args.json + `}}`)
	}
	return out
}

// BenchmarkScanBody is what reading the body carriers of a request costs:
// checking the body is JSON, finding the credential and cutting it out.
func BenchmarkScanBody(b *testing.B) {
	for _, name := range []string{"none/small", "none/8KiB", "token/small", "token/8KiB"} {
		body := benchBodies()[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, ok := scanBody(body, All, true); !ok {
					b.Fatal("not JSON")
				}
			}
		})
	}
}
