/* SPDX-License-Identifier: MIT */
/*
 * test_wire.c — unit tests for src/wire: the MID table, every SEND-carried
 * message round trip, byte-exact golden vectors written by hand from the
 * annex layouts (docs/PROTOCOL.md §2-§3), every rejection path of the
 * decoders and encoders, and the sequence/credit helpers.
 *
 * Output is TAP: one "ok N - desc" / "not ok N - desc" per test function;
 * failed checks print both values.  Exit 0 if all pass, 1 otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "wire/wire.h"
#include "wire/wire_internal.h"

static int g_checks_failed;	/* failures in the current test */

#define CHECK_EQ(a, b)                                                       \
	do {                                                                 \
		unsigned long long a_ = (unsigned long long)(a);             \
		unsigned long long b_ = (unsigned long long)(b);             \
		if (a_ != b_) {                                              \
			printf("#   %s:%d: CHECK_EQ(%s, %s): %lld (0x%llx) != " \
			       "%lld (0x%llx)\n",                            \
			       __FILE__, __LINE__, #a, #b, (long long)a_, a_, \
			       (long long)b_, b_);                           \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

#define CHECK(c)                                                             \
	do {                                                                 \
		if (!(c)) {                                                  \
			printf("#   %s:%d: CHECK(%s) failed\n", __FILE__,    \
			       __LINE__, #c);                                \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

#define CHECK_MEM(a, b, n)                                                   \
	do {                                                                 \
		if (memcmp((a), (b), (n)) != 0) {                            \
			printf("#   %s:%d: CHECK_MEM(%s, %s, %zu) differs\n", \
			       __FILE__, __LINE__, #a, #b, (size_t)(n));     \
			hexdump("got", (a), (n));                            \
			hexdump("want", (b), (n));                           \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

static void hexdump(const char *tag, const void *p, size_t n)
{
	const uint8_t *b = p;

	printf("#   %-4s:", tag);
	for (size_t i = 0; i < n; i++)
		printf("%s%02x", i && i % 16 == 0 ? "\n#        " : " ", b[i]);
	printf("\n");
}

/* ---- helpers ----------------------------------------------------------- */

static const uint8_t all_mids[] = {
	SDP_MID_HELLO, SDP_MID_HELLO_ACK, SDP_MID_DISCONN, SDP_MID_ABORT_CONN,
	SDP_MID_SEND_SM, SDP_MID_RDMA_WR_COMPL, SDP_MID_RDMA_RD_COMPL,
	SDP_MID_MODE_CHANGE, SDP_MID_SRC_AVAIL_CANCEL,
	SDP_MID_SINK_AVAIL_CANCEL, SDP_MID_SINK_CANCEL_ACK,
	SDP_MID_CH_RCV_BUF, SDP_MID_CH_RCV_BUF_ACK, SDP_MID_SUSP_COMM,
	SDP_MID_SUSP_COMM_ACK, SDP_MID_SINK_AVAIL, SDP_MID_SRC_AVAIL,
	SDP_MID_DATA,
};
#define N_MIDS (sizeof(all_mids) / sizeof(all_mids[0]))

static int is_send_mid(uint8_t mid)
{
	return mid != SDP_MID_HELLO && mid != SDP_MID_HELLO_ACK;
}

/* Write a raw BSDH (big endian) at buf. */
static void put_bsdh(uint8_t *buf, uint8_t mid, uint8_t flags, uint16_t bufs,
		     uint32_t len, uint32_t mseq, uint32_t ack)
{
	buf[0] = mid;
	buf[1] = flags;
	buf[2] = (uint8_t)(bufs >> 8);
	buf[3] = (uint8_t)bufs;
	for (int i = 0; i < 4; i++) {
		buf[4 + i] = (uint8_t)(len >> (24 - 8 * i));
		buf[8 + i] = (uint8_t)(mseq >> (24 - 8 * i));
		buf[12 + i] = (uint8_t)(ack >> (24 - 8 * i));
	}
}

/* Decode a raw BSDH-only-sized message of n bytes whose BSDH says len. */
static int decode_raw(uint8_t mid, uint8_t flags, uint32_t len, size_t n)
{
	uint8_t buf[256] = { 0 };
	struct sdp_msg m;

	put_bsdh(buf, mid, flags, 1, len, 1, 0);
	return sdp_wire_decode(buf, n, &m);
}

/* Fill the extended header of m with distinct values for its MID. */
static void fill_ext(struct sdp_msg *m)
{
	switch (m->bsdh.mid) {
	case SDP_MID_RDMA_WR_COMPL:
	case SDP_MID_RDMA_RD_COMPL:
	case SDP_MID_CH_RCV_BUF:
	case SDP_MID_CH_RCV_BUF_ACK:
		m->h.len = 0xA1B2C3D4u;
		break;
	case SDP_MID_MODE_CHANGE:
		m->h.mch = SDP_MCH_SEND_HALF | SDP_MODE_PIPELINED << 4;
		break;
	case SDP_MID_SUSP_COMM:
		m->h.service_id = 0x0000000001000006ull << 16 | 0x1f90;
		break;
	case SDP_MID_SRC_AVAIL:
		m->h.srcah.len = 1 << 20;
		m->h.srcah.rkey = 0xDEADBEEFu;
		m->h.srcah.vaddr = 0x00007F0012345678ull;
		break;
	case SDP_MID_SINK_AVAIL:
		m->h.sinkah.len = 65536;
		m->h.sinkah.rkey = 0xCAFEF00Du;
		m->h.sinkah.vaddr = 0xFFFFFFFF00000001ull;
		m->h.sinkah.non_discards = 77;
		break;
	default:
		break;
	}
}

static void check_ext_eq(const struct sdp_msg *a, const struct sdp_msg *b)
{
	switch (a->bsdh.mid) {
	case SDP_MID_RDMA_WR_COMPL:
	case SDP_MID_RDMA_RD_COMPL:
	case SDP_MID_CH_RCV_BUF:
	case SDP_MID_CH_RCV_BUF_ACK:
		CHECK_EQ(a->h.len, b->h.len);
		break;
	case SDP_MID_MODE_CHANGE:
		CHECK_EQ(a->h.mch, b->h.mch);
		break;
	case SDP_MID_SUSP_COMM:
		CHECK_EQ(a->h.service_id, b->h.service_id);
		break;
	case SDP_MID_SRC_AVAIL:
		CHECK_EQ(a->h.srcah.len, b->h.srcah.len);
		CHECK_EQ(a->h.srcah.rkey, b->h.srcah.rkey);
		CHECK_EQ(a->h.srcah.vaddr, b->h.srcah.vaddr);
		break;
	case SDP_MID_SINK_AVAIL:
		CHECK_EQ(a->h.sinkah.len, b->h.sinkah.len);
		CHECK_EQ(a->h.sinkah.rkey, b->h.sinkah.rkey);
		CHECK_EQ(a->h.sinkah.vaddr, b->h.sinkah.vaddr);
		CHECK_EQ(a->h.sinkah.non_discards, b->h.sinkah.non_discards);
		break;
	default:
		break;
	}
}

static void check_bsdh_eq(const struct sdp_bsdh *a, const struct sdp_bsdh *b)
{
	CHECK_EQ(a->mid, b->mid);
	CHECK_EQ(a->flags, b->flags);
	CHECK_EQ(a->bufs, b->bufs);
	CHECK_EQ(a->len, b->len);
	CHECK_EQ(a->mseq, b->mseq);
	CHECK_EQ(a->mseq_ack, b->mseq_ack);
}

static struct sdp_hello good_hello(void)
{
	struct sdp_hello h;

	memset(&h, 0, sizeof(h));
	h.bsdh.mid = SDP_MID_HELLO;
	h.bsdh.bufs = 64;
	h.bsdh.len = SDP_HELLO_SIZE;
	h.major = 2;
	h.minor = 2;
	h.ip_version = 4;
	h.max_adverts = 1;
	h.des_rem_rcv_sz = 32784;
	h.local_rcv_sz = 32784;
	h.local_port = 40000;
	memcpy(&h.src_ip[12], "\x0a\x00\x00\x01", 4);
	memcpy(&h.dst_ip[12], "\x0a\x00\x00\x02", 4);
	return h;
}

static struct sdp_hello_ack good_hello_ack(void)
{
	struct sdp_hello_ack h;

	memset(&h, 0, sizeof(h));
	h.bsdh.mid = SDP_MID_HELLO_ACK;
	h.bsdh.bufs = 63;
	h.bsdh.len = SDP_HELLO_ACK_SIZE;
	h.major = 2;
	h.minor = 2;
	h.max_adverts = 1;
	h.act_rcv_sz = 32784;
	return h;
}

/* ---- tests: table ------------------------------------------------------ */

static void test_mid_table(void)
{
	static const struct {
		uint8_t mid;
		const char *name;
		uint32_t hdr;
		int payload;
	} want[] = {
		{ SDP_MID_HELLO, "Hello", 92, 0 },
		{ SDP_MID_HELLO_ACK, "HelloAck", 196, 0 },
		{ SDP_MID_DISCONN, "DisConn", 16, 0 },
		{ SDP_MID_ABORT_CONN, "AbortConn", 16, 0 },
		{ SDP_MID_SEND_SM, "SendSm", 16, 0 },
		{ SDP_MID_RDMA_WR_COMPL, "RdmaWrCompl", 20, 0 },
		{ SDP_MID_RDMA_RD_COMPL, "RdmaRdCompl", 20, 0 },
		{ SDP_MID_MODE_CHANGE, "ModeChange", 20, 0 },
		{ SDP_MID_SRC_AVAIL_CANCEL, "SrcAvailCancel", 16, 0 },
		{ SDP_MID_SINK_AVAIL_CANCEL, "SinkAvailCancel", 16, 0 },
		{ SDP_MID_SINK_CANCEL_ACK, "SinkCancelAck", 16, 0 },
		{ SDP_MID_CH_RCV_BUF, "ChRcvBuf", 20, 0 },
		{ SDP_MID_CH_RCV_BUF_ACK, "ChRcvBufAck", 20, 0 },
		{ SDP_MID_SUSP_COMM, "SuspComm", 24, 0 },
		{ SDP_MID_SUSP_COMM_ACK, "SuspCommAck", 16, 0 },
		{ SDP_MID_SINK_AVAIL, "SinkAvail", 36, 1 },
		{ SDP_MID_SRC_AVAIL, "SrcAvail", 32, 1 },
		{ SDP_MID_DATA, "Data", 16, 1 },
	};
	int known = 0;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK(strcmp(sdp_mid_name(want[i].mid), want[i].name) == 0);
		CHECK_EQ(sdp_wire_hdr_size(want[i].mid), want[i].hdr);
		CHECK_EQ(sdp_wire_mid_has_payload(want[i].mid),
			 want[i].payload);
	}
	/* Exactly the 18 annex MIDs are known; everything else is unknown. */
	for (unsigned mid = 0; mid < 256; mid++) {
		if (sdp_wire_hdr_size((uint8_t)mid)) {
			known++;
			CHECK(strcmp(sdp_mid_name((uint8_t)mid), "unknown"));
		} else {
			CHECK(strcmp(sdp_mid_name((uint8_t)mid),
				     "unknown") == 0);
			CHECK_EQ(sdp_wire_mid_has_payload((uint8_t)mid), 0);
		}
	}
	CHECK_EQ(known, N_MIDS);
}

/* ---- tests: round trips ------------------------------------------------ */

static void roundtrip_one(uint8_t mid, uint8_t flags, uint32_t plen)
{
	uint8_t buf[128];
	struct sdp_msg m, d;
	uint32_t hdr = sdp_wire_hdr_size(mid);
	int ret;

	memset(&m, 0, sizeof(m));
	memset(buf, 0xEE, sizeof(buf));
	m.bsdh.mid = mid;
	m.bsdh.flags = flags;
	m.bsdh.bufs = 0xBEEF;
	m.bsdh.len = hdr + plen;
	m.bsdh.mseq = 0x01020304;
	m.bsdh.mseq_ack = 0xFFFFFFFE;
	fill_ext(&m);

	ret = sdp_wire_encode_hdr(&m, buf, sizeof(buf));
	CHECK_EQ(ret, hdr);
	for (uint32_t i = 0; i < plen; i++)
		buf[hdr + i] = (uint8_t)(i * 7 + 1);
	CHECK_EQ(buf[hdr + plen], 0xEE);	/* no write past the header */

	ret = sdp_wire_decode(buf, hdr + plen, &d);
	CHECK_EQ(ret, 0);
	check_bsdh_eq(&m.bsdh, &d.bsdh);
	check_ext_eq(&m, &d);
	CHECK_EQ(d.payload_len, plen);
	if (plen)
		CHECK(d.payload == buf + hdr);
	else
		CHECK(d.payload == NULL);
}

static void test_roundtrip_all_mids(void)
{
	for (size_t i = 0; i < N_MIDS; i++) {
		uint8_t mid = all_mids[i];

		if (!is_send_mid(mid))
			continue;
		roundtrip_one(mid, 0, 0);
		roundtrip_one(mid, SDP_FLAG_OOB_PEND, 0);
		roundtrip_one(mid, SDP_FLAG_REQ_PIPE, 0);
		if (sdp_wire_mid_has_payload(mid)) {
			roundtrip_one(mid, 0, 1);
			roundtrip_one(mid, 0, 50);
			roundtrip_one(mid, SDP_FLAG_OOB_PRES, 1);
			roundtrip_one(mid, SDP_FLAG_OOB_PRES |
				      SDP_FLAG_OOB_PEND | SDP_FLAG_REQ_PIPE, 9);
		}
	}
}

static void test_roundtrip_mch_values(void)
{
	/* The six values the annex defines, plus bits 7/6..4 combos. */
	static const uint8_t ok[] = { 0x00, 0x10, 0x20, 0x80, 0x90, 0xA0 };

	for (size_t i = 0; i < sizeof(ok); i++) {
		uint8_t buf[20] = { 0 };
		struct sdp_msg m;

		put_bsdh(buf, SDP_MID_MODE_CHANGE, 0, 1, 20, 1, 0);
		buf[16] = ok[i];
		CHECK_EQ(sdp_wire_decode(buf, 20, &m), 0);
		CHECK_EQ(m.h.mch, ok[i]);
	}
}

/* ---- tests: golden vectors --------------------------------------------- */

static void test_golden_bsdh_data(void)
{
	/* Data, OOB_PRES|OOB_PEND, bufs 64, len 19, mseq 5, ack 3, "abc". */
	static const uint8_t golden[] = {
		0xff, 0x03, 0x00, 0x40, 0x00, 0x00, 0x00, 0x13,
		0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x03,
		'a', 'b', 'c',
	};
	struct sdp_msg m, e;
	uint8_t out[19];

	CHECK_EQ(sdp_wire_decode(golden, sizeof(golden), &m), 0);
	CHECK_EQ(m.bsdh.mid, SDP_MID_DATA);
	CHECK_EQ(m.bsdh.flags, SDP_FLAG_OOB_PRES | SDP_FLAG_OOB_PEND);
	CHECK_EQ(m.bsdh.bufs, 64);
	CHECK_EQ(m.bsdh.len, 19);
	CHECK_EQ(m.bsdh.mseq, 5);
	CHECK_EQ(m.bsdh.mseq_ack, 3);
	CHECK_EQ(m.payload_len, 3);
	CHECK(m.payload == golden + 16);

	memset(&e, 0, sizeof(e));
	e.bsdh = (struct sdp_bsdh){ .mid = SDP_MID_DATA, .flags = 3,
				    .bufs = 64, .len = 19, .mseq = 5,
				    .mseq_ack = 3 };
	CHECK_EQ(sdp_wire_encode_hdr(&e, out, sizeof(out)), 16);
	memcpy(out + 16, "abc", 3);
	CHECK_MEM(out, golden, sizeof(golden));
}

static void test_golden_disconn(void)
{
	/* DisConn: BSDH only, bufs 0x0102, mseq 0x11223344, ack 0x55667788. */
	static const uint8_t golden[] = {
		0x02, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x10,
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
	};
	struct sdp_msg m;
	uint8_t out[16];

	CHECK_EQ(sdp_wire_decode(golden, sizeof(golden), &m), 0);
	CHECK_EQ(m.bsdh.bufs, 0x0102);
	CHECK_EQ(m.bsdh.mseq, 0x11223344);
	CHECK_EQ(m.bsdh.mseq_ack, 0x55667788);
	CHECK(m.payload == NULL);
	CHECK_EQ(sdp_wire_encode_hdr(&m, out, sizeof(out)), 16);
	CHECK_MEM(out, golden, sizeof(golden));
}

static void test_golden_srcavail(void)
{
	/* SrcAvail with 2 inline bytes: len 34, SrcAH len 0x10000,
	 * rkey 0x12345678, vaddr 0x0000000000000ABC (OFED: page offset). */
	static const uint8_t golden[] = {
		0xfe, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x22,
		0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x06,
		0x00, 0x01, 0x00, 0x00, 0x12, 0x34, 0x56, 0x78,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0xbc,
		0x5a, 0xa5,
	};
	struct sdp_msg m;
	uint8_t out[34];

	CHECK_EQ(sdp_wire_decode(golden, sizeof(golden), &m), 0);
	CHECK_EQ(m.bsdh.mid, SDP_MID_SRC_AVAIL);
	CHECK_EQ(m.bsdh.bufs, 10);
	CHECK_EQ(m.h.srcah.len, 0x10000);
	CHECK_EQ(m.h.srcah.rkey, 0x12345678);
	CHECK_EQ(m.h.srcah.vaddr, 0xABC);
	CHECK_EQ(m.payload_len, 2);
	CHECK(m.payload == golden + 32);
	CHECK_EQ(sdp_wire_encode_hdr(&m, out, sizeof(out)), 32);
	CHECK_MEM(out, golden, 32);
}

static void test_golden_sinkavail(void)
{
	/* SinkAvail, no payload: len 36, SinkAH len 4096, rkey 0xAABBCCDD,
	 * vaddr 0x0102030405060708, NonDiscards 9. */
	static const uint8_t golden[] = {
		0xfd, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x24,
		0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x00, 0x10, 0x00, 0xaa, 0xbb, 0xcc, 0xdd,
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x00, 0x00, 0x00, 0x09,
	};
	struct sdp_msg m;
	uint8_t out[36];

	CHECK_EQ(sdp_wire_decode(golden, sizeof(golden), &m), 0);
	CHECK_EQ(m.h.sinkah.len, 4096);
	CHECK_EQ(m.h.sinkah.rkey, 0xAABBCCDD);
	CHECK_EQ(m.h.sinkah.vaddr, 0x0102030405060708ull);
	CHECK_EQ(m.h.sinkah.non_discards, 9);
	CHECK_EQ(m.payload_len, 0);
	CHECK_EQ(sdp_wire_encode_hdr(&m, out, sizeof(out)), 36);
	CHECK_MEM(out, golden, sizeof(golden));
}

static void test_golden_modechange(void)
{
	/* ModeChange Combined-send (0x90), reserved bytes 17-19 zero. */
	static const uint8_t golden[] = {
		0x07, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x14,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
		0x90, 0x00, 0x00, 0x00,
	};
	struct sdp_msg m;
	uint8_t out[20];

	CHECK_EQ(sdp_wire_decode(golden, sizeof(golden), &m), 0);
	CHECK_EQ(m.h.mch, SDP_MCH_SEND_HALF | SDP_MODE_COMBINED << 4);
	memset(out, 0xFF, sizeof(out));
	CHECK_EQ(sdp_wire_encode_hdr(&m, out, sizeof(out)), 20);
	CHECK_MEM(out, golden, sizeof(golden));
}

static void test_golden_u32_and_sch(void)
{
	/* RdmaRdCompl 0x1000 bytes; SuspComm service ID 0x0000000001060050. */
	static const uint8_t rrch[] = {
		0x06, 0x04, 0x00, 0x05, 0x00, 0x00, 0x00, 0x14,
		0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x08,
		0x00, 0x00, 0x10, 0x00,
	};
	static const uint8_t sch[] = {
		0x0d, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x18,
		0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x08,
		0x00, 0x00, 0x00, 0x00, 0x01, 0x06, 0x00, 0x50,
	};
	struct sdp_msg m;
	uint8_t out[24];

	CHECK_EQ(sdp_wire_decode(rrch, sizeof(rrch), &m), 0);
	CHECK_EQ(m.bsdh.flags, SDP_FLAG_REQ_PIPE);
	CHECK_EQ(m.h.len, 0x1000);
	CHECK_EQ(sdp_wire_encode_hdr(&m, out, sizeof(out)), 20);
	CHECK_MEM(out, rrch, sizeof(rrch));

	CHECK_EQ(sdp_wire_decode(sch, sizeof(sch), &m), 0);
	CHECK_EQ(m.h.service_id, 0x0000000001060050ull);
	CHECK_EQ(sdp_wire_encode_hdr(&m, out, sizeof(out)), 24);
	CHECK_MEM(out, sch, sizeof(sch));
}

/* Hello from 10.0.0.1:40000 to 10.0.0.2, v2.2, IPv4, 64 bufs, 1 advert,
 * 32784-byte buffers both ways (OFED's defaults). */
static const uint8_t golden_hello[92] = {
	0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x5c,	/* BSDH */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x22, 0x40, 0x00, 0x01,				/* ver ipv rsv adv */
	0x00, 0x00, 0x80, 0x10,				/* DesRemRcvSz */
	0x00, 0x00, 0x80, 0x10,				/* LocalRcvSz */
	0x9c, 0x40, 0x00, 0x00,				/* port, rsv */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1,	/* src */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,	/* dst */
	/* 64..91 reserved: zero */
};

static const uint8_t golden_hello_ack[196] = {
	0x01, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x00, 0xc4,	/* BSDH */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x22, 0x00, 0x00, 0x01,				/* ver rsv rsv adv */
	0x00, 0x00, 0x80, 0x10,				/* ActRcvSz */
	/* 24..195 reserved: zero */
};

static void test_golden_hello(void)
{
	struct sdp_hello h = good_hello(), d;
	uint8_t out[100];

	memset(out, 0xAA, sizeof(out));
	CHECK_EQ(sdp_wire_encode_hello(&h, out, sizeof(out)), 92);
	CHECK_MEM(out, golden_hello, 92);
	CHECK_EQ(out[92], 0xAA);

	CHECK_EQ(sdp_wire_decode_hello(golden_hello, 92, &d), 0);
	check_bsdh_eq(&d.bsdh, &h.bsdh);
	CHECK_EQ(d.major, 2);
	CHECK_EQ(d.minor, 2);
	CHECK_EQ(d.ip_version, 4);
	CHECK_EQ(d.caps, 0);
	CHECK_EQ(d.max_adverts, 1);
	CHECK_EQ(d.des_rem_rcv_sz, 32784);
	CHECK_EQ(d.local_rcv_sz, 32784);
	CHECK_EQ(d.local_port, 40000);
	CHECK_MEM(d.src_ip, h.src_ip, 16);
	CHECK_MEM(d.dst_ip, h.dst_ip, 16);
}

static void test_golden_hello_v6_caps(void)
{
	struct sdp_hello h = good_hello(), d;
	uint8_t out[92];

	h.ip_version = 6;
	h.caps = 0x3;
	h.minor = 0xF;
	for (int i = 0; i < 16; i++) {
		h.src_ip[i] = (uint8_t)(0x20 + i);
		h.dst_ip[i] = (uint8_t)(0xF0 - i);
	}
	CHECK_EQ(sdp_wire_encode_hello(&h, out, sizeof(out)), 92);
	CHECK_EQ(out[16], 0x2F);
	CHECK_EQ(out[17], 0x63);
	CHECK_EQ(out[32], 0x20);
	CHECK_EQ(out[63], 0xE1);
	CHECK_EQ(sdp_wire_decode_hello(out, 92, &d), 0);
	CHECK_EQ(d.ip_version, 6);
	CHECK_EQ(d.caps, 3);
	CHECK_EQ(d.minor, 0xF);
	CHECK_MEM(d.src_ip, h.src_ip, 16);
	CHECK_MEM(d.dst_ip, h.dst_ip, 16);
}

static void test_golden_hello_ack(void)
{
	struct sdp_hello_ack h = good_hello_ack(), d;
	uint8_t out[200];

	memset(out, 0xAA, sizeof(out));
	CHECK_EQ(sdp_wire_encode_hello_ack(&h, out, sizeof(out)), 196);
	CHECK_MEM(out, golden_hello_ack, 196);
	CHECK_EQ(out[196], 0xAA);

	CHECK_EQ(sdp_wire_decode_hello_ack(golden_hello_ack, 196, &d), 0);
	check_bsdh_eq(&d.bsdh, &h.bsdh);
	CHECK_EQ(d.major, 2);
	CHECK_EQ(d.minor, 2);
	CHECK_EQ(d.max_adverts, 1);
	CHECK_EQ(d.act_rcv_sz, 32784);
}

/* ---- tests: decode rejections ------------------------------------------ */

static void test_reject_truncated(void)
{
	uint8_t buf[64] = { 0 };
	struct sdp_msg m;

	CHECK_EQ(sdp_wire_decode(NULL, 16, &m), -EBADMSG);
	CHECK_EQ(sdp_wire_decode(buf, 0, &m), -EBADMSG);
	for (size_t n = 1; n < 16; n++) {
		put_bsdh(buf, SDP_MID_DATA, 0, 1, (uint32_t)n, 1, 0);
		CHECK_EQ(sdp_wire_decode(buf, n, &m), -EBADMSG);
	}
	/* Extended header cut short, with a consistent Len. */
	for (size_t i = 0; i < N_MIDS; i++) {
		uint8_t mid = all_mids[i];
		uint32_t hdr = sdp_wire_hdr_size(mid);

		if (!is_send_mid(mid) || hdr == 16)
			continue;
		for (uint32_t n = 16; n < hdr; n++)
			CHECK_EQ(decode_raw(mid, 0, n, n), -EBADMSG);
	}
}

static void test_reject_len_mismatch(void)
{
	/* Len larger than what was received, and smaller. */
	CHECK_EQ(decode_raw(SDP_MID_DATA, 0, 17, 16), -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_DATA, 0, 16, 17), -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_DATA, 0, 0, 16), -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_DATA, 0, 0xFFFFFFFF, 100), -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_SRC_AVAIL, 0, 33, 32), -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_SRC_AVAIL, 0, 32, 40), -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_DISCONN, 0, 15, 16), -EBADMSG);
}

static void test_reject_unknown_mid(void)
{
	static const uint8_t reserved[] = { 0x0F, 0x10, 0x3F, 0x40, 0x7F,
					    0x80, 0xFC };

	for (size_t i = 0; i < sizeof(reserved); i++)
		CHECK_EQ(decode_raw(reserved[i], 0, 16, 16), -EPROTO);
	for (unsigned mid = 0; mid < 256; mid++)
		if (!sdp_wire_hdr_size((uint8_t)mid))
			CHECK_EQ(decode_raw((uint8_t)mid, 0, 16, 16), -EPROTO);
}

static void test_reject_hello_as_send(void)
{
	uint8_t buf[196];
	struct sdp_hello h = good_hello();
	struct sdp_hello_ack a = good_hello_ack();
	struct sdp_msg m;

	CHECK_EQ(sdp_wire_encode_hello(&h, buf, sizeof(buf)), 92);
	CHECK_EQ(sdp_wire_decode(buf, 92, &m), -EPROTO);
	CHECK_EQ(sdp_wire_encode_hello_ack(&a, buf, sizeof(buf)), 196);
	CHECK_EQ(sdp_wire_decode(buf, 196, &m), -EPROTO);
	CHECK_EQ(decode_raw(SDP_MID_HELLO, 0, 16, 16), -EPROTO);
	CHECK_EQ(decode_raw(SDP_MID_HELLO_ACK, 0, 16, 16), -EPROTO);
}

static void test_reject_reserved_flags(void)
{
	for (int bit = 3; bit < 8; bit++) {
		CHECK_EQ(decode_raw(SDP_MID_DATA, (uint8_t)(1u << bit), 16, 16),
			 -EBADMSG);
		CHECK_EQ(decode_raw(SDP_MID_DISCONN, (uint8_t)(1u << bit), 16,
				    16), -EBADMSG);
	}
	CHECK_EQ(decode_raw(SDP_MID_DATA, 0xFF, 20, 20), -EBADMSG);
	/* The three defined flags are fine on a control message, except
	 * OOB_PRES (next test). */
	CHECK_EQ(decode_raw(SDP_MID_DISCONN, SDP_FLAG_OOB_PEND |
			    SDP_FLAG_REQ_PIPE, 16, 16), 0);
}

static void test_reject_payload_on_control(void)
{
	for (size_t i = 0; i < N_MIDS; i++) {
		uint8_t mid = all_mids[i];
		uint32_t hdr = sdp_wire_hdr_size(mid);

		if (!is_send_mid(mid))
			continue;
		CHECK_EQ(decode_raw(mid, 0, hdr, hdr), 0);
		CHECK_EQ(decode_raw(mid, 0, hdr + 1, hdr + 1),
			 sdp_wire_mid_has_payload(mid) ? 0 : -EBADMSG);
		CHECK_EQ(decode_raw(mid, 0, hdr + 100, hdr + 100),
			 sdp_wire_mid_has_payload(mid) ? 0 : -EBADMSG);
	}
}

static void test_reject_oob_without_payload(void)
{
	/* CA4-7: OOB_PRES only in a message that carries data. */
	CHECK_EQ(decode_raw(SDP_MID_DATA, SDP_FLAG_OOB_PRES, 16, 16), -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_SRC_AVAIL, SDP_FLAG_OOB_PRES, 32, 32),
		 -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_SINK_AVAIL, SDP_FLAG_OOB_PRES, 36, 36),
		 -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_DISCONN, SDP_FLAG_OOB_PRES, 16, 16),
		 -EBADMSG);
	CHECK_EQ(decode_raw(SDP_MID_DATA, SDP_FLAG_OOB_PRES, 17, 17), 0);
	CHECK_EQ(decode_raw(SDP_MID_SRC_AVAIL, SDP_FLAG_OOB_PRES, 33, 33), 0);
	/* OOB_PEND alone may ride on anything. */
	CHECK_EQ(decode_raw(SDP_MID_DATA, SDP_FLAG_OOB_PEND, 16, 16), 0);
}

