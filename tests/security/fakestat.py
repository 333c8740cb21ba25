# SPDX-License-Identifier: MIT
"""fakestat.py: publish a hostile sdpstat file for this process, whose
header claims every record in use while the pages of the records are holes
(only the header page and the last page exist), then print "ready" and
stay alive (sdpstat ignores the files of dead processes)."""
import mmap
import os
import struct
import threading

MAGIC, VERSION, NSLOTS, REC = 0x54534453, 3, 16384, 512
path = "/dev/shm/libsdp-stat.%d" % os.getpid()
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
hdr = struct.pack("=IIIIIIiI64s", MAGIC, VERSION, 4096, REC, NSLOTS, NSLOTS,
                  os.getpid(), os.getuid(), b"hostile")
os.pwrite(fd, hdr + bytes(4096 - len(hdr)), 0)
os.pwrite(fd, b"\0" * REC, 4096 + (NSLOTS - 1) * REC)
# Mapped, as a live publisher's file is (sdpstat removes the others).
m = mmap.mmap(fd, 4096 + NSLOTS * REC)
print("ready", flush=True)
threading.Event().wait()
