package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// checkpointWriter is a child that saves checkpoints in a loop with the
// Python client's save_checkpoint (temp file, fsync, rename). Each version
// is self-validating: JSON with the sha256 of its payload. At start it
// loads the checkpoint, checks it, and goes on from its seq; a damaged
// checkpoint prints "corrupt" and exits 3.
const checkpointWriter = `
import hashlib, json, os, random, sys
sys.path.insert(0, os.environ["GG_PYTHONPATH"])
from gpuguard import load_checkpoint, save_checkpoint

def check(raw):
    try:
        d = json.loads(raw)
        ok = hashlib.sha256(d["payload"].encode()).hexdigest() == d["sha256"]
        return d["seq"] if ok else None
    except Exception:
        return None

raw = load_checkpoint()
seq = 0
if raw is not None:
    seq = check(raw)
    if seq is None:
        print("corrupt", flush=True)
        sys.exit(3)
print("up %d %d" % (os.getpid(), seq), flush=True)
rnd = random.Random()
while True:
    seq += 1
    payload = os.urandom(rnd.randint(1, 96 << 10)).hex()
    doc = json.dumps({"seq": seq, "payload": payload,
                      "sha256": hashlib.sha256(payload.encode()).hexdigest()}).encode()
    # Written in small pieces, so that a kill often lands mid-write.
    save_checkpoint(lambda f: [f.write(doc[i:i + 8192]) for i in range(0, len(doc), 8192)])
`

