# SPDX-License-Identifier: MIT
"""prefork.py PORT: a server written the way the PostgreSQL postmaster is.

It forks a child right after listen() (which shares the listener, as a
pre-forking server does), then loops: select() on the listening socket with
SIGTERM unblocked, and, with it blocked again, a blocking accept().  Each
client sends one line; the server answers with the line's sha256 in hex.
An accept() error is printed ("accept: ERRNO") and the loop goes on.
SIGTERM ends it ("bye").  With TCP, accept() after a readiness never blocks
for long; if it did, SIGTERM would wait for the next client."""
import hashlib
import os
import select
import signal
import socket
import sys

port = int(sys.argv[1])
stop = False


class Stop(Exception):
    pass


def on_term(signum, frame):
    # Raised, so that select() is not resumed (PEP 475).
    global stop
    stop = True
    raise Stop()


signal.signal(signal.SIGTERM, on_term)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(64)
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    signal.pause()
    os._exit(0)
print("listening %d" % os.getpid(), flush=True)
while not stop:
    try:
        # A SIGTERM that came meanwhile is taken here.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        r, _, _ = select.select([ls], [], [], 60)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    except Stop:
        break
    if stop or not r:
        continue
    try:
        c, _ = ls.accept()
    except OSError as e:
        print("accept: %s" % e.errno, flush=True)
        continue
    with c:
        c.settimeout(10)
        with c.makefile("rb") as f:
            line = f.readline()
        c.sendall(hashlib.sha256(line).hexdigest().encode() + b"\n")
os.kill(child, signal.SIGTERM)
os.waitpid(child, 0)
print("bye", flush=True)
