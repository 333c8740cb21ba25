# SPDX-License-Identifier: MIT
"""silent.py PORT SECONDS INTERVAL: connect to the SDP rendezvous name of
127.0.0.1:PORT and say nothing, a new connection every INTERVAL seconds
(0: once) for SECONDS, holding them all open; print how many were made."""
import socket
import sys
import time

port, secs, every = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
name = b"\0libsdp/v1/4/127.0.0.1/%d" % port
held = []
end = time.monotonic() + secs
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.setblocking(False)
    try:
        s.connect(name)
        held.append(s)
    except OSError:
        s.close()
    if not every or time.monotonic() >= end:
        break
    time.sleep(every)
print("silent %d" % len(held), flush=True)
time.sleep(max(0.0, end - time.monotonic()))