// checkpointVersion validates one checkpoint file and returns its seq.
func checkpointVersion(path string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var d struct {
		Seq     int    `json:"seq"`
		Payload string `json:"payload"`
		SHA256  string `json:"sha256"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return 0, fmt.Errorf("%s (%d bytes) is not a whole version: %w", path, len(raw), err)
	}
	if sum := sha256.Sum256([]byte(d.Payload)); hex.EncodeToString(sum[:]) != d.SHA256 {
		return 0, fmt.Errorf("%s: seq %d: payload does not match its sha256", path, d.Seq)
	}
	return d.Seq, nil
}

// TestCheckpointSurvivesKills kills the checkpoint writer with SIGKILL at
// random moments, 50 times (1,000 with GPUGUARD_SOAK=1). gpuguard restarts
// it each time, rotating the checkpoint into generations first. After
// every kill the checkpoint, and at the end every generation, must be a
// whole version, and versions never go backwards.
func TestCheckpointSurvivesKills(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	kills := 50
	if os.Getenv("GPUGUARD_SOAK") == "1" {
		kills = 1000
	}
	pyPath, err := filepath.Abs(filepath.Join("..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	script := e.path("writer.py")
	if err := os.WriteFile(script, []byte(checkpointWriter), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := e.policy(`
[watch]
backend = "sim"
interval = "50ms"
[restart]
backoff = "0s"
backoff_max = "0s"
max_restarts = 1000000
start_secs = "0s"
release_timeout = "1s"
[checkpoint]
keep = 3
`)
	p := e.start([]string{"run", "--policy", pol, "--name", "ckpt", "--", "/usr/bin/python3", script},
		"GG_PYTHONPATH="+pyPath)
	ckpt := filepath.Join(e.stateDir, "checkpoint")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	lastSeq, midWrite := 0, 0
	written := false // a checkpoint version has existed
	rotated := 0     // kills after which the restart had a checkpoint to keep
	start := time.Now()
	for i := 0; i <= kills; i++ {
		pid, seq := p.writerUp()
		if seq < lastSeq {
			t.Fatalf("kill %d: the restarted writer resumed at seq %d, after %d had been seen", i, seq, lastSeq)
		}
		if i > 0 {
			// The writer validated what it loaded; check the file too.
			// A kill can land before the first checkpoint was written:
			// the file may then still be missing, but only while no
			// version was ever seen (gpuguard never deletes it).
			got, err := checkpointVersion(ckpt)
			switch {
			case errors.Is(err, fs.ErrNotExist) && !written && seq == 0:
			case err != nil:
				t.Fatalf("after kill %d: %v (a checkpoint had been seen: %v; the writer loaded seq %d)", i, err, written, seq)
			case got < seq:
				t.Fatalf("after kill %d: checkpoint at seq %d, the writer loaded %d", i, got, seq)
			default:
				written = true
			}
		}
		written = written || seq > 0
		lastSeq = seq
		if i == kills {
			break
		}
		// A random moment in the writer's loop: this delay picks when to
		// kill, it does not wait for anything.
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		if _, err := os.Stat(ckpt); err == nil {
			written = true // from now on the file must always be there
			rotated++      // and the restart keeps a generation of it
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		midWrite += countTemps(t, e.stateDir)
		removeTemps(t, e.stateDir)
	}
	p.signal(syscall.SIGTERM)
	p.wait()
	if !written {
		t.Fatalf("no checkpoint was written in %d runs of the writer", kills+1)
	}
	// Only restarts that found a checkpoint made a generation of it.
	for i, name := range []string{"checkpoint", "checkpoint.1", "checkpoint.2", "checkpoint.3"}[:1+min(3, rotated)] {
		if _, err := checkpointVersion(filepath.Join(e.stateDir, name)); err != nil {
			t.Errorf("generation %d (%s): %v", i, name, err)
		}
	}
	t.Logf("%d kills in %s: every checkpoint whole; %d kills landed between the temp file's creation and its rename; last seq %d",
		kills, time.Since(start).Round(time.Millisecond), midWrite, lastSeq)
	if kills >= 50 && midWrite == 0 {
		t.Errorf("no kill landed mid-write in %d tries: the test does not exercise what it claims", kills)
	}
}

// writerUp waits for the next writer's "up PID SEQ" line.
func (p *proc) writerUp() (pid, seq int) {
	p.t.Helper()
	for {
		l := p.expect("")
		if l == "corrupt" {
			p.t.Fatalf("the restarted writer found a damaged checkpoint; stderr:\n%s", p.stderr.String())
		}
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "up" {
			pid, err1 := strconv.Atoi(f[1])
			seq, err2 := strconv.Atoi(f[2])
			if err := errors.Join(err1, err2); err != nil {
				p.t.Fatalf("line %q: %v", l, err)
			}
			return pid, seq
		}
	}
}

// countTemps counts save_checkpoint's temp files (".checkpoint.*.tmp")
// that a kill left behind: each is a kill between mkstemp and rename.
func countTemps(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".checkpoint.*.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func removeTemps(t *testing.T, dir string) {
	m, _ := filepath.Glob(filepath.Join(dir, ".checkpoint.*.tmp"))
	for _, f := range m {
		os.Remove(f)
	}
}

// TestFullDiskWhileRotating puts the checkpoint on a tmpfs too small for a
// second copy: the rotation before a restart fails with ENOSPC, and the
// checkpoint itself is left byte for byte as it was, with no partial
// generation; the restarted child finds it whole.
func TestFullDiskWhileRotating(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mnt := e.path("tiny")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=256k,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	ckpt := filepath.Join(mnt, "ckpt")
	orig := bytes.Repeat([]byte("0123456789abcdef"), 150<<10/16) // 150 KiB: no room for a second
	if err := os.WriteFile(ckpt, orig, 0o640); err != nil {
		t.Fatal(err)
	}
	pol := e.policy(fmt.Sprintf(`
[watch]
backend = "sim"
interval = "50ms"
[restart]
backoff = "10ms"
backoff_max = "10ms"
[checkpoint]
path = %q
keep = 2
`, ckpt))
	// The first child crashes; the second reports what it finds and ends.
	script := `if [ "$GPUGUARD_RESTARTS" = 0 ]; then exit 1; fi; cksum < "$GPUGUARD_CHECKPOINT"`
	code, out, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "full"}, sh(script)...))
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "no space left on device") || !strings.Contains(stderr, "the checkpoint is untouched") {
		t.Errorf("the failed rotation was not reported:\n%s", stderr)
	}
	got, err := os.ReadFile(ckpt)
	if err != nil || !bytes.Equal(got, orig) {
		t.Fatalf("checkpoint changed by a failed rotation (%d bytes, %v)", len(got), err)
	}
	if fi, err := os.Stat(ckpt); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("checkpoint mode changed: %v %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(mnt)
	if len(entries) != 1 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Errorf("the tmpfs holds %v, want only the checkpoint (no partial generation)", names)
	}
	if want := cksumOf(t, ckpt); strings.TrimSpace(out) != want {
		t.Errorf("the restarted child saw cksum %q, want %q", strings.TrimSpace(out), want)
	}
}

func cksumOf(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `cksum < "$1"`, "sh", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
