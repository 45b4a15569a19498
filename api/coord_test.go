package api

import "testing"

func TestAdmissionReleasesOnce(t *testing.T) {
	n := 0
	a := &Admission{Unlock: func() { n++ }}
	a.Release()
	a.Release()
	if n != 1 {
		t.Fatalf("Unlock ran %d times, want once", n)
	}
	(&Admission{}).Release() // nothing to unlock: no panic
}

func TestIsDown(t *testing.T) {
	for kind, want := range map[string]bool{KindDown: true, KindPredicted: true, KindCritical: true, KindUp: false, "": false} {
		if IsDown(kind) != want {
			t.Errorf("IsDown(%q) = %v, want %v", kind, !want, want)
		}
	}
}
