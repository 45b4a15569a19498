package nvml

import (
	"os"
	"path/filepath"
)

// EnvLibrary names the variable whose value, a path to the driver library,
// replaces the search for it.
const EnvLibrary = "GPUGUARD_NVML_LIB"

// libraryName is the driver library go-nvml loads.
const libraryName = "libnvidia-ml.so.1"

// multiarch is Debian's multiarch directory name per GOARCH.
var multiarch = map[string]string{
	"amd64":   "x86_64-linux-gnu",
	"arm64":   "aarch64-linux-gnu",
	"ppc64le": "powerpc64le-linux-gnu",
}

// libraryDirs are the directories searched for the driver library when the
// dynamic loader does not find it, in order: where Kubernetes device
// plugins and GKE mount the driver (/usr/local/nvidia), the distribution's
// library directories (RPM's lib64, Debian's multiarch dirs and their
// nvidia/current), the same under the GPU Operator's driver container root
// (/run/nvidia/driver), and WSL's. The list follows NVIDIA's own lookups
// (k8s-device-plugin's root.go, nvidia-container-toolkit's lookup/library.go).
func libraryDirs(goarch string) []string {
	dirs := []string{"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"}
	multi := multiarch[goarch]
	for _, root := range []string{"/", "/run/nvidia/driver"} {
		dirs = append(dirs, filepath.Join(root, "usr/lib64"))
		if multi != "" {
			dirs = append(dirs, filepath.Join(root, "usr/lib", multi), filepath.Join(root, "usr/lib", multi, "nvidia/current"))
		}
		dirs = append(dirs, filepath.Join(root, "lib64"))
		if multi != "" {
			dirs = append(dirs, filepath.Join(root, "lib", multi))
		}
		dirs = append(dirs, filepath.Join(root, "usr/lib"))
	}
	return append(dirs, "/usr/lib/wsl/lib")
}

// findLibrary looks for the driver library in dirs, each taken under root
// ("/" on a real system, a fake tree in tests). found lists the candidates
// that exist (following links), in search order; looked lists every path
// looked at, as the user knows them (without root).
func findLibrary(root string, dirs []string) (found, looked []string) {
	for _, d := range dirs {
		p := filepath.Join(d, libraryName)
		looked = append(looked, p)
		if st, err := os.Stat(filepath.Join(root, p)); err == nil && st.Mode().IsRegular() {
			found = append(found, filepath.Join(root, p))
		}
	}
	return found, looked
}
