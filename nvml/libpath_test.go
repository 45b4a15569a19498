package nvml

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// fakeTree makes root/<p> for each p (a file, or a link when p maps to
// a target).
func fakeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, target := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target == "" {
			err = os.WriteFile(full, []byte("ELF"), 0o644)
		} else {
			err = os.Symlink(target, full)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLibraryDirs(t *testing.T) {
	amd := libraryDirs("amd64")
	for _, want := range []string{"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib64",
		"/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/nvidia/current", "/lib64", "/lib/x86_64-linux-gnu",
		"/run/nvidia/driver/usr/lib64", "/run/nvidia/driver/usr/lib/x86_64-linux-gnu", "/usr/lib/wsl/lib"} {
		if !slices.Contains(amd, want) {
			t.Errorf("amd64 search lacks %s: %v", want, amd)
		}
	}
	if amd[0] != "/usr/local/nvidia/lib64" {
		t.Errorf("the device plugins' mount comes first: %v", amd)
	}
	if i, j := slices.Index(amd, "/usr/lib/x86_64-linux-gnu"), slices.Index(amd, "/run/nvidia/driver/usr/lib/x86_64-linux-gnu"); i > j {
		t.Error("the host's own libraries come before the driver container's")
	}
	if arm := libraryDirs("arm64"); !slices.Contains(arm, "/usr/lib/aarch64-linux-gnu") || slices.Contains(arm, "/usr/lib/x86_64-linux-gnu") {
		t.Errorf("arm64 search: %v", arm)
	}
	if other := libraryDirs("riscv64"); !slices.Contains(other, "/usr/lib64") {
		t.Errorf("an arch without a multiarch name still searches lib64: %v", other)
	}
}

func TestFindLibrary(t *testing.T) {
	dirs := libraryDirs("amd64")
	root := fakeTree(t, map[string]string{
		"run/nvidia/driver/usr/lib64/libnvidia-ml.so.1":      "libnvidia-ml.so.550.54",
		"run/nvidia/driver/usr/lib64/libnvidia-ml.so.550.54": "",
		"usr/local/nvidia/lib64/libnvidia-ml.so.1":           "",
		"usr/lib64/libnvidia-ml.so.1":                        "missing-target",
		"lib64/libnvidia-ml.so.1/oops":                       "", // a directory, not a library
	})
	found, looked := findLibrary(root, dirs)
	want := []string{filepath.Join(root, "usr/local/nvidia/lib64/libnvidia-ml.so.1"),
		filepath.Join(root, "run/nvidia/driver/usr/lib64/libnvidia-ml.so.1")}
	if !reflect.DeepEqual(found, want) {
		t.Errorf("found %v, want %v (in search order, dangling links and directories skipped)", found, want)
	}
	if len(looked) != len(dirs) || looked[0] != "/usr/local/nvidia/lib64/libnvidia-ml.so.1" {
		t.Errorf("looked %v: want every dir, named without the root", looked)
	}
	if found, _ := findLibrary(t.TempDir(), dirs); len(found) != 0 {
		t.Errorf("an empty tree has %v", found)
	}
}
