"""Runs `kiln serve ... --port=0` for a lit test: waits for its listening line, makes the
requests the arguments list (with Python's standard library only), runs client commands
with {port} filled in, then sends SIGTERM and prints the server's output and exit code.

  serve_session.py 'kiln serve m.kiln --port=0' 'GET /v2/health/ready' \
      'POST /v2/models/m/infer {"inputs": ...}' 'RUN serve_client --port={port} --random'
"""
import http.client
import shlex
import signal
import subprocess
import sys

server = subprocess.Popen(shlex.split(sys.argv[1]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
port = None
lines = []
for line in server.stdout:
    lines.append(line)
    if "listening on http://" in line:
        port = int(line.rsplit(":", 1)[1])
        break
if port is None:
    print("".join(lines), end="")
    print("exit", server.wait())
    sys.exit(1)

connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for action in sys.argv[2:]:
    verb, _, rest = action.partition(" ")
    if verb == "RUN":
        result = subprocess.run(shlex.split(rest.replace("{port}", str(port))), capture_output=True, text=True)
        print(f"RUN exit {result.returncode}")
        print(result.stdout + result.stderr, end="")
        continue
    path, _, body = rest.partition(" ")
    connection.request(verb, path, body=body.encode() if verb == "POST" else None)
    response = connection.getresponse()
    print(f"{verb} {path} {response.status} {response.read().decode()}")

connection.close()
server.send_signal(signal.SIGTERM)
rest, _ = server.communicate(timeout=30)
print("".join(lines) + rest, end="")
print("exit", server.returncode)
