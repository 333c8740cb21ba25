#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The parties of tests/security/portspace.sh, each a small socket program.

  server PORT LOG [--sdp] [--any]
                           answer "reply:<line>" to each connection on
                           127.0.0.1:PORT (0.0.0.0 with --any) and append
                           "<line> transport=T" to LOG (T: 0 kernel TCP,
                           1 shm); with --sdp an explicit AF_INET_SDP
                           socket (run it with libsdp preloaded).  Prints
                           "listening" or "listen failed: <errno name>" and
                           exits 3.
  squat PORT [full]        bind shm's rendezvous name for 127.0.0.1:PORT
                           with a raw AF_UNIX socket and never answer; with
                           "full", its backlog full too (a connect to it
                           would wait).
  relay PORT QPORT         bind the name for PORT and relay every message,
                           descriptors included, to the SDP listener on
                           QPORT: a man in the middle that speaks the
                           protocol perfectly.
  client PORT SECRET       connect to 127.0.0.1:PORT, send SECRET, print
                           the reply line.
  probe PORT               a plain TCP client: print how 127.0.0.1:PORT
                           answers ("refused", "reset", "eof" or "data").
  nslisten PORT            (inside `unshare -Urn`: a network namespace of
                           one's own, where every port is free) listen on
                           TCP 0.0.0.0:PORT; print "listening".
  sdpconnect PORT          an explicit SDP socket's non-blocking connect to
                           127.0.0.1:PORT: print its outcome (an errno name,
                           or "connected") once poll() says it is done.
"""
import ctypes
import errno
import os
import select
import socket
import sys
import threading

AF_INET_SDP = 27


def name(port):
    return b"\0libsdp/v1/4/127.0.0.1/" + str(port).encode()


def sdp_socket():
    """An explicit AF_INET_SDP socket, made through libc (so through the
    preloaded libsdp): Python's own constructor cannot parse addresses of
    a family it does not know, so it is told AF_INET."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(AF_INET_SDP, socket.SOCK_STREAM, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0, fileno=fd)


def transport(s):
    try:
        return s.getsockopt(socket.IPPROTO_TCP, 90)  # SDP_CONN_TRANSPORT
    except OSError:
        return 0


def server(port, log, sdp, any_addr):
    s = sdp_socket() if sdp else socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0" if any_addr else "127.0.0.1", port))
        s.listen(16)
    except OSError as e:
        print("listen failed:", errno.errorcode.get(e.errno, e.errno), flush=True)
        sys.exit(3)
    print("listening", flush=True)
    while True:
        c, _ = s.accept()
        f = c.makefile("rwb")
        line = f.readline()
        with open(log, "ab") as out:
            out.write(line.rstrip(b"\n") + b" transport=%d\n" % transport(c))
        f.write(b"reply:" + line)
        f.flush()
        f.close()
        c.close()


def squat(port, full):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(name(port))
    s.listen(0 if full else 64)
    keep = []
    if full:
        # listen(0) queues one connection; a second would have to wait.
        c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c.setblocking(False)
        c.connect(name(port))
        keep.append(c)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        probe.setblocking(False)
        try:
            probe.connect(name(port))
            keep.append(probe)
        except BlockingIOError:
            pass
    print("squatting", flush=True)
    threading.Event().wait()


def pump(src, dst):
    """Relay seqpacket messages with their descriptors until either side ends."""
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(src, 65536, 16)
        except OSError:
            return
        if not msg:
            return
        try:
            socket.send_fds(dst, [msg], fds) if fds else dst.send(msg)
        except OSError:
            return
        for fd in fds:
            os.close(fd)


def relay(port, qport):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(name(port))
    s.listen(64)
    print("relaying", flush=True)
    while True:
        c, _ = s.accept()
        u = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The listener wants its clients' sockets bound to an SDP name
        # (their address): any free one does.
        for p in range(qport + 1, qport + 200):
            try:
                u.bind(name(p))
                break
            except OSError:
                continue
        u.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        u.connect(name(qport))
        threading.Thread(target=pump, args=(c, u), daemon=True).start()
        threading.Thread(target=pump, args=(u, c), daemon=True).start()


def client(port, secret):
    c = socket.create_connection(("127.0.0.1", port), timeout=20)
    c.sendall(secret.encode() + b"\n")
    f = c.makefile("rb")
    print(f.readline().decode().strip(), flush=True)


def probe(port):
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        data = c.recv(1)
        print("data" if data else "eof", flush=True)
    except ConnectionRefusedError:
        print("refused", flush=True)
    except ConnectionResetError:
        print("reset", flush=True)


def sdpconnect(port):
    s = sdp_socket()
    s.setblocking(False)
    rc = s.connect_ex(("127.0.0.1", port))
    if rc == errno.EINPROGRESS:
        select.select([], [s], [], 20)
        rc = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    print(errno.errorcode.get(rc, "connected") if rc else "connected", flush=True)


def nslisten(port):
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.bind(("0.0.0.0", port))
    t.listen(8)
    print("listening", flush=True)
    threading.Event().wait()


def main():
    mode = sys.argv[1]
    if mode == "server":
        server(int(sys.argv[2]), sys.argv[3], "--sdp" in sys.argv[4:],
               "--any" in sys.argv[4:])
    elif mode == "squat":
        squat(int(sys.argv[2]), "full" in sys.argv[3:])
    elif mode == "relay":
        relay(int(sys.argv[2]), int(sys.argv[3]))
    elif mode == "client":
        client(int(sys.argv[2]), sys.argv[3])
    elif mode == "probe":
        probe(int(sys.argv[2]))
    elif mode == "nslisten":
        nslisten(int(sys.argv[2]))
    elif mode == "sdpconnect":
        sdpconnect(int(sys.argv[2]))
    else:
        sys.exit("bad mode " + mode)


if __name__ == "__main__":
    main()
