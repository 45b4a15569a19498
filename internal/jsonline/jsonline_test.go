package jsonline

import (
	"encoding/json"
	"testing"
)

func TestMarshalKeepsText(t *testing.T) {
	in := map[string]string{"reason": "watermark 0.94 > 0.90 & <rising>"}
	b, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"reason":"watermark 0.94 > 0.90 & <rising>"}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	var back map[string]string
	if err := json.Unmarshal(b, &back); err != nil || back["reason"] != in["reason"] {
		t.Fatalf("round trip: %v %v", back, err)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Fatal("a func marshalled")
	}
}
