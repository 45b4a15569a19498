"""A stand-in for Ollama, stdlib only (shared/FIELD-NOTES.md: docs/api.md,
server/routes.go, server/sched.go).

- POST /api/generate {"model":"m","keep_alive":0} (no prompt) is an unload:
  it answers 200 at once with done_reason "unload", and the memory is freed
  500 ms later, as Ollama's runner exits after the answer;
- POST /api/generate {"model":"m"} with no prompt loads the model and
  answers once it is loaded (done_reason "load");
- any other request loads the model again by itself if it is unloaded;
- GET / answers 200 "Ollama is running"; GET /api/ps lists the loaded model
  ({"models":[{"name":"m",...}]}, {"models":[]} once it is gone), written as
  Go writes it (no spaces); the model leaves it when its memory is freed.
It writes its memory into the sim dir by PID, as vllm_fake.py does.

usage: ollama_fake.py PORT LOAD_SECONDS LOADED_BYTES UNLOADED_BYTES
"""
import http.server, json, os, signal, sys, threading, time

port, load = int(sys.argv[1]), float(sys.argv[2])
loaded_bytes, unloaded_bytes = int(sys.argv[3]), int(sys.argv[4])
sim = os.path.join(os.environ["GPUGUARD_SIM_DIR"], "0")
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
signal.signal(signal.SIGUSR1, lambda *a: None)
lock = threading.Lock()
loaded = True


def write_memory(n):
    os.makedirs(sim, exist_ok=True)
    tmp = os.path.join(sim, ".%d.tmp" % os.getpid())
    with open(tmp, "w") as f:
        f.write(str(n))
    os.rename(tmp, os.path.join(sim, str(os.getpid())))


def unload_later():
    global loaded
    time.sleep(0.5)
    with lock:
        write_memory(unloaded_bytes)
        loaded = False  # gone from /api/ps once its memory is free


time.sleep(load)
write_memory(loaded_bytes)


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, body, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/":
            return self.reply(200, b"Ollama is running", "text/plain; charset=utf-8")
        if self.path == "/api/ps":
            # Go's encoding/json: no spaces, and [] (not null) when none is loaded.
            models = [{"name": "m", "model": "m", "size": loaded_bytes, "digest": "0" * 64, "details": {"format": "gguf"},
                       "expires_at": "2026-01-01T00:05:00Z", "size_vram": loaded_bytes, "context_length": 4096}] if loaded else []
            return self.reply(200, json.dumps({"models": models}, separators=(",", ":")).encode())
        self.work()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            req = {}
        if self.path == "/api/generate" and req.get("keep_alive") == 0 and not req.get("prompt"):
            threading.Thread(target=unload_later, daemon=True).start()
            return self.reply(200, json.dumps({"model": req.get("model", ""), "created_at": "2026-01-01T00:00:00Z",
                                               "response": "", "done": True, "done_reason": "unload"}).encode())
        if self.path == "/api/generate" and not req.get("prompt"):  # an empty prompt loads the model
            self.ensure_loaded()
            return self.reply(200, json.dumps({"model": req.get("model", ""), "created_at": "2026-01-01T00:00:00Z",
                                               "response": "", "done": True, "done_reason": "load"}).encode())
        self.work()

    def ensure_loaded(self):
        global loaded
        with lock:
            if not loaded:  # the next request reloads the model by itself
                time.sleep(0.2)
                loaded = True
                write_memory(loaded_bytes)

    def work(self):
        self.ensure_loaded()
        time.sleep(0.03)
        self.reply(200, json.dumps({"text": "ok"}).encode())


srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
srv.daemon_threads = True
print("listening", flush=True)
srv.serve_forever()
