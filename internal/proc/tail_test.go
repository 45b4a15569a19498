package proc

import (
	"bytes"
	"testing"
)

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		writes []int // sizes of consecutive writes
	}{
		{"empty", 8, nil},
		{"short", 8, []int{3}},
		{"exactly full", 8, []int{8}},
		{"fills in steps", 8, []int{3, 5}},
		{"wraps", 8, []int{5, 5}},
		{"wraps many times", 8, []int{3, 3, 3, 3, 3, 3, 1}},
		{"one big write", 8, []int{20}},
		{"big after small", 8, []int{3, 9}},
		{"small after big", 8, []int{9, 3}},
		{"size one", 1, []int{2, 1, 3}},
	} {
		tl := newTail(tc.size)
		data := testData(100)
		var all []byte
		for _, n := range tc.writes {
			p := data[len(all) : len(all)+n]
			if k, err := tl.Write(p); k != n || err != nil {
				t.Fatalf("%s: Write = %d, %v", tc.name, k, err)
			}
			all = append(all, p...)
		}
		want := all[max(0, len(all)-tc.size):]
		if got := tl.Bytes(); !bytes.Equal(got, want) || got == nil {
			t.Errorf("%s: got %v, want %v", tc.name, got, want)
		}
	}
}
