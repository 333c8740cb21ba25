#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/vm/wire_check.py — the checks of tests/vm/wire_check.sh.

Reads a RoCE v2 capture with tshark twice over: the SEND payloads through
Wireshark's own SDP dissector (the profile named by --profile decodes every
InfiniBand payload as "Infiniband SDP", with the IB heuristics tried after
Decode As), and the CM REQ / REP private data as bytes.  Checks:

  1. every SDP message (the payload of a SEND First or SEND Only; a SEND
     Middle/Last packet carries the rest of its message, which the dissector
     cannot know and decodes as if it were a header) is decoded by the SDP
     dissector with a MID it names;
  2. its BSDH Length equals the bytes the capture shows for the message:
     the payloads of its SEND First .. Middle .. Last packets, reassembled
     per direction and QP by PSN (retransmitted copies counted once);
  3. the MIDs seen include Data, SrcAvail, RdmaRdCompl, SinkAvail,
     RdmaWrCompl and DisConn;
  4. nothing is marked malformed but the credit-only Data messages (Data
     with Length 16: the dissector adds its Data item with length -1 at
     offset 16 and throws when no byte follows; the annex allows a Data
     without payload, a pure credit update);
  5. per direction MSeq runs 1, 2, 3, ... with no gap and no repeat;
  6. the Hello (first 32 bytes in the REQ after the RDMA CM's 36-byte IP
     header) and the HelloAck (all 196 bytes of the REP private data) carry
     what the engine sends (src/engine/conn.c, src/wire/wire_hello.c; the
     constants read from the sources).
