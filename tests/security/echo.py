# SPDX-License-Identifier: MIT
"""Checksummed byte streams for the security tests.

  echo.py server PORTFILE       listen on 127.0.0.1 (port written to
                                PORTFILE, "PORT PID"); for each connection,
                                read to EOF
                                and answer the SHA-256 of what came
  echo.py client PORT BYTES [hold]
                                send BYTES random bytes (with "hold": half,
                                then "holding" on stdout, then wait for a
                                line on stdin before the rest), half-close,
                                compare the answer; print "ok transport=T"
                                (T: SDP_CONN_TRANSPORT, 0 kernel TCP, 1 shm)
"""
import hashlib
import os
import socket
import sys
import threading

SDP_CONN_TRANSPORT = 90


def transport(s):
    try:
        return s.getsockopt(socket.IPPROTO_TCP, SDP_CONN_TRANSPORT)
    except OSError:
        return 0


def serve_one(c):
    h = hashlib.sha256()
    with c:
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            h.update(b)
        c.sendall(h.hexdigest().encode())


def server(portfile):
    lsn = socket.socket()
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(16)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d %d" % (lsn.getsockname()[1], os.getpid()))
    os.rename(tmp, portfile)
    while True:
        c, _ = lsn.accept()
        threading.Thread(target=serve_one, args=(c,), daemon=True).start()


def client(port, nbytes, hold):
    data = os.urandom(nbytes)
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    half = nbytes // 2 if hold else nbytes
    s.sendall(data[:half])
    if hold:
        print("holding", flush=True)
        sys.stdin.readline()
        s.sendall(data[half:])
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = s.recv(256)
        if not b:
            break
        got += b
    if got.decode() != hashlib.sha256(data).hexdigest():
        print("DIGEST MISMATCH", flush=True)
        sys.exit(1)
    print("ok transport=%d" % transport(s), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2])
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), len(sys.argv) > 4)
