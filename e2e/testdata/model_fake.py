"""A stand-in model server speaking both OpenAI's and Ollama's HTTP APIs,
stdlib only, for the tests of `gpuguard door` (shapes from the APIs'
references and shared/FIELD-NOTES.md).

Every answer says which server answered (its GPUGUARD_NAME) and which model
the request named, so a test can see where the door routed it and what an
alias was rewritten to:
- GET /health -> 200; GET / -> "Ollama is running";
- POST /v1/chat/completions, /v1/completions: OpenAI's completion objects,
  content "NAME:MODEL"; with "stream": true, server-sent events;
- POST /v1/embeddings: OpenAI's list, each embedding a list of floats, or
  base64 of little-endian float32s with "encoding_format": "base64" (the
  JavaScript SDK's default);
- POST /api/chat, /api/generate: Ollama's objects, streamed as NDJSON
  unless "stream": false (Ollama streams by default); POST /api/embed:
  {"embeddings": [...]}; POST /api/show: a little model info;
- any other request: {"name", "model", "path", "method"}.
A stream stops after its first chunk until the file $FAKE_GATE exists (when
FAKE_GATE is set): a test that reads the first chunk before creating it
shows that chunks arrive one by one.

usage: model_fake.py PORT
"""
import base64, http.server, json, os, signal, struct, sys, time

port = int(sys.argv[1])
name = os.environ.get("GPUGUARD_NAME", "fake")
gate = os.environ.get("FAKE_GATE", "")
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
signal.signal(signal.SIGUSR1, lambda *a: None)  # gpuguard's notify signal
VECTOR = [0.25, -0.5, 1.0]


def wait_gate():
    deadline = time.time() + 30
    while gate and not os.path.exists(gate) and time.time() < deadline:
        time.sleep(0.01)


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, obj, ctype="application/json"):
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Fake-Name", name)
        self.end_headers()
        self.wfile.write(body)

    def stream(self, ctype, chunks):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Fake-Name", name)
        self.end_headers()
        for i, c in enumerate(chunks):
            if i == 1:
                wait_gate()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, b"", "text/plain")
        if self.path == "/":
            return self.reply(200, b"Ollama is running", "text/plain; charset=utf-8")
        self.reply(200, {"name": name, "path": self.path, "method": "GET"})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            req = {}
        model = req.get("model", req.get("name", "")) if isinstance(req, dict) else ""
        text = "%s:%s" % (name, model)
        now = int(time.time())
        p = self.path
        if p == "/v1/chat/completions" or p == "/v1/completions":
            chat = p == "/v1/chat/completions"
            obj = "chat.completion" if chat else "text_completion"
            if req.get("stream"):
                chunks = []
                for part in (name + ":", model):
                    choice = {"index": 0, "delta": {"role": "assistant", "content": part}, "finish_reason": None} if chat \
                        else {"index": 0, "text": part, "finish_reason": None}
                    ev = {"id": "c1", "object": obj + ".chunk" if chat else obj, "created": now, "model": model, "choices": [choice]}
                    chunks.append(b"data: " + json.dumps(ev).encode() + b"\n\n")
                chunks.append(b"data: [DONE]\n\n")
                return self.stream("text/event-stream", chunks)
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"} if chat \
                else {"index": 0, "text": text, "finish_reason": "stop"}
            return self.reply(200, {"id": "c1", "object": obj, "created": now, "model": model, "choices": [choice],
                                    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}})
        if p == "/v1/embeddings":
            inputs = req.get("input", "")
            n = len(inputs) if isinstance(inputs, list) else 1
            if req.get("encoding_format") == "base64":
                emb = base64.b64encode(struct.pack("<%df" % len(VECTOR), *VECTOR)).decode()
            else:
                emb = VECTOR
            return self.reply(200, {"object": "list", "model": model,
                                    "data": [{"object": "embedding", "index": i, "embedding": emb} for i in range(n)],
                                    "usage": {"prompt_tokens": n, "total_tokens": n}})
        if p == "/api/chat" or p == "/api/generate":
            def obj(part, done):
                o = {"model": model, "created_at": "2026-01-01T00:00:00Z", "done": done}
                if p == "/api/chat":
                    o["message"] = {"role": "assistant", "content": part}
                else:
                    o["response"] = part
                if done:
                    o["done_reason"] = "stop"
                return o
            if req.get("stream", True):
                return self.stream("application/x-ndjson",
                                   [json.dumps(obj(name + ":", False)).encode() + b"\n",
                                    json.dumps(obj(model, False)).encode() + b"\n",
                                    json.dumps(obj("", True)).encode() + b"\n"])
            return self.reply(200, obj(text, True))
        if p == "/api/embed":
            inputs = req.get("input", "")
            n = len(inputs) if isinstance(inputs, list) else 1
            return self.reply(200, {"model": model, "embeddings": [VECTOR] * n})
        if p == "/api/show":
            return self.reply(200, {"model_info": {"general.name": text}, "details": {"family": "fake"}})
        self.reply(200, {"name": name, "model": model, "path": p, "method": "POST"})

    do_PUT = do_POST


srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
srv.daemon_threads = True
print("listening", flush=True)
srv.serve_forever()
