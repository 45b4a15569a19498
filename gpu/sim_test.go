package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// deadPID is above any kernel's pid_max (at most 2^22), so kill(2) always
// answers ESRCH.
const deadPID = 2147483647

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSimSample(t *testing.T) {
	dir := t.TempDir()
	me := os.Getpid()
	writeFile(t, filepath.Join(dir, "0", "tenant"), "1000\n")
	writeFile(t, filepath.Join(dir, "0", strconv.Itoa(me)), "  200 ")
	writeFile(t, filepath.Join(dir, "0", strconv.Itoa(deadPID)), "50")
	writeFile(t, filepath.Join(dir, "0", ".tmp"), "7")
	writeFile(t, filepath.Join(dir, "0", "garbage"), "12 GiB")
	writeFile(t, filepath.Join(dir, "0", "negative"), "-5")
	writeFile(t, filepath.Join(dir, "0", "0"), "3") // "0" is a tenant, not a PID
	writeFile(t, filepath.Join(dir, "1", "1"), "9") // PID 1 is alive (EPERM when not root)
	writeFile(t, filepath.Join(dir, "1", "sub", "x"), "100")

	s, err := NewSim(SimOptions{Dir: dir, Devices: 3, Memory: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Time.IsZero() || !got.ProcessesAt.Equal(got.Time) {
		t.Errorf("Time %v, ProcessesAt %v: want equal and set", got.Time, got.ProcessesAt)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantDev := []Device{
		{Index: 0, UUID: SimUUID(real, 0), Name: SimName, Used: 1203, Total: 4096},
		{Index: 1, UUID: SimUUID(real, 1), Name: SimName, Used: 9, Total: 4096},
		{Index: 2, UUID: SimUUID(real, 2), Name: SimName, Used: 0, Total: 4096},
	}
	if !reflect.DeepEqual(got.Devices, wantDev) {
		t.Errorf("Devices:\n got %+v\nwant %+v", got.Devices, wantDev)
	}
	wantProc := []Process{{PID: me, Device: 0, Used: 200}, {PID: 1, Device: 1, Used: 9}}
	if !reflect.DeepEqual(got.Processes, wantProc) {
		t.Errorf("Processes:\n got %+v\nwant %+v", got.Processes, wantProc)
	}
	if _, err := os.Stat(filepath.Join(dir, "2")); err != nil {
		t.Errorf("NewSim did not create the device dir: %v", err)
	}
}

func TestSimDefaultsAndSelect(t *testing.T) {
	dir := t.TempDir()
	s, err := NewSim(SimOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	smp, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(smp.Devices) != 1 || smp.Devices[0].Total != 16<<30 {
		t.Errorf("defaults: got %+v, want one 16GiB device", smp.Devices)
	}

	s, err = NewSim(SimOptions{Dir: dir, Devices: 4, Select: []int{3, 1}})
	if err != nil {
		t.Fatal(err)
	}
	smp, err = s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(smp.Devices) != 2 || smp.Devices[0].Index != 3 || smp.Devices[1].Index != 1 {
		t.Errorf("select 3,1: got %+v", smp.Devices)
	}
}

func TestNewSimErrors(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]SimOptions{
		"no dir":       {},
		"negative":     {Dir: dir, Devices: -1},
		"out of range": {Dir: dir, Devices: 2, Select: []int{2}},
		"negative sel": {Dir: dir, Devices: 2, Select: []int{-1}},
		"twice":        {Dir: dir, Devices: 2, Select: []int{1, 1}},
	} {
		if _, err := NewSim(o); err == nil {
			t.Errorf("%s: NewSim(%+v) succeeded, want an error", name, o)
		}
	}
}

func TestSimSampleHonoursContext(t *testing.T) {
	s, err := NewSim(SimOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Sample(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Sample with a cancelled context: err = %v, want context.Canceled", err)
	}
}

func TestSimPID(t *testing.T) {
	for name, want := range map[string]int{
		"1": 1, "4194304": 4194304, "2147483647": 2147483647,
		"0": 0, "-1": 0, "+5": 0, "012": 0, "2147483648": 0, "12a": 0, "": 0, "vllm": 0,
	} {
		got, ok := simPID(name)
		if ok != (want != 0) || got != want {
			t.Errorf("simPID(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
}

func TestReadSimFileTooLong(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	writeFile(t, p, "1"+string(make([]byte, 100)))
	if n := readSimFile(p); n != 0 {
		t.Errorf("readSimFile of an oversized file = %d, want 0", n)
	}
}

// TestSimUUIDs: a sim dir's UUIDs are its own (two dirs share none), the
// same whatever path names the dir (a symlink, a relative path), and look
// like GPU UUIDs.
func TestSimUUIDs(t *testing.T) {
	uuids := func(dir string) []string {
		t.Helper()
		s, err := NewSim(SimOptions{Dir: dir, Devices: 2})
		if err != nil {
			t.Fatal(err)
		}
		smp, err := s.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return []string{smp.Devices[0].UUID, smp.Devices[1].UUID}
	}
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	if err := os.Symlink(a, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	ua, ub := uuids(a), uuids(b)
	if ua[0] == ua[1] {
		t.Errorf("devices 0 and 1 of one dir share the UUID %s", ua[0])
	}
	if ua[0] == ub[0] || ua[1] == ub[1] {
		t.Errorf("two sim dirs share UUIDs: %v and %v", ua, ub)
	}
	if got := uuids(filepath.Join(root, "link")); !reflect.DeepEqual(got, ua) {
		t.Errorf("through a symlink: %v, want %v", got, ua)
	}
	t.Chdir(root)
	if got := uuids("a"); !reflect.DeepEqual(got, ua) {
		t.Errorf("relative path: %v, want %v", got, ua)
	}
	if !regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(ua[0]) {
		t.Errorf("UUID %q does not look like a GPU UUID", ua[0])
	}
}

// TestSimZombieIsDead: a PID file counts only while its process runs; a
// child that has exited and is not yet reaped (a zombie) frees its memory
// like any dead process.
func TestSimZombieIsDead(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	// Wait for the exit without reaping (WNOWAIT): the process stays a
	// zombie until cmd.Wait.
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || !exited(string(b)) {
		t.Fatalf("pid %d is not a zombie: %s %v", pid, b, err)
	}
	writeFile(t, filepath.Join(dir, "0", strconv.Itoa(pid)), "500")
	writeFile(t, filepath.Join(dir, "0", strconv.Itoa(os.Getpid())), "7")
	s, err := NewSim(SimOptions{Dir: dir, Memory: 4096})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Devices[0].Used != 7 || len(got.Processes) != 1 || got.Processes[0].PID != os.Getpid() {
		t.Fatalf("a zombie's usage counted: %+v", got)
	}
}

func TestExited(t *testing.T) {
	for stat, want := range map[string]bool{
		"123 (sh) Z 1 123 123 0 -1": true,
		"123 (sh) X 1 123":          true,
		"123 (sh) S 1 123 123 0 -1": false,
		"123 (odd) Z name) R 1 2 3": false, // the state follows the last ')'
		"123 (odd) R name) Z 1 2 3": true,
		"garbage":                   false,
		"":                          false,
	} {
		if got := exited(stat); got != want {
			t.Errorf("exited(%q) = %v, want %v", stat, got, want)
		}
	}
}
