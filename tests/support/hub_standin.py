"""A stand-in for the Hub's HTTP API (no Hub is reachable here): every request
answers 404 RevisionNotFound, as huggingface.co does for a revision that does
not exist. Run as its own process (``python hub_standin.py``; it prints its
port), so that a busy test process cannot keep it from answering."""

import http.server


class Handler(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.send_response(404)
        self.send_header("X-Error-Code", "RevisionNotFound")
        self.send_header("X-Error-Message", "Invalid rev id")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(srv.server_port, flush=True)
    srv.serve_forever()
