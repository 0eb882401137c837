"""A slow server: a TCP proxy on 127.0.0.1 in front of the Subsonic test server that hands out each
`/rest/stream` answer below real time, in bursts: the first FREE bytes at once, then CHUNK bytes
every INTERVAL seconds. Every other request passes at full speed. Loopback only.

Usage: slow-proxy.py UPSTREAM_PORT CHUNK INTERVAL [FREE]
Prints "port N" (the port it listens on) on its first line, then serves until killed.
Used by the daemon tests (a stream that starves mid-track: `buffering`, then `audible` again).
"""
import socket
import sys
import threading
import time

upstream_port, chunk, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
free = int(sys.argv[4]) if len(sys.argv) > 4 else chunk


def pump(src, dst, slow):
    sent = 0
    next_at = None
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            view = memoryview(data)
            while view:
                if not slow() or sent < free:
                    n = len(view) if not slow() else min(len(view), free - sent)
                else:
                    now = time.monotonic()
                    if next_at is None:
                        next_at = now + interval
                        budget = 0
                    if now >= next_at:
                        next_at += interval
                        budget = chunk
                    if budget == 0:
                        time.sleep(max(0.0, next_at - now))
                        continue
                    n = min(len(view), budget)
                    budget -= n
                dst.sendall(view[:n])
                sent += n
                view = view[n:]
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(client):
    upstream = socket.create_connection(("127.0.0.1", upstream_port))
    request = {"stream": None}

    def forward_requests():
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                if request["stream"] is None:
                    request["stream"] = b"/rest/stream" in data.split(b"\r\n", 1)[0]
                upstream.sendall(data)
        except OSError:
            pass
        try:
            upstream.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    threading.Thread(target=forward_requests, daemon=True).start()
    pump(upstream, client, lambda: bool(request["stream"]))
    client.close()
    upstream.close()


listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(f"port {listener.getsockname()[1]}", flush=True)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
