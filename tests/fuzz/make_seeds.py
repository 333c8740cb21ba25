#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the seed corpora for tests/fuzz/fuzz_msg and fuzz_hello.

Deterministic: rerunning rewrites the same files.  Layouts follow
src/wire/wire.h and docs/PROTOCOL.md sections 2-3 (all fields big endian).
Usage: tests/fuzz/make_seeds.py   (writes tests/fuzz/corpus/fuzz_*/)
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def bsdh(mid, flags=0, bufs=8, length=16, mseq=1, ack=0):
    return struct.pack(">BBHIII", mid, flags, bufs, length, mseq, ack)


def msg(mid, ext=b"", payload=b"", flags=0, bufs=8, mseq=1, ack=0,
        length=None):
    n = 16 + len(ext) + len(payload)
    return bsdh(mid, flags, bufs, n if length is None else length, mseq,
                ack) + ext + payload


def u32(x):
    return struct.pack(">I", x)


def srcah(length, rkey, vaddr):
    return struct.pack(">IIQ", length, rkey, vaddr)


def sinkah(length, rkey, vaddr, nd):
    return struct.pack(">IIQI", length, rkey, vaddr, nd)


def hello(ver=0x22, ipv=0x40, adverts=1, des=32784, local=32784,
          port=40000, src=b"\0" * 12 + b"\x0a\0\0\x01",
          dst=b"\0" * 12 + b"\x0a\0\0\x02", mid=0, length=92, mseq=0,
          bufs=64, flags=0, rsvd=0):
    b = bsdh(mid, flags, bufs, length, mseq, 0)
    b += struct.pack(">BBBBIIHH", ver, ipv, rsvd, adverts, des, local, port,
                     rsvd * 0x0101)
    b += src + dst + bytes([rsvd]) * 28
    assert len(b) == 92
    return b


def hello_ack(ver=0x22, adverts=1, act=32784, mid=1, length=196, mseq=0,
              bufs=63, flags=0, rsvd=0):
    b = bsdh(mid, flags, bufs, length, mseq, 0)
    b += struct.pack(">BBBBI", ver, rsvd, rsvd, adverts, act)
    b += bytes([rsvd]) * 172
    assert len(b) == 196
    return b


MSG_SEEDS = {
    # valid: one per SEND-carried MID, with and without payload
    "data_credit_update": msg(0xFF),
    "data_payload": msg(0xFF, payload=b"hello, sdp"),
    "data_oob": msg(0xFF, payload=b"urgent!", flags=0x03),
    "data_oob_pend_only": msg(0xFF, flags=0x02),
    "data_wrap_mseq": msg(0xFF, payload=b"x", mseq=0xFFFFFFFF,
                          ack=0xFFFFFFFE),
    "disconn": msg(0x02),
    "abort_conn": msg(0x03),
    "send_sm": msg(0x04),
    "rdma_wr_compl": msg(0x05, u32(4096)),
    "rdma_rd_compl_req_pipe": msg(0x06, u32(65536), flags=0x04),
    "mode_change_comb_send": msg(0x07, b"\x90\0\0\0"),
    "mode_change_pipe_recv": msg(0x07, b"\x20\0\0\0"),
    "src_avail_cancel": msg(0x08),
    "sink_avail_cancel": msg(0x09),
    "sink_cancel_ack": msg(0x0A),
    "ch_rcv_buf": msg(0x0B, u32(65552)),
    "ch_rcv_buf_ack": msg(0x0C, u32(65536)),
    "susp_comm": msg(0x0D, struct.pack(">Q", 0x0000000001061F90)),
    "susp_comm_ack": msg(0x0E),
    "sink_avail": msg(0xFD, sinkah(65536, 0xCAFEF00D, 0x7F0000001000, 3)),
    "sink_avail_payload": msg(0xFD, sinkah(4096, 1, 2, 0), payload=b"rev"),
    "src_avail_pipelined": msg(0xFE, srcah(1 << 20, 0xDEADBEEF, 0xABC)),
    "src_avail_combined": msg(0xFE, srcah(8192, 0x1234, 0), payload=b"ab"),
    # malformed
    "bad_truncated_bsdh": bsdh(0xFF)[:10],
    "bad_len_too_big": msg(0xFF, payload=b"abc", length=100),
    "bad_len_too_small": msg(0xFF, payload=b"abc", length=16),
    "bad_mid_reserved_0f": msg(0x0F),
    "bad_mid_experimental_40": msg(0x40),
    "bad_mid_reserved_fc": msg(0xFC),
    "bad_hello_as_send": hello(),
    "bad_reserved_flag": msg(0xFF, payload=b"z", flags=0x08),
    "bad_payload_on_disconn": msg(0x02, payload=b"no"),
    "bad_oob_no_payload": msg(0xFF, flags=0x01),
    "bad_mch_reserved_bits": msg(0x07, b"\x21\0\0\0"),
    "bad_mch_mode_3": msg(0x07, b"\x30\0\0\0"),
    "bad_srcah_truncated": msg(0xFE, srcah(1, 2, 3)[:8]),
}

HELLO_SEEDS = {
    "hello_v4": hello(),
    "hello_v6_caps": hello(ipv=0x63, src=bytes(range(0x20, 0x30)),
                           dst=bytes(range(0xF0, 0xE0, -1)), adverts=255),
    "hello_reserved_set": hello(rsvd=0xFF),
    "hello_min_rcv": hello(des=0, local=32),
    "hello_v2_0": hello(ver=0x20),
    "hello_ack": hello_ack(),
    "hello_ack_reserved_set": hello_ack(rsvd=0xFF),
    "hello_ack_255_adverts": hello_ack(adverts=255, act=1 << 20),
    # malformed
    "bad_hello_short": hello()[:91],
    "bad_hello_long": hello() + b"\0",
    "bad_hello_len_field": hello(length=91),
    "bad_hello_mid": hello(mid=1),
    "bad_hello_gen1_version": hello(ver=0x11),
    "bad_hello_zero_adverts": hello(adverts=0),
    "bad_hello_ipv5": hello(ipv=0x50),
    "bad_hello_ipv0": hello(ipv=0x00),
    "bad_hello_mseq": hello(mseq=1),
    "bad_hello_rcv_small": hello(local=31),
    "bad_hello_flags": hello(flags=0x80),
    "bad_hello_ack_short": hello_ack()[:195],
    "bad_hello_ack_mid": hello_ack(mid=0),
    "bad_hello_ack_version": hello_ack(ver=0x32),
    "bad_hello_ack_zero_adverts": hello_ack(adverts=0),
    "bad_hello_ack_rcv_small": hello_ack(act=16),
    "bad_hello_ack_len_field": hello_ack(length=92),
    "bad_empty": b"",
}


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    print(f"{target}: {len(seeds)} seeds in {os.path.relpath(d)}")


if __name__ == "__main__":
    write("fuzz_msg", MSG_SEEDS)
    write("fuzz_hello", HELLO_SEEDS)
