package instances

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/usage"
)

func envAt(root string) paths.Env {
	return paths.Env{Getenv: func(k string) string {
		if k == "GPUGUARD_STATE_DIR" {
			return root
		}
		return ""
	}, UID: 1000}
}

// TestTargets: a name or a state dir gives that one target; else every
// dir under the state root that has what the caller looks for.
func TestTargets(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a", "b", "c"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a", paths.JournalFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "c", paths.JournalFile+".1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := envAt(root)
	got, gotRoot, err := Targets(env, "", "", HasJournal)
	want := []Target{{Name: "a", Dir: filepath.Join(root, "a")}, {Name: "c", Dir: filepath.Join(root, "c")}}
	if err != nil || gotRoot != root || !slices.Equal(got, want) {
		t.Errorf("Targets(all) = %+v %q %v, want %+v %q", got, gotRoot, err, want, root)
	}
	got, _, err = Targets(env, "", "b", HasJournal)
	if want := []Target{{Name: "b", Dir: filepath.Join(root, "b"), Named: true}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Targets(name b) = %+v %v, want %+v", got, err, want)
	}
	dir := t.TempDir()
	got, _, err = Targets(env, dir, "", HasJournal)
	if want := []Target{{Name: filepath.Base(dir), Dir: dir}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Targets(state dir) = %+v %v, want %+v", got, err, want)
	}
	got, _, err = Targets(envAt(filepath.Join(root, "missing")), "", "", HasJournal)
	if err != nil || len(got) != 0 {
		t.Errorf("Targets under a missing root = %+v %v, want none", got, err)
	}
	_, _, err = Targets(paths.Env{UID: 1000, Getenv: func(string) string { return "" }}, "", "", HasJournal)
	var ue *usage.Error
	if !errors.As(err, &ue) {
		t.Errorf("Targets without any root = %v, want a usage error", err)
	}
}

func TestJournalName(t *testing.T) {
	for _, tt := range []struct {
		names []string
		asked string
		want  string
	}{
		{nil, "a", "a"},
		{[]string{"", ""}, "a", "a"},
		{[]string{"b", "a", "b"}, "a", "a"},
		{[]string{"b", "c", ""}, "a", "c"},
	} {
		var evs []api.Event
		for _, n := range tt.names {
			evs = append(evs, api.Event{Name: n})
		}
		if got := JournalName(evs, tt.asked); got != tt.want {
			t.Errorf("JournalName(%q, %q) = %q, want %q", tt.names, tt.asked, got, tt.want)
		}
	}
}

// TestSummarizeNoJournal: a target without a journal is ErrNoJournal,
// naming the path.
func TestSummarizeNoJournal(t *testing.T) {
	dir := t.TempDir()
	_, _, err := Summarize(Target{Name: "x", Dir: dir}, nil, time.Time{}, time.Now(), &bytes.Buffer{})
	if !errors.Is(err, ErrNoJournal) || !strings.Contains(err.Error(), filepath.Join(dir, paths.JournalFile)) {
		t.Errorf("Summarize = %v, want ErrNoJournal naming the journal", err)
	}
}

// TestIsLive: a socket that accepts is live; a socket file left by a
// killed gpuguard is not.
func TestIsLive(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", paths.Socket(dir, "up"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stale, err := net.Listen("unix", paths.Socket(dir, "gone"))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	if !IsLive([]string{t.TempDir(), dir}, "up") {
		t.Error("a listening socket is not live")
	}
	if IsLive([]string{dir}, "gone") {
		t.Error("a stale socket file is live")
	}
}

// TestSummarizeAll: each target in order, judged against the budget; a
// journal's unreadable lines are noted on errOut only when asked, and a
// target without a journal stops it.
func TestSummarizeAll(t *testing.T) {
	root := t.TempDir()
	var targets []Target
	for _, d := range []string{"a", "b"} {
		dir := filepath.Join(root, d)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		line := `{"time":"2026-12-01T10:00:00Z","event":"start","name":"` + d + `","profile":"fp16","level":0}` + "\n"
		if d == "b" {
			line += "not json\n"
		}
		if err := os.WriteFile(filepath.Join(dir, paths.JournalFile), []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, Target{Name: d, Dir: dir})
	}
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	for _, note := range []bool{false, true} {
		var errOut bytes.Buffer
		reads, err := SummarizeAll(targets, nil, time.Time{}, now, 0.25, note, &errOut)
		if err != nil || len(reads) != 2 || reads[0].Summary.Name != "a" || reads[1].Summary.Name != "b" {
			t.Fatalf("SummarizeAll = %+v %v, want a then b", reads, err)
		}
		if reads[1].Summary.Budget != 0.25 || len(reads[1].Events) != 1 || reads[1].Summary.SkippedLines != 1 {
			t.Errorf("b: budget %v, %d events, %d skipped; want 0.25, 1, 1", reads[1].Summary.Budget, len(reads[1].Events), reads[1].Summary.SkippedLines)
		}
		if noted := strings.Contains(errOut.String(), "b: skipped 1 unreadable journal line(s)"); noted != note {
			t.Errorf("noteSkipped %v: errOut %q", note, errOut.String())
		}
	}
	_, err := SummarizeAll(append(targets, Target{Name: "c", Dir: t.TempDir()}), nil, time.Time{}, now, 0, false, &bytes.Buffer{})
	if !errors.Is(err, ErrNoJournal) {
		t.Errorf("a target without a journal: %v, want ErrNoJournal", err)
	}
}
