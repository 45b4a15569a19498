"""A stand-in for SGLang's HTTP server with the memory saver, stdlib only.

It follows shared/FIELD-NOTES.md (python/sglang/srt/entrypoints/http_server.py)
and fails the way SGLang does:
- POST /release_memory_occupation {"tags":[...]} or {} and
  /resume_memory_occupation answer 200 with the body null;
- a release while a request runs kills the scheduler (the process exits 1),
  and so does resuming a tag that was never released;
- POST /pause_generation {"mode":"retract"} holds new work,
  POST /continue_generation {} lets it go on;
- GET /health runs a one-token generation: while released it kills the
  server too (probe /ping instead, or not at all while released);
  GET /ping always answers 200.
It writes its memory into the sim dir by PID, as vllm_fake.py does.
FAKE_NO_MEMORY_SAVER=1 is SGLang started without --enable-memory-saver: the
release still answers 200, and frees nothing (RELEASED_BYTES is ignored).

usage: sglang_fake.py PORT LOAD_SECONDS AWAKE_BYTES RELEASED_BYTES
"""
import http.server, json, os, signal, sys, threading, time, urllib.parse

port, load = int(sys.argv[1]), float(sys.argv[2])
awake_bytes, released_bytes = int(sys.argv[3]), int(sys.argv[4])
if os.environ.get("FAKE_NO_MEMORY_SAVER") == "1":
    released_bytes = awake_bytes
sim = os.path.join(os.environ["GPUGUARD_SIM_DIR"], "0")
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
signal.signal(signal.SIGUSR1, lambda *a: None)
ALL = {"weights", "kv_cache", "cuda_graph"}

state = threading.Condition()
released = set()
paused = False
inflight = 0


def write_memory(n):
    os.makedirs(sim, exist_ok=True)
    tmp = os.path.join(sim, ".%d.tmp" % os.getpid())
    with open(tmp, "w") as f:
        f.write(str(n))
    os.rename(tmp, os.path.join(sim, str(os.getpid())))


def die(why):
    sys.stderr.write("scheduler died: %s\n" % why)
    sys.stderr.flush()
    os._exit(1)


time.sleep(load)
write_memory(awake_bytes)


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def tags(self, body):
        try:
            t = json.loads(body or b"{}").get("tags")
        except ValueError:
            return None
        return set(t) if t else set(ALL)

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/ping":
            return self.reply(200, b"")
        if path == "/health":
            if released:
                die("health generation on released memory")
            return self.reply(200, b"")
        self.work()

    def do_POST(self):
        global paused
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        path = urllib.parse.urlsplit(self.path).path
        if path == "/pause_generation":
            with state:
                paused = True
            return self.reply(200, b"null")
        if path == "/continue_generation":
            with state:
                paused = False
                state.notify_all()
            return self.reply(200, b"null")
        if path in ("/release_memory_occupation", "/resume_memory_occupation"):
            tags = self.tags(body)
            if tags is None:
                return self.reply(400, b'{"error":{"message":"bad tags"}}')
            with state:
                if path.startswith("/release"):
                    if inflight > 0:
                        die("release with %d requests running" % inflight)
                    released.update(tags)
                else:
                    if not tags <= released:
                        die("resume of tags never released: %s" % sorted(tags - released))
                    released.difference_update(tags)
            write_memory(released_bytes if released else awake_bytes)
            return self.reply(200, b"null")
        self.work()

    def work(self):
        global inflight
        with state:
            while paused or released:
                state.wait()
            inflight += 1
        try:
            time.sleep(0.03)
            self.reply(200, json.dumps({"text": "ok"}).encode())
        finally:
            with state:
                inflight -= 1


srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
srv.daemon_threads = True
print("listening", flush=True)
srv.serve_forever()
