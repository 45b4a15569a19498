//go:build cgo

package nvml

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuguard/gpuguard/gpu"
)

// fakeLoader is a newLib whose libraries load only from the paths in ok;
// it records the paths it was asked for.
type fakeLoader struct {
	ok    map[string]bool
	asked []string
}

func (f *fakeLoader) newLib(path string) Library {
	f.asked = append(f.asked, path)
	srv := newH200()
	srv.InitFunc = func() gonvml.Return {
		if f.ok[path] {
			return gonvml.SUCCESS
		}
		return gonvml.ERROR_LIBRARY_NOT_FOUND
	}
	return srv
}

// TestLoadSearches: when the dynamic loader fails, the driver library is
// looked for in the usual places and the first that loads is used.
func TestLoadSearches(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"run/nvidia/driver/usr/lib64/libnvidia-ml.so.1": "",
		"usr/local/nvidia/lib/libnvidia-ml.so.1":        "", // found first, but will not load
	})
	good := filepath.Join(root, "run/nvidia/driver/usr/lib64/libnvidia-ml.so.1")
	f := &fakeLoader{ok: map[string]bool{good: true}}
	if _, err := load(Options{}, root, f.newLib); err != nil {
		t.Fatal(err)
	}
	want := []string{"", filepath.Join(root, "usr/local/nvidia/lib/libnvidia-ml.so.1"), good}
	if strings.Join(f.asked, ",") != strings.Join(want, ",") {
		t.Errorf("tried %q, want %q", f.asked, want)
	}

	// The loader's own find wins: no search.
	f = &fakeLoader{ok: map[string]bool{"": true}}
	if _, err := load(Options{}, root, f.newLib); err != nil || len(f.asked) != 1 {
		t.Errorf("loader found it: err %v, tried %q", err, f.asked)
	}
}

// TestLoadOverride: GPUGUARD_NVML_LIB (Options.LibraryPath) replaces the
// search: only that path is tried, and the error names it.
func TestLoadOverride(t *testing.T) {
	root := fakeTree(t, map[string]string{"usr/lib64/libnvidia-ml.so.1": ""})
	f := &fakeLoader{ok: map[string]bool{filepath.Join(root, "usr/lib64/libnvidia-ml.so.1"): true}}
	_, err := load(Options{LibraryPath: "/opt/drv/libnvidia-ml.so.1"}, root, f.newLib)
	if !errors.Is(err, gpu.ErrUnavailable) || !strings.Contains(err.Error(), "/opt/drv/libnvidia-ml.so.1") {
		t.Errorf("error %v, want ErrUnavailable naming the path", err)
	}
	if len(f.asked) != 1 || f.asked[0] != "/opt/drv/libnvidia-ml.so.1" {
		t.Errorf("tried %q, want only the override", f.asked)
	}
}

// TestLoadNotFound: after every usual place was tried, the exit-69
// message says in a few words what was not found and how to name the
// library (the command adds --backend sim).
func TestLoadNotFound(t *testing.T) {
	f := &fakeLoader{}
	_, err := load(Options{}, t.TempDir(), f.newLib)
	if !errors.Is(err, gpu.ErrUnavailable) {
		t.Fatalf("error %v, want ErrUnavailable", err)
	}
	if want := "GPU backend unavailable: NVML: libnvidia-ml.so.1 not found (GPUGUARD_NVML_LIB=PATH names it)"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if len(f.asked) != 1 {
		t.Errorf("tried %q: want the dynamic loader only (the tree holds no library)", f.asked)
	}
}
