#!/usr/bin/env python3
"""How long a new request waits while other clients hold connections to a tiletune daemon.

Opens COUNT connections that each got one keep-alive answer and stay idle, times a new
GET /healthz, closes them; then COUNT half-open connections (half a request line), times a new
request again. Start a daemon first:
    build/tiletune serve --db /tmp/c.db --listen 127.0.0.1:18777 --token-file token.txt &
    python3 bench/idle_connections.py --port 18777 --count 16 100 200
Only talks to 127.0.0.1.
"""
import argparse
import socket
import time


def healthz_ms(port):
    start = time.time()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.recv(4096)
    return (time.time() - start) * 1000


def hold(port, count, half_open):
    held = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        if half_open:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHo")
        else:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(4096)
        held.append(s)
    return held


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, nargs="+", default=[16])
    p.add_argument("--settle", type=float, default=6.0, help="seconds between rounds, for the daemon to drop them")
    a = p.parse_args()
    print(f"no other connection: {healthz_ms(a.port):.1f} ms")
    for n in a.count:
        for half_open in (False, True):
            held = hold(a.port, n, half_open)
            time.sleep(0.2)
            kind = "half-open" if half_open else "idle keep-alive"
            print(f"{n} {kind} connections: a new /healthz took {healthz_ms(a.port):.1f} ms")
            for s in held:
                s.close()
            time.sleep(a.settle)


if __name__ == "__main__":
    main()
