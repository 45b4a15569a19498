package exitcode

import "testing"

// TestCodes pins the codes to the contract's table: a changed value is a
// changed user-facing behaviour, not a refactoring.
func TestCodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int
	}{
		{"OK", OK, 0},
		{"Failure", Failure, 1},
		{"Usage", Usage, 64},
		{"Unavailable", Unavailable, 69},
		{"NoFit", NoFit, 75},
		{"Config", Config, 78},
		{"CannotExecute", CannotExecute, 126},
		{"NotFound", NotFound, 127},
		{"Signaled(SIGTERM)", Signaled(15), 143},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
