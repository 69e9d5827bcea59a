# An HTTP server that answers each GET after SECONDS of real work (a fixed
# amount of computing, not a wait on any clock), or never with --silent.
# Listens on 127.0.0.1, on a free port it prints first.
#   slow_server.py SECONDS | slow_server.py --silent
import http.server, socket, sys

silent = sys.argv[1] == "--silent"
work = 0 if silent else int(float(sys.argv[1]) * 10_000_000)

class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        total = 0
        for i in range(work):
            total += i
        body = b"answer\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

if silent:
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    held = []
    while True:
        connection, _ = listener.accept()
        held.append(connection)
server = http.server.HTTPServer(("127.0.0.1", 0), Slow)
print(server.server_address[1], flush=True)
server.serve_forever()