static void test_reject_bad_mch(void)
{
	uint8_t buf[20];
	struct sdp_msg m;

	for (unsigned v = 0; v < 256; v++) {
		int mode = (v >> 4) & 7;
		int ok = !(v & 0x0F) && mode <= 2;

		memset(buf, 0, sizeof(buf));
		put_bsdh(buf, SDP_MID_MODE_CHANGE, 0, 1, 20, 1, 0);
		buf[16] = (uint8_t)v;
		CHECK_EQ(sdp_wire_decode(buf, 20, &m), ok ? 0 : -EBADMSG);
	}
	/* Reserved bytes 17-19 are ignored on receive. */
	put_bsdh(buf, SDP_MID_MODE_CHANGE, 0, 1, 20, 1, 0);
	buf[16] = 0x20;
	buf[17] = 0xFF;
	buf[19] = 0x01;
	CHECK_EQ(sdp_wire_decode(buf, 20, &m), 0);
	CHECK_EQ(m.h.mch, 0x20);
}

/* ---- tests: encode rejections ------------------------------------------ */

static void test_encode_rejects(void)
{
	uint8_t buf[64];
	struct sdp_msg m;

	for (size_t i = 0; i < N_MIDS; i++) {
		uint8_t mid = all_mids[i];
		uint32_t hdr = sdp_wire_hdr_size(mid);

		memset(&m, 0, sizeof(m));
		m.bsdh.mid = mid;
		m.bsdh.len = hdr;
		if (!is_send_mid(mid)) {
			CHECK_EQ(sdp_wire_encode_hdr(&m, buf, sizeof(buf)),
				 -EINVAL);
			continue;
		}
		CHECK_EQ(sdp_wire_encode_hdr(&m, buf, hdr - 1), -ENOSPC);
		CHECK_EQ(sdp_wire_encode_hdr(&m, buf, 0), -ENOSPC);
		CHECK_EQ(sdp_wire_encode_hdr(&m, buf, hdr), hdr);
		m.bsdh.len = hdr - 1;
		CHECK_EQ(sdp_wire_encode_hdr(&m, buf, sizeof(buf)), -EINVAL);
		m.bsdh.len = hdr + 1;
		CHECK_EQ(sdp_wire_encode_hdr(&m, buf, sizeof(buf)),
			 sdp_wire_mid_has_payload(mid) ? (int)hdr : -EINVAL);
		m.bsdh.len = hdr;
		m.bsdh.flags = 0x08;
		CHECK_EQ(sdp_wire_encode_hdr(&m, buf, sizeof(buf)), -EINVAL);
		m.bsdh.flags = SDP_FLAG_OOB_PRES;
		CHECK_EQ(sdp_wire_encode_hdr(&m, buf, sizeof(buf)), -EINVAL);
	}

	memset(&m, 0, sizeof(m));
	m.bsdh.mid = 0x40;
	m.bsdh.len = 16;
	CHECK_EQ(sdp_wire_encode_hdr(&m, buf, sizeof(buf)), -EINVAL);
	m.bsdh.mid = SDP_MID_MODE_CHANGE;
	m.bsdh.len = 20;
	m.h.mch = 0x30;
	CHECK_EQ(sdp_wire_encode_hdr(&m, buf, sizeof(buf)), -EINVAL);
	m.h.mch = 0x21;
	CHECK_EQ(sdp_wire_encode_hdr(&m, buf, sizeof(buf)), -EINVAL);
	m.h.mch = 0xA0;
	CHECK_EQ(sdp_wire_encode_hdr(&m, buf, sizeof(buf)), 20);
	CHECK_EQ(sdp_wire_encode_hdr(NULL, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(sdp_wire_encode_hdr(&m, NULL, sizeof(buf)), -EINVAL);
}

/* ---- tests: Hello / HelloAck rejections -------------------------------- */

static int hello_patched(size_t off, uint8_t val)
{
	uint8_t buf[92];
	struct sdp_hello d;

	memcpy(buf, golden_hello, 92);
	buf[off] = val;
	return sdp_wire_decode_hello(buf, 92, &d);
}

static int hello_ack_patched(size_t off, uint8_t val)
{
	uint8_t buf[196];
	struct sdp_hello_ack d;

	memcpy(buf, golden_hello_ack, 196);
	buf[off] = val;
	return sdp_wire_decode_hello_ack(buf, 196, &d);
}

static void test_hello_rejects(void)
{
	uint8_t buf[200] = { 0 };
	struct sdp_hello d, h;

	memcpy(buf, golden_hello, 92);
	CHECK_EQ(sdp_wire_decode_hello(buf, 91, &d), -EBADMSG);
	CHECK_EQ(sdp_wire_decode_hello(buf, 93, &d), -EBADMSG);
	CHECK_EQ(sdp_wire_decode_hello(buf, 16, &d), -EBADMSG);
	CHECK_EQ(sdp_wire_decode_hello(buf, 0, &d), -EBADMSG);
	CHECK_EQ(sdp_wire_decode_hello(NULL, 92, &d), -EBADMSG);

	CHECK_EQ(hello_patched(7, 91), -EBADMSG);		/* Len */
	CHECK_EQ(hello_patched(7, 93), -EBADMSG);
	CHECK_EQ(hello_patched(0, SDP_MID_HELLO_ACK), -EPROTO);	/* MID */
	CHECK_EQ(hello_patched(0, SDP_MID_DATA), -EPROTO);
	CHECK_EQ(hello_patched(11, 1), -EBADMSG);		/* MSeq */
	CHECK_EQ(hello_patched(1, 0x10), -EBADMSG);		/* flags */
	CHECK_EQ(hello_patched(16, 0x12), -EPROTO);		/* v1.2 */
	CHECK_EQ(hello_patched(16, 0x11), -EPROTO);		/* gen1 */
	CHECK_EQ(hello_patched(16, 0x30), -EPROTO);
	CHECK_EQ(hello_patched(16, 0x20), 0);			/* 2.0 */
	CHECK_EQ(hello_patched(19, 0), -EPROTO);		/* adverts */
	CHECK_EQ(hello_patched(19, 255), 0);
	for (unsigned ipv = 0; ipv < 16; ipv++)
		CHECK_EQ(hello_patched(17, (uint8_t)(ipv << 4)),
			 ipv == 4 || ipv == 6 ? 0 : -EBADMSG);
	/* LocalRcvSz 0x00000010 and 0x1F too small, 0x20 fine. */
	CHECK_EQ(hello_patched(26, 0x00), -EBADMSG);
	memcpy(buf, golden_hello, 92);
	buf[26] = 0;
	buf[27] = 31;
	CHECK_EQ(sdp_wire_decode_hello(buf, 92, &d), -EBADMSG);
	buf[27] = 32;
	CHECK_EQ(sdp_wire_decode_hello(buf, 92, &d), 0);
	/* Reserved bytes are ignored on receive. */
	memcpy(buf, golden_hello, 92);
	buf[18] = 0xFF;
	buf[30] = 0xFF;
	buf[31] = 0xFF;
	memset(buf + 64, 0xFF, 28);
	CHECK_EQ(sdp_wire_decode_hello(buf, 92, &d), 0);
	CHECK_EQ(d.local_port, 40000);
	CHECK_EQ(d.max_adverts, 1);

	/* Encoding refuses what decoding refuses, and small buffers. */
	h = good_hello();
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 91), -ENOSPC);
	CHECK_EQ(sdp_wire_encode_hello(&h, NULL, 92), -EINVAL);
	CHECK_EQ(sdp_wire_encode_hello(NULL, buf, 92), -EINVAL);
	h.major = 1;
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 92), -EINVAL);
	h = good_hello();
	h.minor = 16;
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 92), -EINVAL);
	h = good_hello();
	h.ip_version = 5;
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 92), -EINVAL);
	h = good_hello();
	h.caps = 0x10;
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 92), -EINVAL);
	h = good_hello();
	h.max_adverts = 0;
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 92), -EINVAL);
	h = good_hello();
	h.local_rcv_sz = 16;
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 92), -EINVAL);
	h = good_hello();
	h.bsdh.len = 0;
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 92), -EINVAL);
	h = good_hello();
	h.bsdh.mseq = 1;
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 92), -EINVAL);
	h = good_hello();
	h.bsdh.mid = SDP_MID_DATA;
	CHECK_EQ(sdp_wire_encode_hello(&h, buf, 92), -EINVAL);
}

