package validate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const readyLine = "gpuguard-validate: server up"

// runLive runs the container's gpuguard command line the way the kubelet
// would, with each volume mount mapped to a directory of its own (ConfigMap
// volumes written out), on the simulated GPU and with a shell standing in
// for vLLM (there is no GPU, no vLLM and no container runtime here). It
// returns what /metrics served, once the stand-in server runs. This shows
// that gpuguard accepts the manifest's flags, policy and environment and
// serves its metrics; the metrics address itself is moved to loopback.
func runLive(t *testing.T, g Guarded, set Set) string {
	t.Helper()
	// Short: the control socket goes under it, and socket paths are
	// limited to 108 bytes.
	root, err := os.MkdirTemp("", "ggv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	mounts := map[string]string{}
	for i, m := range g.Container.VolumeMounts {
		dir := filepath.Join(root, fmt.Sprint(i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if v, ok := podVolume(g.Deployment, m.Name); ok && v.ConfigMap != nil {
			if cm := set.ConfigMap(v.ConfigMap.Name); cm != nil {
				for k, val := range cm.Data {
					if err := os.WriteFile(filepath.Join(dir, k), []byte(val), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		mounts[strings.TrimSuffix(m.MountPath, "/")] = dir
	}
	inPod := func(s string) string {
		for mp, dir := range mounts {
			if s == mp || strings.HasPrefix(s, mp+"/") {
				return dir + s[len(mp):]
			}
		}
		return s
	}

	addr := freeAddr(t)
	argv := Argv(g.Container)
	var args []string
	for i := 1; i < len(argv); i++ {
		switch a := argv[i]; {
		case a == "--":
			i = len(argv) // the server's own command is replaced below
		case a == "--metrics-addr":
			i++
		case strings.HasPrefix(a, "--metrics-addr="):
		default:
			args = append(args, inPod(a))
		}
	}
	args = append(args, "--metrics-addr", addr, "--backend", "sim", "--sim-memory", "80GiB",
		"--state-dir", filepath.Join(root, "state"),
		"--", "sh", "-c", "echo '"+readyLine+"'; exec sleep 300")

	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GPUGUARD_") })
	for _, e := range g.Container.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+inPod(e.Value))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpuguard, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	sc := bufio.NewScanner(stdout)
	up := false
	for !up && sc.Scan() {
		up = sc.Text() == readyLine
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	if !up {
		<-done
		t.Fatalf("%s: gpuguard %s never started the server:\n%s", g, strings.Join(args, " "), stderr.String())
	}
	body, err := scrape(addr)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if werr := <-done; ctx.Err() != nil {
		t.Errorf("%s: gpuguard did not stop on SIGTERM: %v", g, werr)
	}
	if err != nil {
		t.Fatalf("%s: scraping %s: %v\n%s", g, addr, err, stderr.String())
	}
	if !strings.Contains(body, "\ngpuguard_watermark_ratio{") {
		t.Errorf("%s: /metrics has no gpuguard_watermark_ratio:\n%s", g, body)
	}
	return body
}

func scrape(addr string) (string, error) {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s", resp.Status)
	}
	return "\n" + string(b), err
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