Prints counts per MID.  Exit 0 when all hold.
"""
import argparse
import collections
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile

SRC = os.environ.get("WIRE_CHECK_SRC") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")

MIDS = {0x00: "Hello", 0x01: "HelloAck", 0x02: "DisConn", 0x03: "AbortConn",
        0x04: "SendSm", 0x05: "RdmaWrCompl", 0x06: "RdmaRdCompl",
        0x07: "ModeChange", 0x08: "SrcAvailCancel", 0x09: "SinkAvailCancel",
        0x0A: "SinkCancelAck", 0x0B: "ChRcvBuf", 0x0C: "ChRcvBufAck",
        0x0D: "SuspComm", 0x0E: "SuspCommAck", 0xFD: "SinkAvail",
        0xFE: "SrcAvail", 0xFF: "Data"}
REQUIRED = ["Data", "SrcAvail", "RdmaRdCompl", "SinkAvail", "RdmaWrCompl",
            "DisConn"]
# RC SEND opcodes: First, Middle, Last, Last w/ Imm, Only, Only w/ Imm.
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_LAST_IMM, SEND_ONLY, SEND_ONLY_IMM = range(6)
BTH, ICRC, IMMDT, UDP = 12, 4, 4, 8
# Hello/HelloAck: RDMA CM IP header in front of the REQ private data.
CMA_HDR = 36

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def tshark(pcap, profile, fields, dfilter=None):
    cmd = ["tshark", "-n", "-r", pcap, "-T", "fields", "-E", "separator=\t",
           "-E", "occurrence=f"]
    if profile:
        cmd += ["-C", profile]
    if dfilter:
        cmd += ["-Y", dfilter]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True)
    if out.returncode != 0:
        print(out.stderr)
        sys.exit("wire_check: tshark failed (%d)" % out.returncode)
    rows = []
    for line in out.stdout.splitlines():
        v = line.split("\t")
        v += [""] * (len(fields) - len(v))
        rows.append(dict(zip(fields, v)))
    return rows


def num(s):
    return int(s, 0) if s else None


def source_constants():
    """What the engine puts in Hello / HelloAck, read from its sources."""
    def grab(path, pattern):
        with open(os.path.join(SRC, path)) as f:
            m = re.search(pattern, f.read(), re.M)
        if not m:
            sys.exit("wire_check: %s: no match for %s" % (path, pattern))
        # "65536 + 16", "2u": plain integer arithmetic only
        expr = m.group(1).replace("u", "")
        if not re.fullmatch(r"[0-9x+*\- ()]+", expr):
            sys.exit("wire_check: %s: cannot evaluate %r" % (path, expr))
        return eval(expr)
    c = {}
    c["major"] = grab("wire/wire.h", r"#define SDP_VERSION_MAJOR (\S+)")
    c["minor"] = grab("wire/wire.h", r"#define SDP_VERSION_MINOR (\S+)")
    c["hello_size"] = grab("wire/wire.h", r"#define SDP_HELLO_SIZE (\S+)")
    c["ack_size"] = grab("wire/wire.h", r"#define SDP_HELLO_ACK_SIZE (\S+)")
    c["max_adverts"] = grab("engine/conn.h", r"#define SDP_ZC_WINDOW (\S+)")
    # the verbs transport's buffers (no SDP_RECV_BUF*/SDP_RECV_BUFS set)
    c["rcv_sz"] = grab("transport/verbs/verbs_qp.c", r"\.recv_buf_size_pref = ([^,]+),")
    c["bufs"] = grab("transport/verbs/verbs_qp.c", r"\.recv_bufs_pref = ([^,]+),")
    return c


def be(b, o, n):
    return int.from_bytes(b[o:o + n], "big")



def synth_pcap(path, payloads):
    """A classic pcap of RoCE v2 RC SEND Only packets, one per payload."""
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, pl in enumerate(payloads):
            pad = (-len(pl)) % 4
            ib = struct.pack(">BBHII", SEND_ONLY, pad << 4, 0xFFFF, 0x11, i) + \
                pl + bytes(pad) + bytes(ICRC)
            udp = struct.pack(">HHHH", 49152, 4791, UDP + len(ib), 0) + ib
            ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000,
                             64, 17, 0, bytes(4), bytes(4)) + udp
            eth = bytes(12) + b"\x08\x00" + ip
            out.write(struct.pack("<IIII", i, 0, len(eth), len(eth)) + eth)


def dissect_hellos(profile, hellos):
    """Wireshark's SDP dissector on the Hellos / HelloAcks as the passive /
    active side's engine gets them: returns its fields per message."""
    d = tempfile.mkdtemp()
    path = os.path.join(d, "hello.pcap")
    synth_pcap(path, hellos)
    f = ["infiniband_sdp.bsdh.mid", "infiniband_sdp.bsdh.flags",
         "infiniband_sdp.bsdh.bufs", "infiniband_sdp.bsdh.len",
         "infiniband_sdp.bsdh.mseq", "infiniband_sdp.bsdh.mseqack",
         "infiniband_sdp.hh.majv", "infiniband_sdp.hh.minv",
         "infiniband_sdp.hh.ipv", "infiniband_sdp.hh.cap",
         "infiniband_sdp.hh.maxadverts", "infiniband_sdp.hh.desremrcvsz",
         "infiniband_sdp.hh.localrcvsz", "infiniband_sdp.hh.localport",
         "infiniband_sdp.hh.src_ip", "infiniband_sdp.hh.dst_ip",
         "_ws.malformed", "_ws.col.Info"]
    rows = tshark(path, profile, f)
    os.unlink(path)
    os.rmdir(d)
    return rows


