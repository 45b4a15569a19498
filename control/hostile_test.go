package control

import (
	"strings"
	"testing"
)

// TestHostileLines: lines built to hurt the decoder each get one JSON
// error line (or a normal reply where the line is in fact valid), and the
// connection keeps answering afterwards.
func TestHostileLines(t *testing.T) {
	s := serve(t, newFakeBackend(), nil)
	c := dialRaw(t, s.Path())
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	tests := []struct {
		name, line string
		ok         bool
	}{
		{"NUL byte", "{\"type\":\"status\x00\"}", false},
		{"NUL in a string, escaped", `{"type":"oom","detail":"a\u0000b"}`, true},
		{"NUL before the object", "\x00{\"type\":\"status\"}", false},
		{"invalid UTF-8 in a string", "{\"type\":\"oom\",\"detail\":\"\xff\xfe\"}", true},
		{"invalid UTF-8 as the type", "{\"type\":\"\xc3\x28\"}", false},
		{"invalid UTF-8 outside strings", "{\"type\":\"status\"\xff}", false},
		{"lone surrogate", `{"type":"oom","detail":"\ud800"}`, true},
		{"20,000 nested arrays as the id", `{"type":"status","id":` + deep(20_000, "[", "]") + `}`, false},
		{"10,000 nested objects", `{"type":"status","x":` + deep(10_000, `{"a":`, "}") + `}`, false},
		{"number with 60,000 digits", `{"type":"reserve","bytes":` + strings.Repeat("9", 60_000) + `}`, false},
		{"1e400 bytes", `{"type":"reserve","bytes":1e400}`, false},
		{"2^64 bytes", `{"type":"reserve","bytes":18446744073709551616}`, false},
		{"huge ttl", `{"type":"reserve","bytes":1,"ttl":"9999999999999h"}`, false},
		{"10,000 keys", `{"type":"status"` + strings.Repeat(`,"k":1`, 10_000) + `}`, true},
		{"type given twice", `{"type":"status","type":"step"}`, false},
		{"a 60 KB id is echoed", `{"type":"status","id":"` + strings.Repeat("i", 60_000) + `"}`, true},
		{"BOM", "\xef\xbb\xbf{\"type\":\"status\"}", false},
		{"only whitespace and a brace", "   {", false},
	}
	for _, tt := range tests {
		got := c.roundTrip(tt.line)
		if got["ok"] != tt.ok {
			t.Errorf("%s: reply %.200v, want ok:%v", tt.name, got, tt.ok)
		}
		if !tt.ok {
			if msg, _ := got["error"].(string); msg == "" || len(msg) > 4096 {
				t.Errorf("%s: error %.200q, want a short message", tt.name, msg)
			}
		}
	}
	if got := c.roundTrip(`{"type":"status"}`); got["ok"] != true || got["name"] != "demo" {
		t.Fatalf("status after the hostile lines: %v", got)
	}
}

// TestManyBadLinesInOneWrite: a burst of 5,000 malformed lines written at
// once is answered line for line, in order, on the same connection.
func TestManyBadLinesInOneWrite(t *testing.T) {
	s := serve(t, newFakeBackend(), nil)
	c := dialRaw(t, s.Path())
	const n = 5000
	var b strings.Builder
	for i := range n {
		if i%2 == 0 {
			b.WriteString("garbage\n")
		} else {
			b.WriteString(`{"type":"nope","id":` + itoa(i) + "}\n")
		}
	}
	b.WriteString(`{"type":"status","id":"last"}` + "\n")
	go c.nc.Write([]byte(b.String()))
	for i := range n {
		got := c.recv()
		if got["ok"] != false {
			t.Fatalf("line %d: %v", i, got)
		}
		if i%2 == 1 && got["id"] != float64(i) {
			t.Fatalf("line %d answered out of order: %v", i, got)
		}
	}
	if got := c.recv(); got["ok"] != true || got["id"] != "last" {
		t.Fatalf("final status: %v", got)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