static void test_hello_ack_rejects(void)
{
	uint8_t buf[200] = { 0 };
	struct sdp_hello_ack d, h;

	memcpy(buf, golden_hello_ack, 196);
	CHECK_EQ(sdp_wire_decode_hello_ack(buf, 195, &d), -EBADMSG);
	CHECK_EQ(sdp_wire_decode_hello_ack(buf, 197, &d), -EBADMSG);
	CHECK_EQ(sdp_wire_decode_hello_ack(buf, 92, &d), -EBADMSG);
	CHECK_EQ(sdp_wire_decode_hello_ack(NULL, 196, &d), -EBADMSG);

	CHECK_EQ(hello_ack_patched(7, 195), -EBADMSG);
	CHECK_EQ(hello_ack_patched(0, SDP_MID_HELLO), -EPROTO);
	CHECK_EQ(hello_ack_patched(8, 0x80), -EBADMSG);		/* MSeq */
	CHECK_EQ(hello_ack_patched(1, 0x80), -EBADMSG);		/* flags */
	CHECK_EQ(hello_ack_patched(16, 0x11), -EPROTO);
	CHECK_EQ(hello_ack_patched(16, 0xF2), -EPROTO);
	CHECK_EQ(hello_ack_patched(19, 0), -EPROTO);
	CHECK_EQ(hello_ack_patched(22, 0), -EBADMSG);	/* ActRcvSz 16 */
	memcpy(buf, golden_hello_ack, 196);
	buf[22] = 0;
	buf[23] = 31;
	CHECK_EQ(sdp_wire_decode_hello_ack(buf, 196, &d), -EBADMSG);
	buf[23] = 32;
	CHECK_EQ(sdp_wire_decode_hello_ack(buf, 196, &d), 0);
	/* Reserved (17, 18, 24..195) ignored on receive. */
	memcpy(buf, golden_hello_ack, 196);
	buf[17] = 0x40;
	buf[18] = 0xFF;
	memset(buf + 24, 0xFF, 172);
	CHECK_EQ(sdp_wire_decode_hello_ack(buf, 196, &d), 0);
	CHECK_EQ(d.act_rcv_sz, 32784);

	h = good_hello_ack();
	CHECK_EQ(sdp_wire_encode_hello_ack(&h, buf, 195), -ENOSPC);
	CHECK_EQ(sdp_wire_encode_hello_ack(&h, NULL, 196), -EINVAL);
	h.max_adverts = 0;
	CHECK_EQ(sdp_wire_encode_hello_ack(&h, buf, 196), -EINVAL);
	h = good_hello_ack();
	h.major = 3;
	CHECK_EQ(sdp_wire_encode_hello_ack(&h, buf, 196), -EINVAL);
	h = good_hello_ack();
	h.minor = 16;
	CHECK_EQ(sdp_wire_encode_hello_ack(&h, buf, 196), -EINVAL);
	h = good_hello_ack();
	h.act_rcv_sz = 0;
	CHECK_EQ(sdp_wire_encode_hello_ack(&h, buf, 196), -EINVAL);
	h = good_hello_ack();
	h.bsdh.len = 92;
	CHECK_EQ(sdp_wire_encode_hello_ack(&h, buf, 196), -EINVAL);
}

