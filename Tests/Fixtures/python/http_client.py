# GETs http://127.0.0.1:PORT/ with a TIMEOUT in seconds (waiting first until
# something listens there), and prints what happened with the virtual time
# it took: "got answer after 0.000 s" or "failed: TimeoutError after 5.000 s".
#   http_client.py PORT TIMEOUT
import socket, sys, time, urllib.request

port, timeout = int(sys.argv[1]), float(sys.argv[2])
while True:
    try:
        socket.create_connection(("127.0.0.1", port)).close()
        break
    except ConnectionRefusedError:
        time.sleep(0.05)
start = time.monotonic()
try:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=timeout).read().decode().strip()
    print(f"got {body} after {time.monotonic() - start:.3f} s", flush=True)
except Exception as error:
    print(f"failed: {type(error).__name__} after {time.monotonic() - start:.3f} s", flush=True)
