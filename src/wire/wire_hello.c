/* SPDX-License-Identifier: MIT */
/*
 * wire_hello.c — Hello (HH) and HelloAck (HAH) codecs.  They never travel
 * as SENDs: the Hello is the IB CM REQ private data (92 bytes) and the
 * HelloAck the CM REP private data (196 bytes), so both have a fixed size
 * and carry MSeq 0 (docs/PROTOCOL.md §3.1, §3.2, §6.2).
 *
 * Decoding is liberal about reserved bytes (ignored: the v1.1 spec and its
 * implementations disagree on the HAH reserved length, and Wireshark
 * already reads extensions into HH bytes 66-67) and strict about every field
 * we act on.  Encoding writes zeros into every reserved byte and refuses
 * anything the decoder would refuse, so we never emit what we would reject.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/wire.h"
#include "wire/wire_internal.h"

/* HH, IB CM REQ private data. */
struct sdp_wire_hello {
	struct sdp_wire_bsdh bsdh;
	uint8_t version;	/* major << 4 | minor */
	uint8_t ipv_cap;	/* ip_version << 4 | capability bits */
	uint8_t reserved1;
	uint8_t max_adverts;
	sdp_be32 des_rem_rcv_sz;
	sdp_be32 local_rcv_sz;
	sdp_be16 local_port;	/* active side's source port */
	uint8_t reserved2[2];
	uint8_t src_ip[16];	/* IPv4 in the last 4 bytes, not ::ffff: */
	uint8_t dst_ip[16];
	uint8_t reserved3[28];
} __attribute__((packed));

/* HAH, IB CM REP private data. */
struct sdp_wire_hello_ack {
	struct sdp_wire_bsdh bsdh;
	uint8_t version;
	uint8_t ipv_cap;	/* OFED leaves it 0; gen1 calls 17-18 reserved */
	uint8_t reserved1;
	uint8_t max_adverts;
	sdp_be32 act_rcv_sz;
	uint8_t reserved2[172];	/* gen1: v1.1's length does not fit the REP */
} __attribute__((packed));

_Static_assert(sizeof(struct sdp_wire_hello) == SDP_HELLO_SIZE,
	       "Hello (BSDH + HH) must be exactly the 92-byte CM REQ private data");
_Static_assert(offsetof(struct sdp_wire_hello, max_adverts) == 19 &&
	       offsetof(struct sdp_wire_hello, des_rem_rcv_sz) == 20 &&
	       offsetof(struct sdp_wire_hello, local_rcv_sz) == 24 &&
	       offsetof(struct sdp_wire_hello, local_port) == 28 &&
	       offsetof(struct sdp_wire_hello, src_ip) == 32 &&
	       offsetof(struct sdp_wire_hello, dst_ip) == 48 &&
	       offsetof(struct sdp_wire_hello, reserved3) == 64,
	       "HH offsets: adverts 19, DesRemRcvSz 20, LocalRcvSz 24, port 28, src 32, dst 48");
_Static_assert(sizeof(struct sdp_wire_hello_ack) == SDP_HELLO_ACK_SIZE,
	       "HelloAck (BSDH + HAH) must be exactly the 196-byte CM REP private data");
_Static_assert(offsetof(struct sdp_wire_hello_ack, max_adverts) == 19 &&
	       offsetof(struct sdp_wire_hello_ack, act_rcv_sz) == 20 &&
	       offsetof(struct sdp_wire_hello_ack, reserved2) == 24,
	       "HAH offsets: version 16, adverts 19, ActRcvSz 20, reserved from 24");

/*
 * BSDH and version checks common to HH and HAH.  Returns -EBADMSG for a
 * malformed header and -EPROTO for one we understand but will not accept.
 */
static int sdp_hello_bsdh_check(const struct sdp_bsdh *b, uint8_t mid,
				uint32_t size)
{
	if (b->mid != mid)
		return -EPROTO;
	if (b->len != size)
		return -EBADMSG;
	/* Nothing precedes the Hello exchange, so nothing to number. */
	if (b->mseq != 0)
		return -EBADMSG;
	if (b->flags & SDP_FLAG_RESERVED)
		return -EBADMSG;
	return 0;
}

/*
 * Fields of the HH/HAH body we act on.  Major must be 2: the RDMA CM
 * rejects anything else (OFED SDP_MAJ_VERSION), and gen1 (1.x) would
 * misread our HAH.  MaxAdverts 0 would forbid every ZCopy advertisement;
 * OFED and gen1 both reject it.  A receive size below SDP_MIN_RCV_SZ cannot
 * hold a BSDH plus data.
 */
static int sdp_hello_body_check(uint8_t major, uint8_t max_adverts,
				uint32_t rcv_sz)
{
	if (major != SDP_VERSION_MAJOR)
		return -EPROTO;
	if (max_adverts == 0)
		return -EPROTO;
	if (rcv_sz < SDP_MIN_RCV_SZ)
		return -EBADMSG;
	return 0;
}