/* ---- tests: sequence and credit helpers -------------------------------- */

static void test_seq(void)
{
	CHECK_EQ(sdp_seq_before(1, 2), 1);
	CHECK_EQ(sdp_seq_before(2, 1), 0);
	CHECK_EQ(sdp_seq_before(7, 7), 0);
	CHECK_EQ(sdp_seq_after_eq(7, 7), 1);
	CHECK_EQ(sdp_seq_after_eq(8, 7), 1);
	CHECK_EQ(sdp_seq_after_eq(6, 7), 0);
	/* Wrap-around: 0xFFFFFFFF comes just before 0. */
	CHECK_EQ(sdp_seq_before(0xFFFFFFFFu, 0), 1);
	CHECK_EQ(sdp_seq_before(0, 0xFFFFFFFFu), 0);
	CHECK_EQ(sdp_seq_after_eq(0, 0xFFFFFFFFu), 1);
	CHECK_EQ(sdp_seq_after_eq(0xFFFFFFFFu, 0), 0);
	CHECK_EQ(sdp_seq_before(0xFFFFFFF0u, 0x10), 1);
	CHECK_EQ(sdp_seq_after_eq(0x10, 0xFFFFFFF0u), 1);
	/* Half the space apart is the boundary. */
	CHECK_EQ(sdp_seq_before(0, 0x7FFFFFFFu), 1);
	CHECK_EQ(sdp_seq_before(0x7FFFFFFFu, 0x80000000u), 1);
	CHECK_EQ(sdp_seq_after_eq(0x80000000u, 0x7FFFFFFFu), 1);
}

