#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tests/vm/first_contact.py SRC DST — run under sdp_run inside the VM.
# Listens on DST (a thread accepts and checks the bytes) and connects to it
# from SRC over SDP (verbs, rxe-a -> rxe-b) right after the neighbour table was
# flushed: the first contact with a peer whose link-layer address is not
# cached.  rdma_cm used to wait its whole address-resolution timeout there
# (2 s; transport/verbs/verbs.h, VB_RESOLVE_FIRST_MS) where TCP takes
# milliseconds.  Fails if the connect takes 1 s or more, or did not go over
# SDP (a fallback to TCP would be fast too).
import socket
import subprocess
import sys
import threading
import time

SDP_CONN_TRANSPORT = 90  # getsockopt(IPPROTO_TCP, ...): SDP sockets only


def connect(src, dst, port):
    s = socket.socket()
    s.bind((src, 0))
    t0 = time.monotonic()
    s.connect((dst, port))
    return s, time.monotonic() - t0


def serve(lsn, got):
    while True:
        c, _ = lsn.accept()
        data = b""
        while True:
            b = c.recv(4096)
            if not b:
                break
            data += b
        c.close()
        got.append(data)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    lsn = socket.socket()
    lsn.bind((dst, 0))
    lsn.listen(8)
    port = lsn.getsockname()[1]
    got = []
    threading.Thread(target=serve, args=(lsn, got), daemon=True).start()
    worst = 0.0
    for i in range(3):
        subprocess.run(["ip", "neigh", "flush", "all"], check=True)
        s, took = connect(src, dst, port)
        try:
            s.getsockopt(socket.IPPROTO_TCP, SDP_CONN_TRANSPORT)
        except OSError as e:
            sys.exit(f"try {i}: connection is not over SDP ({e})")
        s.sendall(b"first contact %d\n" % i)
        s.close()
        print(f"try {i}: connect after a neighbour flush took {took * 1000:.0f} ms")
        worst = max(worst, took)
    for _ in range(100):
        if len(got) == 3:
            break
        time.sleep(0.1)
    if got != [b"first contact %d\n" % i for i in range(3)]:
        sys.exit(f"FAIL: the listener got {got!r}")
    if worst >= 1.0:
        sys.exit(f"FAIL: a first-contact connect took {worst * 1000:.0f} ms")
    print("PASS")


main()
