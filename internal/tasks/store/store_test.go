package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/internal/tasks/sqlite"
)

// TestEmbeddedQueue: without [defer] store the queue is the embedded one,
// created only when used: a state dir without it has no queue to list.
func TestEmbeddedQueue(t *testing.T) {
	dir := t.TempDir()
	s, err := Open("", dir, "x", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if HasQueue(dir) {
		t.Error("an unused embedded store counts as a queue")
	}
	if q, err := OpenAt(dir, "x"); q != nil || err != nil {
		t.Errorf("OpenAt without a queue = %v %v, want nil nil", q, err)
	}
}

// TestRedisQueueIsRecorded: a Redis store is recorded in the state dir
// (0600: the URL may hold a password), so that `gpuguard tasks` finds it.
func TestRedisQueueIsRecorded(t *testing.T) {
	dir := t.TempDir()
	url := "redis://:secret@127.0.0.1:1/0"
	s, err := Open(url, dir, "x", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := filepath.Join(dir, sqlite.Dir, RedisURLFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != url {
		t.Errorf("%s holds %q, want %q", path, b, url)
	}
	if !HasQueue(dir) {
		t.Error("a recorded Redis store is not a queue")
	}
}

// TestConsumerName: the same state dir gives the same consumer across
// restarts, another dir another one.
func TestConsumerName(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if consumerName(a) != consumerName(a) || consumerName(a) == consumerName(b) {
		t.Errorf("consumers %q %q %q", consumerName(a), consumerName(a), consumerName(b))
	}
}

// TestShared: a Redis store is shared by the hosts of an instance's name
// (its deliverer looks for their tasks); the embedded store is not.
func TestShared(t *testing.T) {
	if Shared("") {
		t.Error("the embedded store said shared")
	}
	if !Shared("redis://127.0.0.1:6379/0") {
		t.Error("a Redis store said not shared")
	}
}