static void test_credits(void)
{
	/* Right after the Hello exchange: next mseq 1, peer acked 0. */
	CHECK_EQ(sdp_credits_from_peer(64, 0, 1), 64);
	/* Sent 1..3 (next 4), peer had seen 1: two in flight. */
	CHECK_EQ(sdp_credits_from_peer(10, 1, 4), 8);
	/* Everything acked. */
	CHECK_EQ(sdp_credits_from_peer(10, 3, 4), 10);
	CHECK_EQ(sdp_credits_from_peer(0, 3, 4), 0);
	/* More in flight than the peer had posted: negative, not huge. */
	CHECK_EQ(sdp_credits_from_peer(1, 0, 4), -2);
	/* Across the 32-bit wrap: sent ...0xFFFFFFFF, 0, 1 (next 2), peer
	 * acked 0xFFFFFFFF: 0 and 1 in flight. */
	CHECK_EQ(sdp_credits_from_peer(5, 0xFFFFFFFFu, 2), 3);
	CHECK_EQ(sdp_credits_from_peer(5, 0xFFFFFFFEu, 0), 4);
	CHECK_EQ(sdp_credits_from_peer(65535, 0, 1), 65535);
}

/* ---- tests: the private cursor ----------------------------------------- */

static void test_cursor(void)
{
	static const uint8_t in[11] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 };
	uint8_t out[6], big[4];
	struct sdp_rd r;
	struct sdp_wr w;

	sdp__rd_init(&r, in, sizeof(in));
	CHECK_EQ(sdp__get_u64(&r), 0x0102030405060708ull);
	CHECK_EQ(sdp__get_u16(&r), 0x090A);
	CHECK_EQ(r.err, 0);
	CHECK_EQ(sdp__get_u16(&r), 0);		/* 1 byte left: overrun */
	CHECK_EQ(r.err, -EBADMSG);
	CHECK_EQ(sdp__get_u8(&r), 0);		/* sticky, even if it fits */
	CHECK(r.p == in + 10);

	sdp__rd_init(&r, in, 3);
	CHECK_EQ(sdp__get_u32(&r), 0);
	CHECK_EQ(r.err, -EBADMSG);
	sdp__rd_init(&r, in, 7);
	CHECK_EQ(sdp__get_u64(&r), 0);
	memset(big, 0xEE, sizeof(big));
	sdp__get_bytes(&r, big, sizeof(big));
	CHECK_EQ(big[0], 0);			/* zeroed on failure */

	memset(out, 0xEE, sizeof(out));
	sdp__wr_init(&w, out, 5);
	sdp__put_u32(&w, 0xA1A2A3A4);
	CHECK_EQ(w.err, 0);
	sdp__put_u16(&w, 0xB1B2);		/* 1 byte left: refused */
	CHECK_EQ(w.err, -ENOSPC);
	sdp__put_u8(&w, 0xC1);			/* sticky */
	CHECK_EQ(out[4], 0xEE);
	CHECK_EQ(out[0], 0xA1);
	sdp__wr_init(&w, out, 3);
	sdp__put_u32(&w, 1);
	sdp__put_u64(&w, 1);
	sdp__put_zero(&w, 4);
	sdp__put_bytes(&w, in, 4);
	CHECK_EQ(w.err, -ENOSPC);
	CHECK_EQ(out[0], 0xA1);			/* untouched */
}