def check_hellos(pcap, profile, src_ip, dst_ip):
    c = source_constants()
    rows = tshark(pcap, None, [
        "frame.number", "infiniband.cm.req.serviceid",
        "infiniband.cm.req.ip_cm.ipv", "infiniband.cm.req.ip_cm.sport",
        "infiniband.cm.req.ip_cm.sip4", "infiniband.cm.req.ip_cm.dip4",
        "infiniband.cm.req.ip_cm.private", "infiniband.cm.req.private",
        "infiniband.cm.rep.private"],
        "infiniband.cm.req or infiniband.cm.rep")
    nreq = nrep = 0
    synth, expect = [], []
    for r in rows:
        fr = r["frame.number"]
        if r["infiniband.cm.req.private"] or r["infiniband.cm.req.ip_cm.private"]:
            nreq += 1
            whole = bytes.fromhex(r["infiniband.cm.req.private"].replace(":", ""))
            h = whole[CMA_HDR:] if len(whole) == 92 else \
                bytes.fromhex(r["infiniband.cm.req.ip_cm.private"].replace(":", ""))
            sport = num(r["infiniband.cm.req.ip_cm.sport"])
            sid = num(r["infiniband.cm.req.serviceid"]) or 0
            got = dict(mid=h[0], flags=h[1], bufs=be(h, 2, 2), len=be(h, 4, 4),
                       mseq=be(h, 8, 4), mseqack=be(h, 12, 4), majv=h[16] >> 4,
                       minv=h[16] & 15, ipv=h[17] >> 4, caps=h[17] & 15,
                       rsvd18=h[18], maxadv=h[19], desrem=be(h, 20, 4),
                       localrcv=be(h, 24, 4), localport=be(h, 28, 2),
                       rsvd30=be(h, 30, 2))
            want = dict(mid=0, flags=0, bufs=c["bufs"], len=c["hello_size"],
                        mseq=0, mseqack=0, majv=c["major"], minv=c["minor"],
                        ipv=4, caps=0, rsvd18=0, maxadv=c["max_adverts"],
                        desrem=c["rcv_sz"], localrcv=c["rcv_sz"],
                        localport=sport, rsvd30=0)
            bad = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
            rest = h[32:]
            print("Hello    frame %s: %s; CM: service 0x%016x, IPv%s %s:%s -> %s"
                  % (fr, " ".join("%s=%s" % kv for kv in got.items()), sid,
                     r["infiniband.cm.req.ip_cm.ipv"], r["infiniband.cm.req.ip_cm.sip4"],
                     sport, r["infiniband.cm.req.ip_cm.dip4"]))
            if bad:
                fail("Hello frame %s: (got, want) %s" % (fr, bad))
            if any(rest):
                fail("Hello frame %s: bytes 32.. of the REQ area not zero" % fr)
            # the 92 bytes the passive side rebuilds (verbs_cm.c
            # hello_rebuild) from these 32 and the CM header
            full = bytearray(92)
            full[:32] = h[:32]
            full[17] = 0x40 | (h[17] & 15)
            full[28:30] = (sport or 0).to_bytes(2, "big")
            full[44:48] = socket.inet_aton(r["infiniband.cm.req.ip_cm.sip4"] or "0.0.0.0")
            full[60:64] = socket.inet_aton(r["infiniband.cm.req.ip_cm.dip4"] or "0.0.0.0")
            synth.append(bytes(full))
            expect.append(("Hello", fr, dict(
                mid=got["mid"], flags=got["flags"], bufs=got["bufs"],
                len=got["len"], mseq=got["mseq"], mseqack=got["mseqack"],
                majv=got["majv"], minv=got["minv"], ipv=4, cap=got["caps"],
                maxadverts=got["maxadv"], desremrcvsz=got["desrem"],
                localrcvsz=got["localrcv"], localport=sport,
                src_ip="::" + r["infiniband.cm.req.ip_cm.sip4"],
                dst_ip="::" + r["infiniband.cm.req.ip_cm.dip4"])))
            if (sid >> 16) != 0x0106 or (sid & 0xFFFF) == 0:
                fail("Hello frame %s: service ID 0x%x is not RDMA_PS_TCP|port" % (fr, sid))
            if r["infiniband.cm.req.ip_cm.sip4"] != src_ip or \
               r["infiniband.cm.req.ip_cm.dip4"] != dst_ip:
                fail("Hello frame %s: CM addresses %s -> %s" % (
                    fr, r["infiniband.cm.req.ip_cm.sip4"], r["infiniband.cm.req.ip_cm.dip4"]))
        if r["infiniband.cm.rep.private"]:
            nrep += 1
            h = bytes.fromhex(r["infiniband.cm.rep.private"].replace(":", ""))
            got = dict(size=len(h), mid=h[0], flags=h[1], bufs=be(h, 2, 2),
                       len=be(h, 4, 4), mseq=be(h, 8, 4), mseqack=be(h, 12, 4),
                       majv=h[16] >> 4, minv=h[16] & 15, b17=h[17], b18=h[18],
                       maxadv=h[19], actrcv=be(h, 20, 4))
            want = dict(size=c["ack_size"], mid=1, flags=0, bufs=c["bufs"],
                        len=c["ack_size"], mseq=0, mseqack=0, majv=c["major"],
                        minv=c["minor"], b17=0, b18=0, maxadv=c["max_adverts"],
                        actrcv=c["rcv_sz"])
            bad = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
            print("HelloAck frame %s: %s" % (fr, " ".join("%s=%s" % kv for kv in got.items())))
            if bad:
                fail("HelloAck frame %s: (got, want) %s" % (fr, bad))
            if any(h[24:]):
                fail("HelloAck frame %s: reserved bytes 24..195 not zero" % fr)
            synth.append(h)
            expect.append(("HelloAck", fr, dict(
                mid=got["mid"], flags=got["flags"], bufs=got["bufs"],
                len=got["len"], mseq=got["mseq"], mseqack=got["mseqack"])))
    # Wireshark's reading of the same bytes must agree with ours.
    ws = dissect_hellos(profile, synth) if synth else []
    if len(ws) != len(synth):
        fail("tshark decoded %d of %d Hello/HelloAck" % (len(ws), len(synth)))
    for (kind, fr, want), w in zip(expect, ws):
        got = {}
        for k in want:
            fld = [x for x in w if x.endswith("." + k)][0]
            v = w[fld]
            got[k] = v if k.endswith("_ip") else num(v)
        bad = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        ok = "(SDP %s)" % kind in w["_ws.col.Info"] and not w["_ws.malformed"]
        print("  Wireshark's SDP dissector on the %s of frame %s: %s%s" % (
            kind, fr, "agrees on %d fields" % len(want) if not bad and ok else
            "DISAGREES", "" if ok else " (%s)" % w["_ws.col.Info"]))
        if bad or not ok:
            fail("%s frame %s: Wireshark reads (got, ours) %s" % (kind, fr, bad))
    if not nreq or not nrep:
        fail("no CM REQ/REP with private data in the capture (%d REQ, %d REP)" % (nreq, nrep))
    return nreq, nrep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pcap", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--hello-src", required=True)
    ap.add_argument("--hello-dst", required=True)
    a = ap.parse_args()

    fields = ["frame.number", "ip.src", "ip.dst", "udp.length",
              "infiniband.bth.opcode", "infiniband.bth.padcnt",
              "infiniband.bth.destqp", "infiniband.bth.psn",
              "infiniband_sdp.bsdh.mid", "infiniband_sdp.bsdh.flags",
              "infiniband_sdp.bsdh.bufs", "infiniband_sdp.bsdh.len",
              "infiniband_sdp.bsdh.mseq", "infiniband_sdp.bsdh.mseqack",
              "_ws.malformed", "_ws.col.Info"]
    rows = tshark(a.pcap, a.profile, fields, "infiniband.bth.opcode <= 5")
    # Per direction (IP pair + destination QP): packets by PSN; a PSN seen
    # twice is a retransmission (go-back-N): the later copy stands.
    dirs = collections.defaultdict(dict)
    retrans = 0
    for r in rows:
        key = (r["ip.src"], r["ip.dst"], num(r["infiniband.bth.destqp"]))
        op = num(r["infiniband.bth.opcode"])
        r["op"] = op
        r["paylen"] = num(r["udp.length"]) - UDP - BTH - ICRC - \
            num(r["infiniband.bth.padcnt"]) - \
            (IMMDT if op in (SEND_LAST_IMM, SEND_ONLY_IMM) else 0)
        psn = num(r["infiniband.bth.psn"])
        if psn in dirs[key]:
            retrans += 1
        dirs[key][psn] = r

    counts = collections.Counter()
    malformed_ok = 0
    nmsg = 0
    for key, pk in sorted(dirs.items()):
        base = min(pk)          # captures are short: no 24-bit wrap inside
        if max(pk) - base > (1 << 23):
            base = min(p for p in pk if p > (1 << 23))
        order = sorted(pk, key=lambda p: (p - base) % (1 << 24))
        msg = None
        mseq_next = 1
        what = "%s -> %s QP 0x%06x" % key
        for psn in order:
            r = pk[psn]
            op = r["op"]
            if op in (SEND_FIRST, SEND_ONLY, SEND_ONLY_IMM):
                if msg:
                    fail("%s: frame %s starts a message inside the one of frame %s"
                         % (what, r["frame.number"], msg["first"]["frame.number"]))
                msg = {"first": r, "len": 0, "psn": psn}
            elif msg is None or psn != (msg["psn"] + 1) % (1 << 24):
                fail("%s: frame %s (SEND opcode %d, PSN %d) continues no message"
                     % (what, r["frame.number"], op, psn))
                msg = None
                continue
            msg["len"] += r["paylen"]
            msg["psn"] = psn
            if op in (SEND_FIRST, SEND_MIDDLE):
                continue
            # a whole message
            f, wire = msg["first"], msg["len"]
            msg = None
            nmsg += 1
            fr = f["frame.number"]
            mid = num(f["infiniband_sdp.bsdh.mid"])
            info = f["_ws.col.Info"]
            if mid is None or mid not in MIDS or \
               "(SDP %s)" % MIDS[mid] not in info:
                fail("%s: frame %s not decoded as an SDP message: %r"
                     % (what, fr, info))
                continue
            name = MIDS[mid]
            counts[name] += 1
            blen = num(f["infiniband_sdp.bsdh.len"])
            if blen != wire:
                fail("%s: frame %s %s: BSDH Length %s, %d bytes on the wire"
                     % (what, fr, name, blen, wire))
            mseq = num(f["infiniband_sdp.bsdh.mseq"])
            if mseq != mseq_next:
                fail("%s: frame %s %s MSeq %s, expected %d"
                     % (what, fr, name, mseq, mseq_next))
            mseq_next = (mseq or 0) + 1
            flags = num(f["infiniband_sdp.bsdh.flags"])
            if flags & 0xF8:
                fail("%s: frame %s %s reserved flag bits 0x%02x" % (what, fr, name, flags))
            if f["_ws.malformed"]:
                if name == "Data" and blen == 16:
                    malformed_ok += 1
                else:
                    fail("%s: frame %s %s (Length %s) marked malformed by the dissector"
                         % (what, fr, name, blen))
        if msg:
            fail("%s: message of frame %s incomplete at the end of the capture"
                 % (what, msg["first"]["frame.number"]))
    print("SDP messages decoded by Wireshark's dissector: %d in %d directions "
          "(%d retransmitted packets counted once)" % (nmsg, len(dirs), retrans))
    for name in sorted(counts, key=lambda n: -counts[n]):
        print("  %-14s %6d" % (name, counts[name]))
    print("  malformed: %d, all credit-only Data (Length 16)" % malformed_ok
          if malformed_ok else "  malformed: none")
    missing = [m for m in REQUIRED if not counts[m]]
    if missing:
        fail("MIDs never seen: " + ", ".join(missing))
    nreq, nrep = check_hellos(a.pcap, a.profile, a.hello_src, a.hello_dst)
    print("Hello/HelloAck in CM private data: %d REQ, %d REP checked" % (nreq, nrep))
    if failures:
        print("wire_check: %d failure(s)" % len(failures))
        return 1
    print("wire_check: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
