package door

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestScanJSONValidity: scanJSON accepts exactly what json.Valid accepts.
func TestScanJSONValidity(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, s := range []string{
		`{}`, `[]`, `""`, `0`, `-0`, `-0.5e-3`, `1E+9`, `true`, `false`, `null`, ` {"a" : [1, {"b":null}], "c":"\u00e9\n\"" } `,
		`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`, `NaN`, `tru`, `nul`, `truex`, `nulll`,
		`{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a" 1}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`,
		`"\x"`, `"\u12G4"`, `"\u12"`, "\"a\tb\"", "\"a\x00b\"", `"abc`, `"\"`, `"\\"`, "\"\xff\xfe\"",
		`{"a":[}`, `[{]}`, `{"a":{"b":{"c":[1,2,{"d":"}"}]}}}`, `{}{}`, `[] x`, ``, ` `,
		deep(maxDepth), deep(maxDepth + 1), `{"a":` + deep(maxDepth-1) + `}`, `{"a":` + deep(maxDepth) + `}`,
	} {
		if _, ok := scanJSON([]byte(s)); ok != json.Valid([]byte(s)) {
			t.Errorf("scanJSON(%.40q) = %v, json.Valid says %v", s, ok, !ok)
		}
	}
}

// FuzzScanJSON: on any input, scanJSON's verdict is json.Valid's.
func FuzzScanJSON(f *testing.F) {
	for _, s := range []string{`{"model":"m","x":[1,2.5e3,true,null,{"y":"\u0041"}]}`, `[`, `"\`, `-01`, `{"a":1,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, ok := scanJSON(b); ok != json.Valid(b) {
			t.Fatalf("scanJSON(%q) = %v, json.Valid %v", b, ok, !ok)
		}
	})
}
