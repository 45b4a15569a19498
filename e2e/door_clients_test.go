package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clientsDir holds the real clients' package (package.json and its lock);
// `npm ci` there installs them (.ci/run does).
const clientsDir = "testdata/clients"

// TestDoorRealClients: the official OpenAI JavaScript SDK and the Ollama
// JavaScript library, pointed at `gpuguard door` in front of two
// instances: models.list, chat with and without a stream, embeddings, an
// unknown model raising the SDK's NotFoundError with code
// model_not_found; Ollama's list, chat (and its stream) and embed. Without
// node or the installed packages it skips, except in CI, where it fails.
func TestDoorRealClients(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(clientsDir, "node_modules", "openai"))
	if _, olErr := os.Stat(filepath.Join(clientsDir, "node_modules", "ollama")); modErr == nil {
		modErr = olErr
	}
	if err != nil || modErr != nil {
		msg := "the real clients are not installed: run `npm ci` in e2e/" + clientsDir + " (node 20 and npm needed)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; in CI they must run (.ci/run installs them)")
		}
		t.Skip(msg + "; with CI set this fails")
	}
	e := newEnv(t)
	e.startModelInstance("llm", `models = ["qwen2.5-7b-instruct", "qwen"]`)
	e.startModelInstance("embed", "")
	d := e.startGPUGuardDoor()
	waitFor(t, "both instances routed", 10*time.Second, func() bool { return len(d.modelIDs(t)) == 3 })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "door_clients.mjs", d.url)
	cmd.Dir = clientsDir
	out, err := cmd.CombinedOutput()
	t.Logf("node door_clients.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the real clients failed: %v", err)
	}
	for _, check := range []string{"openai models.list", "openai chat", "openai chat stream", "openai embeddings", "openai unknown model",
		"ollama list", "ollama chat", "ollama chat stream", "ollama embed", "ollama unknown model"} {
		if !strings.Contains(string(out), "ok "+check+"\n") {
			t.Errorf("check %q did not pass", check)
		}
	}
}
