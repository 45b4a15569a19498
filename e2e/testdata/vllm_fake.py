"""A stand-in for vLLM's OpenAI server with sleep mode, stdlib only.

It follows the shapes in shared/FIELD-NOTES.md (vllm/entrypoints/serve,
docs/features/sleep_mode.md):
- nothing listens while it "loads" (argv[2] seconds);
- POST /sleep?level=1|2&mode=abort|wait|keep reads the query only (a body is
  ignored); POST /wake_up; GET /is_sleeping -> {"is_sleeping":bool}, written
  as FastAPI writes it (no spaces);
- the sleep routes exist only with VLLM_SERVER_DEV_MODE=1, else they answer
  404 {"detail":"Not Found"};
- GET /health answers 200 with an empty body, asleep or not;
- any other request that arrives while asleep is queued until the wake, so
  its client hangs (as since vLLM PR #34528);
- any other request with ?seconds=N is answered as a token stream (SSE) that
  lasts N seconds, a chunk every 0.25 s.
It writes its own GPU memory into the sim dir by PID ($GPUGUARD_SIM_DIR/0/<pid>,
through a temp name starting with "." then a rename): argv[3] bytes awake,
argv[4] bytes asleep (level 1 keeps the CUDA graphs and the context).
FAKE_SLEEP_DELAY (seconds) delays the answer to /sleep, to test timeouts.

usage: vllm_fake.py PORT LOAD_SECONDS AWAKE_BYTES ASLEEP_BYTES
"""
import http.server, json, os, signal, sys, threading, time, urllib.parse

port, load = int(sys.argv[1]), float(sys.argv[2])
awake_bytes, asleep_bytes = int(sys.argv[3]), int(sys.argv[4])
dev_mode = os.environ.get("VLLM_SERVER_DEV_MODE") == "1"
sleep_delay = float(os.environ.get("FAKE_SLEEP_DELAY", "0"))
sim = os.path.join(os.environ["GPUGUARD_SIM_DIR"], "0")
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
signal.signal(signal.SIGUSR1, lambda *a: None)  # gpuguard's notify signal

state = threading.Condition()
sleeping = False
inflight = 0


def write_memory(n):
    os.makedirs(sim, exist_ok=True)
    tmp = os.path.join(sim, ".%d.tmp" % os.getpid())
    with open(tmp, "w") as f:
        f.write(str(n))
    os.rename(tmp, os.path.join(sim, str(os.getpid())))


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

    def admin(self, route):
        global sleeping
        if not dev_mode:
            return self.reply(404, b'{"detail":"Not Found"}')
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if route == "/sleep":
            level = int(q.get("level", ["1"])[0])
            time.sleep(sleep_delay)
            with state:
                # mode=wait: finish what runs first (abort would cut it).
                while inflight > 0:
                    state.wait()
                sleeping = True
            write_memory(asleep_bytes if level == 1 else asleep_bytes // 2)
            return self.reply(200, json.dumps({"status": "sleeping", "level": level}).encode())
        write_memory(awake_bytes)
        with state:
            sleeping = False
            state.notify_all()
        return self.reply(200, b'{"status":"awake"}')

    def work(self):
        global inflight
        with state:
            while sleeping:  # queued until the wake: the client hangs
                state.wait()
            inflight += 1
        try:
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            if "seconds" in q:
                self.stream(float(q["seconds"][0]))
            else:
                time.sleep(0.03)
                self.reply(200, json.dumps({"text": "ok", "pid": os.getpid()}).encode())
        finally:
            with state:
                inflight -= 1
                state.notify_all()

    def stream(self, seconds):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        end = time.monotonic() + seconds
        while True:
            chunk = b"data: token\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
            if time.monotonic() >= end:
                break
            time.sleep(min(0.25, max(0, end - time.monotonic())))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/health":
            return self.reply(200, b"")
        if path == "/is_sleeping":
            if not dev_mode:
                return self.reply(404, b'{"detail":"Not Found"}')
            # FastAPI's JSONResponse: no spaces, {"is_sleeping":true}
            return self.reply(200, json.dumps({"is_sleeping": sleeping}, separators=(",", ":")).encode())
        self.work()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)  # a body on /sleep is ignored, as by vLLM
        path = urllib.parse.urlsplit(self.path).path
        if path in ("/sleep", "/wake_up"):
            return self.admin(path)
        self.work()


srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
srv.daemon_threads = True
print("listening", flush=True)
srv.serve_forever()
