package proc

import (
	"bufio"
	"strings"
	"testing"
)

func TestNestedFromStatus(t *testing.T) {
	for status, want := range map[string]bool{
		"Name:\tsh\nNSpid:\t1234\n":         false,
		"Name:\tsh\nNSpid:\t81234\t17\n":    true,
		"Name:\tsh\nNSpid:\t9\t8\t7\n":      true,
		"Name:\tsh\n(no NSpid: old kernel)": false,
	} {
		if got := nestedFromStatus(bufio.NewScanner(strings.NewReader(status))); got != want {
			t.Errorf("%q: got %v, want %v", status, got, want)
		}
	}
	_ = InNestedPIDNamespace() // must not fail on this machine
}
