"""A stand-in for llama.cpp's llama-server in router mode, stdlib only.

It follows shared/FIELD-NOTES.md and tools/server/server-models.cpp, and
was checked against a real router (docs/serving.md names the commit):
- models are the *.gguf files of --models-dir, named by file stem
  (tiny.gguf -> tiny); --models-preset INI sections may set
  load-on-startup = true for a model;
- GET /health answers 200 {"status":"ok"} at once and always, whatever
  the models do: no readiness signal for a model;
- GET /props?model=NAME&autoload=false: 400 "model is not loaded" while
  not loaded, a plain-text 500 "proxy error" for the first moment of a
  load (the model's process is not listening yet), 503 "Loading model"
  while loading, 200 once loaded; autoload=true (the default unless
  --no-models-autoload) loads the model inside the request;
- GET /models lists {"id","status":{"value":"loaded"|"loading"|"unloaded"}};
- POST /models/load {"model":NAME}: 400 "model is already running" while
  its process runs (loading, loaded, or unloading and not yet exited),
  else 200 {"success":true} and the load begins;
- POST /models/unload: 400 "model is not running" when not loaded, else
  200 {"success":true} while the model's process still runs: it exits
  FAKE_UNLOAD_LAG seconds later (default 0.05);
- completions (/v1/completions, /v1/chat/completions, /completion) go to
  the body's model: loaded, answered (an SSE token stream with "stream":
  true); loading, the same 500 or 503 as /props; not loaded, 400 with
  autoload off, else loaded inside the request.
Its memory goes into the sim dir by PID, as vllm_fake.py's does: 64 MiB
for the router, FAKE_MODEL_BYTES (default 4 GiB) more for each model whose
process runs. FAKE_LOAD_SECONDS (default 0.5) is how long a load takes.

usage: llama_router_fake.py --port PORT --models-dir DIR [--models-preset INI] [--no-models-autoload]
"""
import argparse, configparser, http.server, json, os, signal, sys, threading, time, urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--models-dir", required=True)
ap.add_argument("--models-preset")
ap.add_argument("--no-models-autoload", action="store_true")
args, _ = ap.parse_known_args()

load_seconds = float(os.environ.get("FAKE_LOAD_SECONDS", "0.5"))
unload_lag = float(os.environ.get("FAKE_UNLOAD_LAG", "0.05"))
model_bytes = int(os.environ.get("FAKE_MODEL_BYTES", str(4 << 30)))
router_bytes = 64 << 20
connect_gap = 0.015  # after a load begins, the model's process is not listening yet
sim = os.path.join(os.environ["GPUGUARD_SIM_DIR"], "0")
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))

state = threading.Condition()


class Model:
    def __init__(self):
        self.running = False  # its process runs
        self.started = 0.0    # when the load began
        self.exit_at = None   # when an unloaded process exits

    def status(self, now):
        if self.exit_at is not None and now >= self.exit_at:
            self.running, self.exit_at = False, None
        if not self.running:
            return "unloaded"
        return "loaded" if now >= self.started + load_seconds else "loading"


models = {f[:-len(".gguf")]: Model() for f in sorted(os.listdir(args.models_dir)) if f.endswith(".gguf")}


def write_memory():
    now = time.monotonic()
    n = router_bytes + model_bytes * sum(1 for m in models.values() if m.status(now) != "unloaded")
    os.makedirs(sim, exist_ok=True)
    tmp = os.path.join(sim, ".%d.tmp" % os.getpid())
    with open(tmp, "w") as f:
        f.write(str(n))
    os.rename(tmp, os.path.join(sim, str(os.getpid())))


def load(name):  # with state held
    m = models[name]
    m.running, m.started, m.exit_at = True, time.monotonic(), None
    write_memory()


def exit_later(m):
    time.sleep(unload_lag)
    with state:
        m.status(time.monotonic())
        write_memory()
        state.notify_all()


def error(code, msg, typ):
    return code, json.dumps({"error": {"code": code, "message": msg, "type": typ}}, separators=(",", ":")).encode(), "application/json"


PROXY_ERROR = (500, b"proxy error: Could not establish connection", "text/plain")
LOADING = error(503, "Loading model", "unavailable_error")


