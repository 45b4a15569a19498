package e2e

import (
	"bufio"
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
	"testing"
	"time"
)

// The opt-in suite against real model servers (real_test.go) runs when
// these name what it needs, and skips, saying which is missing, when they
// do not. It builds and downloads nothing: docs/serving.md ("Tried
// against real servers") names the servers and models it was last run
// with, and what passed.
const (
	envLlamaServer = "GPUGUARD_REAL_LLAMA_SERVER" // path of a llama-server binary (llama.cpp)
	envOllama      = "GPUGUARD_REAL_OLLAMA"       // path of an ollama binary
	envGGUFDir     = "GPUGUARD_REAL_GGUF_DIR"     // a directory of GGUF files: the smallest serves most checks, the largest the long streams
)

// realServers is what the environment gives the suite.
type realServers struct {
	llama, ollama string
	small, large  string // GGUF files: the smallest and the largest of the directory
}

// needReal returns the servers the test needs (envLlamaServer and/or
// envOllama, and always the GGUF dir), or skips it naming what is missing.
func needReal(t *testing.T, vars ...string) realServers {
	t.Helper()
	var missing []string
	for _, v := range append(vars, envGGUFDir) {
		if p := os.Getenv(v); p == "" {
			missing = append(missing, v)
		} else if _, err := os.Stat(p); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", v, err))
		}
	}
	if len(missing) > 0 {
		t.Skipf("the real-server suite needs %s: set them to run it (docs/serving.md, \"Tried against real servers\")", strings.Join(missing, ", "))
	}
	r := realServers{llama: os.Getenv(envLlamaServer), ollama: os.Getenv(envOllama)}
	files, _ := filepath.Glob(filepath.Join(os.Getenv(envGGUFDir), "*.gguf"))
	if len(files) == 0 {
		t.Skipf("%s holds no *.gguf file", envGGUFDir)
	}
	size := func(f string) int64 {
		st, err := os.Stat(f)
		if err != nil {
			return 0
		}
		return st.Size()
	}
	slices.SortFunc(files, func(a, b string) int { return int(size(a) - size(b)) })
	r.small, r.large = files[0], files[len(files)-1]
	return r
}

// modelsDirWithM is a models directory for the router holding one model,
// gguf, under the name "m" (m.gguf), the name the client load asks for.
func modelsDirWithM(t *testing.T, gguf string) string {
	t.Helper()
	dir := t.TempDir()
	m := filepath.Join(dir, "m.gguf")
	if err := os.Link(gguf, m); err != nil { // a hard link where it can: a file, as the router lists them
		if err := os.Symlink(gguf, m); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startRealSingle runs the shipped llama-server-single.toml around the
// real llama-server with model gguf; edits are more text replacements.
func startRealSingle(t *testing.T, r realServers, gguf string, edits ...[2]string) *exampleRun {
	t.Helper()
	repl := append([][2]string{
		{`"llama-server", "-m", "/srv/models/Qwen3-8B-Q4_K_M.gguf"`, fmt.Sprintf("%q, \"-m\", %q", r.llama, gguf)},
		{`"--port", "8081"`, `"--port", "PORT"`},
	}, edits...)
	return startExample(t, "llama-server-single.toml", repl, nil)
}

// startRealRouter runs the shipped llama-server.toml around the real
// router, its models directory holding gguf as "m", with the shipped
// preset (load-on-startup) when preset is true.
func startRealRouter(t *testing.T, r realServers, gguf string, preset bool, edits ...[2]string) *exampleRun {
	t.Helper()
	dir := modelsDirWithM(t, gguf)
	ini := filepath.Join(t.TempDir(), "models.ini")
	body := "version = 1\n"
	if preset {
		body = exampleText(t, "llama-server-models.ini", routerModel)
	}
	if err := os.WriteFile(ini, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	repl := append([][2]string{
		routerModel,
		{`"llama-server", "--models-dir", "/srv/models"`, fmt.Sprintf("%q, \"--models-dir\", %q", r.llama, dir)},
		{"/etc/gpuguard/llama-server-models.ini", ini},
		{`"--port", "8081"`, `"--port", "PORT"`},
	}, edits...)
	return startExample(t, "llama-server.toml", repl, nil)
}

// startRealOllama runs the shipped ollama.toml around the real Ollama,
// its models in a directory of the test's own, and creates the model "m"
// from gguf once Ollama answers.
func startRealOllama(t *testing.T, r realServers, gguf string, edits ...[2]string) *exampleRun {
	t.Helper()
	models := t.TempDir()
	repl := append([][2]string{
		{"llama3.1:8b", "m:latest"}, // Ollama lists it as m:latest in /api/ps
		{`command = ["ollama", "serve"]`, fmt.Sprintf("command = [%q, \"serve\"]", r.ollama)},
	}, edits...)
	e := newEnv(t)
	child := freeLoopbackAddr(t)
	repl = append(repl, [2]string{"127.0.0.1:11435", child})
	x := startExampleIn(t, e, child, "ollama.toml", repl, nil, "OLLAMA_MODELS="+models, "HOME="+e.dir)
	waitFor(t, "the first ready event", 120*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
	mf := filepath.Join(e.dir, "Modelfile")
	if err := os.WriteFile(mf, []byte("FROM "+gguf+"\nTEMPLATE \"{{ .Prompt }}\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.ollama, "create", "m:latest", "-f", mf)
	cmd.Env = append(os.Environ(), "OLLAMA_HOST="+child, "HOME="+e.dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ollama create: %v\n%s", err, out)
	}
	return x
}

// streamEvent is one line of a streamed answer and when it arrived.
type streamEvent struct {
	at   time.Time
	line string
}

// stream POSTs body to url and reads the answer line by line as it
// arrives, until it ends; it returns the status, the non-empty lines
// with their arrival times, and how the body ended (nil: whole).
func stream(t *testing.T, url, body string, header ...string) (int, []streamEvent, error) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var evs []streamEvent
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if s := strings.TrimSpace(line); s != "" {
			evs = append(evs, streamEvent{time.Now(), s})
		}
		if err == io.EOF {
			return resp.StatusCode, evs, nil
		}
		if err != nil {
			return resp.StatusCode, evs, err
		}
	}
}

// post sends one small completion to the door and returns its status and
// body.
func post(t *testing.T, url, body string, timeout time.Duration) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: timeout}).Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// get is the body of GET url ("" on any error).
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// launchLines are gpuguard's stderr lines that announce a launch's fit
// ("fit for the start: ...", "fit for the restart after REASON: ...").
func launchLines(x *exampleRun) []string {
	var out []string
	for _, l := range strings.Split(x.p.stderr.String(), "\n") {
		if strings.Contains(l, "fit for the ") {
			out = append(out, l)
		}
	}
	return out
}

// stopGPUGuard ends the run with SIGTERM and wants exit 0 (the child's
// status), or 143 when no child ran (asleep in a stopped profile).
func (x *exampleRun) stopGPUGuard(t *testing.T) {
	t.Helper()
	x.p.signal(sigterm)
	if code := x.p.wait(); code != 0 && code != 128+int(sigterm) {
		t.Errorf("gpuguard exit %d", code)
	}
}

// listening reports whether something accepts connections at addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}