/* ---- runner ------------------------------------------------------------ */

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{ "MID table: names, header sizes, payload flags", test_mid_table },
	{ "round trip of every SEND MID, with and without payload",
	  test_roundtrip_all_mids },
	{ "ModeChange: the six annex values decode", test_roundtrip_mch_values },
	{ "golden: BSDH + Data with OOB", test_golden_bsdh_data },
	{ "golden: DisConn", test_golden_disconn },
	{ "golden: SrcAvail with inline payload", test_golden_srcavail },
	{ "golden: SinkAvail", test_golden_sinkavail },
	{ "golden: ModeChange", test_golden_modechange },
	{ "golden: RdmaRdCompl and SuspComm", test_golden_u32_and_sch },
	{ "golden: Hello (IPv4)", test_golden_hello },
	{ "Hello IPv6 + caps round trip", test_golden_hello_v6_caps },
	{ "golden: HelloAck", test_golden_hello_ack },
	{ "reject: truncated BSDH / extended header", test_reject_truncated },
	{ "reject: Len != received bytes", test_reject_len_mismatch },
	{ "reject: reserved and unknown MIDs", test_reject_unknown_mid },
	{ "reject: Hello/HelloAck as SEND", test_reject_hello_as_send },
	{ "reject: reserved flag bits", test_reject_reserved_flags },
	{ "reject: payload on control MIDs", test_reject_payload_on_control },
	{ "reject: OOB_PRES without payload (CA4-7)",
	  test_reject_oob_without_payload },
	{ "reject: ModeChange reserved bits / mode > 2", test_reject_bad_mch },
	{ "encode: bad header, small buffer", test_encode_rejects },
	{ "Hello: every rejection path", test_hello_rejects },
	{ "HelloAck: every rejection path", test_hello_ack_rejects },
	{ "sequence helpers incl. wrap-around", test_seq },
	{ "sdp_credits_from_peer examples", test_credits },
	{ "cursor: overruns are refused and sticky", test_cursor },
};

int main(void)
{
	size_t n = sizeof(tests) / sizeof(tests[0]);
	int failed = 0;

	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		g_checks_failed = 0;
		tests[i].fn();
		printf("%sok %zu - %s\n", g_checks_failed ? "not " : "", i + 1,
		       tests[i].name);
		if (g_checks_failed)
			failed++;
	}
	if (failed)
		printf("# %d of %zu tests failed\n", failed, n);
	return failed ? 1 : 0;
}
