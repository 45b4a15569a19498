"""A model server stand-in that writes down what reached it, stdlib only.

For the front door's attack tests (e2e/serve_attack_test.go): each request
appends lines to the log file argv[3], one write each:
    start METHOD PATH       its head arrived
    whole METHOD PATH N     its body arrived whole (N bytes; 0 without one)
    cut METHOD PATH N       its body ended early: N bytes, then the
                            connection closed or reset
The body is read by its framing (Content-Length or chunked), byte by byte
as it comes, so a body the door cut off is seen as cut, not as whole.

Nothing listens while it "loads" (argv[2] seconds). GET /health answers
200. Every other request is answered 200 with {"path": ..., "len": N} once
its body is in, except:
    /reset/ID   the first request for ID is read whole and then the
                connection is reset (no answer byte); later ones are
                answered as usual
    /slow       the answer comes after 100 ms
    /answer/cl-te  the answer has both Content-Length and Transfer-Encoding
                   (its body "hello", chunked), and the connection closes

usage: recorder.py PORT LOAD_SECONDS LOG
"""
import http.server, json, os, signal, socket, struct, sys, threading, time

port, load, log_path = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))

log_lock = threading.Lock()
reset_seen = set()


def log(line):
    with log_lock:
        with open(log_path, "a") as f:
            f.write(line + "\n")


time.sleep(load)


class Cut(Exception):
    pass


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def read_exact(self, n, got):
        data = b""
        while len(data) < n:
            b = self.rfile.read1(n - len(data))
            if not b:
                raise Cut(got + len(data))
            data += b
        return data

    def read_line(self, got):
        line = self.rfile.readline(65537)
        if not line.endswith(b"\n"):
            raise Cut(got)
        return line

    def body(self):
        """The body's length, read by its framing; Cut when it ends early."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            got = 0
            while True:
                size = int(self.read_line(got).split(b";")[0].strip(), 16)
                if size == 0:
                    while self.read_line(got).strip():
                        pass
                    return got
                self.read_exact(size, got)
                got += size
                self.read_exact(2, got)
        n = int(self.headers.get("Content-Length", "0"))
        return len(self.read_exact(n, 0))

    def handle_one(self):
        if self.path == "/health":
            return self.reply(200, b"")
        what = "%s %s" % (self.command, self.path)
        log("start " + what)
        try:
            n = self.body()
        except (Cut, ConnectionError, OSError) as e:
            got = e.args[0] if isinstance(e, Cut) else 0
            log("cut %s %d" % (what, got))
            self.close_connection = True
            return
        log("whole %s %d" % (what, n))
        if self.path.startswith("/reset/"):
            with log_lock:
                first = self.path not in reset_seen
                reset_seen.add(self.path)
            if first:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True
                return
        if self.path == "/slow":
            time.sleep(0.1)
        if self.path == "/answer/cl-te":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
                             b"Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            self.close_connection = True
            return
        self.reply(200, json.dumps({"path": self.path, "len": n}).encode())

    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = handle_one


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 2048


srv = Server(("127.0.0.1", port), H)
print("listening", flush=True)
srv.serve_forever()
