# SPDX-License-Identifier: MIT
"""hashclient.py PORT N: N connections to 127.0.0.1:PORT, one after the
other; each sends a random line and checks that the answer is its sha256.
Prints "ok N MS" (the milliseconds all took) or the first failure."""
import hashlib
import os
import socket
import sys
import time

port, n = int(sys.argv[1]), int(sys.argv[2])
t0 = time.monotonic()
for i in range(n):
    line = os.urandom(48).hex().encode() + b"\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(line)
        with s.makefile("rb") as f:
            got = f.readline()
    if got.strip() != hashlib.sha256(line).hexdigest().encode():
        print("bad answer on connection %d: %r" % (i, got), flush=True)
        sys.exit(1)
print("ok %d %d" % (n, (time.monotonic() - t0) * 1000), flush=True)
