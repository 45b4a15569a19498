package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuguard/gpuguard/internal/tasks"
	"github.com/gpuguard/gpuguard/internal/tasks/redis"
	"github.com/gpuguard/gpuguard/internal/tasks/sqlite"
)

// RedisURLFile, in <state-dir>/deferred/, names the Redis store an
// instance uses, so that `gpuguard tasks` finds its queue (0600: the URL
// may hold a password).
const RedisURLFile = "redis.url"

// Open opens a run's deferred-task store: url is [defer] store ("" = the
// embedded store in stateDir). It fails only for a store URL that cannot
// be used at all; a store that cannot be reached or written fails each
// call instead, so the instance runs and its deferrals are denied with the
// reason.
func Open(url, stateDir, name string, logf func(string, ...any)) (tasks.Store, error) {
	if url == "" {
		return tasks.NewLazy(func() (tasks.Store, error) { return sqlite.Open(stateDir) }, func() bool { return sqlite.Exists(stateDir) }), nil
	}
	redis.Silence() // the deliverer reports the store's errors, once per change
	s, err := redis.Open(url, name, consumerName(stateDir))
	if err != nil {
		return nil, err
	}
	if err := writeRedisURL(stateDir, url); err != nil {
		logf("%v (gpuguard tasks will not find this instance's queue)", err)
	}
	return s, nil
}

// Shared says whether the store of url is written by other processes
// too: a Redis store is shared by the instances of one name on every
// host, so tasks appear in it that this instance was not told of; the
// embedded store is its instance's alone.
func Shared(url string) bool { return url != "" }

// consumerName is this instance's consumer in the Redis group: the same
// across its restarts (Recover finds its tasks by it), another for an
// instance of the same name on another host or in another state dir.
func consumerName(stateDir string) string {
	host, _ := os.Hostname()
	abs, _ := filepath.Abs(stateDir)
	sum := sha256.Sum256([]byte(abs))
	return host + "/" + hex.EncodeToString(sum[:4])
}

func writeRedisURL(stateDir, url string) error {
	dir := filepath.Join(stateDir, sqlite.Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("recording the task store: %w", err)
	}
	tmp := filepath.Join(dir, "."+RedisURLFile+".tmp")
	if err := os.WriteFile(tmp, []byte(url+"\n"), 0o600); err != nil {
		return fmt.Errorf("recording the task store: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, RedisURLFile)); err != nil {
		return fmt.Errorf("recording the task store: %w", err)
	}
	return nil
}

// HasQueue says whether the state dir dir holds a queue: the embedded
// store, or the record of a Redis one.
func HasQueue(dir string) bool {
	if sqlite.Exists(dir) {
		return true
	}
	_, err := os.Lstat(filepath.Join(dir, sqlite.Dir, RedisURLFile))
	return err == nil
}

// OpenAt opens the queue of the instance name in dir, as `gpuguard tasks`
// reads it: the Redis store its run recorded, else the embedded one; nil
// when it has none.
func OpenAt(dir, name string) (tasks.Store, error) {
	if b, err := os.ReadFile(filepath.Join(dir, sqlite.Dir, RedisURLFile)); err == nil {
		return redis.Open(strings.TrimSpace(string(b)), name, "gpuguard-tasks")
	}
	if !sqlite.Exists(dir) {
		return nil, nil
	}
	return sqlite.Open(dir)
}