static int sdp_hello_check(const struct sdp_hello *h)
{
	int ret;

	ret = sdp_hello_bsdh_check(&h->bsdh, SDP_MID_HELLO, SDP_HELLO_SIZE);
	if (ret)
		return ret;
	ret = sdp_hello_body_check(h->major, h->max_adverts, h->local_rcv_sz);
	if (ret)
		return ret;
	/* The passive side matches listeners on IPV + address, so only 4
	 * and 6 mean anything.  OFED merely masks the nibble; we check it
	 * exactly because we use it to read src/dst IP. */
	if (h->ip_version != 4 && h->ip_version != 6)
		return -EBADMSG;
	return 0;
}

static int sdp_hello_ack_check(const struct sdp_hello_ack *h)
{
	int ret;

	ret = sdp_hello_bsdh_check(&h->bsdh, SDP_MID_HELLO_ACK,
				   SDP_HELLO_ACK_SIZE);
	if (ret)
		return ret;
	return sdp_hello_body_check(h->major, h->max_adverts, h->act_rcv_sz);
}

int sdp_wire_decode_hello(const void *buf, size_t n, struct sdp_hello *out)
{
	struct sdp_rd r;
	uint8_t v;

	memset(out, 0, sizeof(*out));
	if (!buf || n != SDP_HELLO_SIZE)
		return -EBADMSG;

	sdp__rd_init(&r, buf, n);
	sdp__bsdh_get(&r, &out->bsdh);
	v = sdp__get_u8(&r);
	out->major = v >> 4;
	out->minor = v & 0x0F;
	v = sdp__get_u8(&r);
	out->ip_version = v >> 4;
	out->caps = v & 0x0F;
	sdp__skip(&r, 1);
	out->max_adverts = sdp__get_u8(&r);
	out->des_rem_rcv_sz = sdp__get_u32(&r);
	out->local_rcv_sz = sdp__get_u32(&r);
	out->local_port = sdp__get_u16(&r);
	sdp__skip(&r, 2);
	sdp__get_bytes(&r, out->src_ip, sizeof(out->src_ip));
	sdp__get_bytes(&r, out->dst_ip, sizeof(out->dst_ip));
	sdp__skip(&r, 28);	/* incl. Wireshark's "Extended MaxAdverts" */
	if (r.err)
		return r.err;
	return sdp_hello_check(out);
}

int sdp_wire_encode_hello(const struct sdp_hello *h, void *buf, size_t cap)
{
	struct sdp_wr w;

	if (!h || !buf)
		return -EINVAL;
	if (h->major > 0x0F || h->minor > 0x0F || h->caps > 0x0F)
		return -EINVAL;
	if (sdp_hello_check(h))
		return -EINVAL;
	if (cap < SDP_HELLO_SIZE)
		return -ENOSPC;

	sdp__wr_init(&w, buf, cap);
	sdp__bsdh_put(&w, &h->bsdh);
	sdp__put_u8(&w, (uint8_t)(h->major << 4 | h->minor));
	sdp__put_u8(&w, (uint8_t)(h->ip_version << 4 | h->caps));
	sdp__put_zero(&w, 1);
	sdp__put_u8(&w, h->max_adverts);
	sdp__put_u32(&w, h->des_rem_rcv_sz);
	sdp__put_u32(&w, h->local_rcv_sz);
	sdp__put_u16(&w, h->local_port);
	sdp__put_zero(&w, 2);
	sdp__put_bytes(&w, h->src_ip, sizeof(h->src_ip));
	sdp__put_bytes(&w, h->dst_ip, sizeof(h->dst_ip));
	sdp__put_zero(&w, 28);
	if (w.err)
		return w.err;
	return (int)SDP_HELLO_SIZE;
}

int sdp_wire_decode_hello_ack(const void *buf, size_t n,
			      struct sdp_hello_ack *out)
{
	struct sdp_rd r;
	uint8_t v;

	memset(out, 0, sizeof(*out));
	if (!buf || n != SDP_HELLO_ACK_SIZE)
		return -EBADMSG;

	sdp__rd_init(&r, buf, n);
	sdp__bsdh_get(&r, &out->bsdh);
	v = sdp__get_u8(&r);
	out->major = v >> 4;
	out->minor = v & 0x0F;
	sdp__skip(&r, 2);	/* ipv_cap (OFED writes 0) + reserved */
	out->max_adverts = sdp__get_u8(&r);
	out->act_rcv_sz = sdp__get_u32(&r);
	sdp__skip(&r, 172);
	if (r.err)
		return r.err;
	return sdp_hello_ack_check(out);
}

int sdp_wire_encode_hello_ack(const struct sdp_hello_ack *h, void *buf,
			      size_t cap)
{
	struct sdp_wr w;

	if (!h || !buf)
		return -EINVAL;
	if (h->major > 0x0F || h->minor > 0x0F)
		return -EINVAL;
	if (sdp_hello_ack_check(h))
		return -EINVAL;
	if (cap < SDP_HELLO_ACK_SIZE)
		return -ENOSPC;

	sdp__wr_init(&w, buf, cap);
	sdp__bsdh_put(&w, &h->bsdh);
	sdp__put_u8(&w, (uint8_t)(h->major << 4 | h->minor));
	sdp__put_zero(&w, 2);
	sdp__put_u8(&w, h->max_adverts);
	sdp__put_u32(&w, h->act_rcv_sz);
	sdp__put_zero(&w, 172);
	if (w.err)
		return w.err;
	return (int)SDP_HELLO_ACK_SIZE;
}
