# SPDX-License-Identifier: MIT
"""flood.py PID SECONDS: send datagrams to PID's libsdp-stat wake socket
(an abstract AF_UNIX name anyone can address) as fast as it takes them, for
SECONDS; print how many went."""
import socket
import sys
import time

pid, secs = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setblocking(False)
name = b"\0libsdp-stat." + str(pid).encode()
sent = 0
end = time.monotonic() + secs
while time.monotonic() < end:
    for _ in range(100):
        try:
            s.sendto(b"x", name)
            sent += 1
        except BlockingIOError:
            pass
        except OSError as e:
            print("flood: %s" % e, flush=True)
            sys.exit(1)
print("sent %d" % sent, flush=True)