def model_state(name, autoload):
    """What a request for name meets: None when the model serves, else the answer."""
    with state:
        if name not in models:
            return error(400, "model '%s' not found" % name, "invalid_request_error")
        m = models[name]
        st = m.status(time.monotonic())
        if st == "unloaded":
            if not autoload:
                return error(400, "model is not loaded", "invalid_request_error")
            load(name)
            st = "loading"
        if st == "loading" and autoload:
            while m.status(time.monotonic()) == "loading":
                state.wait(0.01)
            return None
        if st == "loading":
            return PROXY_ERROR if time.monotonic() < m.started + connect_gap else LOADING
        return None


def load_startup():
    if not args.models_preset:
        return
    ini = configparser.ConfigParser()
    with open(args.models_preset) as f:  # keys before the first section (version = 1) are the file's own
        ini.read_string("[__file__]\n" + f.read())
    with state:
        for name in ini.sections():
            if name in models and ini[name].get("load-on-startup", "").lower() in ("true", "1", "on"):
                load(name)


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, answer):
        code, body, ctype = answer
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def ok(self, obj):
        self.reply((200, json.dumps(obj, separators=(",", ":")).encode(), "application/json"))

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        autoload = q.get("autoload", [None])[0]
        autoload = not args.no_models_autoload if autoload is None else autoload in ("true", "1")
        if u.path == "/health":
            return self.ok({"status": "ok"})
        if u.path in ("/models", "/v1/models"):
            now = time.monotonic()
            with state:
                data = [{"id": n, "object": "model", "owned_by": "llamacpp", "status": {"value": m.status(now), "args": []}}
                        for n, m in models.items()]
            return self.ok({"data": data, "object": "list"})
        if u.path == "/props":
            name = q.get("model", [""])[0]
            if not name:
                return self.ok({"role": "router", "models_autoload": not args.no_models_autoload})
            answer = model_state(name, autoload)
            if answer:
                return self.reply(answer)
            return self.ok({"model_alias": name, "model_path": os.path.join(args.models_dir, name + ".gguf"), "is_sleeping": False})
        self.reply(error(404, "File Not Found", "not_found_error"))

    def do_POST(self):
        u = urllib.parse.urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self.reply(error(400, "invalid JSON", "invalid_request_error"))
        name = body.get("model", "")
        if u.path == "/models/load":
            with state:
                if name not in models:
                    return self.reply(error(404, "model is not found", "not_found_error"))
                if models[name].status(time.monotonic()) != "unloaded":
                    return self.reply(error(400, "model is already running", "invalid_request_error"))
                load(name)
            return self.ok({"success": True})
        if u.path == "/models/unload":
            with state:
                if name not in models:
                    return self.reply(error(400, "model is not found", "invalid_request_error"))
                m = models[name]
                if m.status(time.monotonic()) == "unloaded":
                    return self.reply(error(400, "model is not running", "invalid_request_error"))
                if m.exit_at is None:
                    m.exit_at = time.monotonic() + unload_lag
                    threading.Thread(target=exit_later, args=(m,), daemon=True).start()
            return self.ok({"success": True})
        if u.path in ("/v1/completions", "/v1/chat/completions", "/completion"):
            answer = model_state(name, not args.no_models_autoload)
            if answer:
                return self.reply(answer)
            return self.complete(name, body)
        self.reply(error(404, "File Not Found", "not_found_error"))

    def complete(self, name, body):
        n = int(body.get("max_tokens", body.get("n_predict", 8)))
        if not body.get("stream"):
            time.sleep(0.02)
            return self.ok({"object": "text_completion", "model": name, "choices": [{"text": " tok" * n, "index": 0}]})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(n + 1):
            data = "[DONE]" if i == n else json.dumps({"model": name, "choices": [{"text": " tok", "index": 0}]}, separators=(",", ":"))
            chunk = ("data: %s\n\n" % data).encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
            time.sleep(0.01)
        self.wfile.write(b"0\r\n\r\n")


with state:
    write_memory()
srv = http.server.ThreadingHTTPServer((args.host, args.port), H)
srv.daemon_threads = True
load_startup()
print("listening", flush=True)
srv.serve_forever()
