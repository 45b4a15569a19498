package cmd

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuguard/gpuguard/tasks"
	"github.com/gpuguard/gpuguard/tasks/redis"
	"github.com/gpuguard/gpuguard/tasks/sqlite"
)

// redisURLFile, in <state-dir>/deferred/, names the Redis store an
// instance uses, so that `gpuguard tasks` finds its queue (0600: the URL
// may hold a password).
const redisURLFile = "redis.url"

// openTaskStore opens the run's deferred-task store ([defer] store). It
// fails only for a store URL that cannot be used at all; a store that
// cannot be reached or written fails each call instead, so the instance
// runs and its deferrals are denied with the reason.
func openTaskStore(r *resolvedRun, logf func(string, ...any)) (tasks.Store, error) {
	url := r.pol.Defer.Store
	if url == "" {
		dir := r.stateDir
		return tasks.NewLazy(func() (tasks.Store, error) { return sqlite.Open(dir) }, func() bool { return sqlite.Exists(dir) }), nil
	}
	redis.Silence() // the deliverer reports the store's errors, once per change
	s, err := redis.Open(url, r.name, consumerName(r.stateDir))
	if err != nil {
		return nil, err
	}
	if err := writeRedisURL(r.stateDir, url); err != nil {
		logf("%v (gpuguard tasks will not find this instance's queue)", err)
	}
	return s, nil
}

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
	tmp := filepath.Join(dir, "."+redisURLFile+".tmp")
	if err := os.WriteFile(tmp, []byte(url+"\n"), 0o600); err != nil {
		return fmt.Errorf("recording the task store: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, redisURLFile)); err != nil {
		return fmt.Errorf("recording the task store: %w", err)
	}
	return nil
}
