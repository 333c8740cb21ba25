/* SPDX-License-Identifier: MIT */
/*
 * wire.h — SDP messages on the wire (IBTA SDP annex, as reconstructed in
 * docs/PROTOCOL.md): the 16-byte BSDH, every extended header, Hello/HelloAck.
 *
 * Two representations:
 *  - wire structs (struct sdp_wire_*): packed, big-endian fields wrapped in
 *    one-member structs (sdp_be16/32/64) so a missing conversion does not
 *    compile; used only to document and build fixed layouts;
 *  - host structs (struct sdp_bsdh, struct sdp_msg, ...): what the engine uses.
 *
 * Decoding is bounds-checked and validates everything that does not depend on
 * connection state (length fields, MID known, payload allowed for the MID,
 * reserved flag bits zero, minimum header sizes).  Decoders never read past
 * `len` and never touch connection state.  They return 0 or a negative errno:
 *   -EBADMSG  malformed (truncated, length mismatch, bad field value)
 *   -EPROTO   well-formed but not allowed (unknown/reserved MID, Hello sent
 *             as a SEND, bad version, ...)
 */
#ifndef SDP_WIRE_H
#define SDP_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* Big-endian wrapper types: access only via sdp_get_beN()/sdp_put_beN(). */
typedef struct { uint8_t b[2]; } sdp_be16;
typedef struct { uint8_t b[4]; } sdp_be32;
typedef struct { uint8_t b[8]; } sdp_be64;

static inline uint16_t sdp_get_be16(sdp_be16 v)
{
	return (uint16_t)((uint16_t)v.b[0] << 8 | v.b[1]);
}

static inline uint32_t sdp_get_be32(sdp_be32 v)
{
	return (uint32_t)v.b[0] << 24 | (uint32_t)v.b[1] << 16 |
	       (uint32_t)v.b[2] << 8 | v.b[3];
}

static inline uint64_t sdp_get_be64(sdp_be64 v)
{
	uint64_t x = 0;

	for (int i = 0; i < 8; i++)
		x = x << 8 | v.b[i];
	return x;
}

static inline void sdp_put_be16(sdp_be16 *d, uint16_t x)
{
	d->b[0] = (uint8_t)(x >> 8);
	d->b[1] = (uint8_t)x;
}

static inline void sdp_put_be32(sdp_be32 *d, uint32_t x)
{
	d->b[0] = (uint8_t)(x >> 24);
	d->b[1] = (uint8_t)(x >> 16);
	d->b[2] = (uint8_t)(x >> 8);
	d->b[3] = (uint8_t)x;
}

static inline void sdp_put_be64(sdp_be64 *d, uint64_t x)
{
	for (int i = 7; i >= 0; i--, x >>= 8)
		d->b[i] = (uint8_t)x;
}

enum sdp_mid {
	SDP_MID_HELLO = 0x00,
	SDP_MID_HELLO_ACK = 0x01,
	SDP_MID_DISCONN = 0x02,
	SDP_MID_ABORT_CONN = 0x03,
	SDP_MID_SEND_SM = 0x04,
	SDP_MID_RDMA_WR_COMPL = 0x05,
	SDP_MID_RDMA_RD_COMPL = 0x06,
	SDP_MID_MODE_CHANGE = 0x07,
	SDP_MID_SRC_AVAIL_CANCEL = 0x08,
	SDP_MID_SINK_AVAIL_CANCEL = 0x09,
	SDP_MID_SINK_CANCEL_ACK = 0x0A,
	SDP_MID_CH_RCV_BUF = 0x0B,
	SDP_MID_CH_RCV_BUF_ACK = 0x0C,
	SDP_MID_SUSP_COMM = 0x0D,
	SDP_MID_SUSP_COMM_ACK = 0x0E,
	SDP_MID_SINK_AVAIL = 0xFD,
	SDP_MID_SRC_AVAIL = 0xFE,
	SDP_MID_DATA = 0xFF,
};

/* BSDH flag masks (bits 3..7 reserved, must be zero). */
#define SDP_FLAG_OOB_PRES 0x01u
#define SDP_FLAG_OOB_PEND 0x02u
#define SDP_FLAG_REQ_PIPE 0x04u
#define SDP_FLAG_RESERVED 0xF8u

#define SDP_BSDH_SIZE 16u
#define SDP_HELLO_SIZE 92u	/* BSDH + HH, IB CM REQ private data */
#define SDP_HELLO_ACK_SIZE 196u	/* BSDH + HAH, IB CM REP private data */

/* Smallest receive buffer a Hello/HelloAck may announce: a BSDH plus at
 * least one payload byte, rounded to what any sane peer posts.  Anything
 * smaller cannot carry a Data message, so the connection could never move
 * data. */
#define SDP_MIN_RCV_SZ 32u

/* Protocol version we speak: 2.2 (as OFED; major must be 2). */
#define SDP_VERSION_MAJOR 2u
#define SDP_VERSION_MINOR 2u

/* ModeChange byte: bit 7 = send half of the receiver, bits 6..4 = mode. */
#define SDP_MCH_SEND_HALF 0x80u
#define SDP_MCH_MODE_MASK 0x70u
#define SDP_MCH_MODE_SHIFT 4
#define SDP_MCH_RESERVED 0x0Fu
enum sdp_mode {
	SDP_MODE_BUFFERED = 0,
	SDP_MODE_COMBINED = 1,
	SDP_MODE_PIPELINED = 2,
};

/* Wire layout of the BSDH (documentation + static size checks). */
struct sdp_wire_bsdh {
	uint8_t mid;
	uint8_t flags;
	sdp_be16 bufs;
	sdp_be32 len;
	sdp_be32 mseq;
	sdp_be32 mseq_ack;
} __attribute__((packed));

/* Host-order BSDH. */
struct sdp_bsdh {
	uint8_t mid;
	uint8_t flags;
	uint16_t bufs;		/* receive buffers the sender has posted */
	uint32_t len;		/* whole message: BSDH + ext header + payload */
	uint32_t mseq;		/* this message's sequence number */
	uint32_t mseq_ack;	/* last mseq the sender received from us */
};

/* Hello (carried in the CM connect request, never as a SEND). */
struct sdp_hello {
	struct sdp_bsdh bsdh;	/* mid HELLO, len 92, mseq 0 */
	uint8_t major, minor;	/* version */
	uint8_t ip_version;	/* 4 or 6 (high nibble of byte 17) */
	uint8_t caps;		/* low nibble of byte 17 (we send 0) */
	uint8_t max_adverts;	/* > 0 */
	uint32_t des_rem_rcv_sz;/* size we would like the peer's buffers to be */
	uint32_t local_rcv_sz;	/* our receive buffer size (max message to us) */
	uint16_t local_port;	/* active side's source port */
	uint8_t src_ip[16];	/* IPv6, or IPv4 in the last 4 bytes */
	uint8_t dst_ip[16];
};

/* HelloAck (carried in the CM connect reply). */
struct sdp_hello_ack {
	struct sdp_bsdh bsdh;	/* mid HELLO_ACK, len 196, mseq 0 */
	uint8_t major, minor;
	uint8_t max_adverts;	/* > 0 */
	uint32_t act_rcv_sz;	/* passive side's receive buffer size */
};

struct sdp_srcah {		/* SrcAvail header */
	uint32_t len;		/* bytes advertised */
	uint32_t rkey;
	uint64_t vaddr;
};

struct sdp_sinkah {		/* SinkAvail header */
	uint32_t len;
	uint32_t rkey;
	uint64_t vaddr;
	uint32_t non_discards;
};

/* A decoded SEND-carried message.  `payload` points into the decoded buffer. */
struct sdp_msg {
	struct sdp_bsdh bsdh;
	union {
		struct sdp_srcah srcah;		/* SRC_AVAIL */
		struct sdp_sinkah sinkah;	/* SINK_AVAIL */
		uint32_t len;		/* RDMA_WR_COMPL, RDMA_RD_COMPL,
					 * CH_RCV_BUF, CH_RCV_BUF_ACK */
		uint8_t mch;		/* MODE_CHANGE flags byte */
		uint64_t service_id;	/* SUSP_COMM */
	} h;
	const uint8_t *payload;	/* NULL when payload_len == 0 */
	uint32_t payload_len;
};

/* Size of BSDH + extended header for a MID, or 0 if the MID is unknown. */
uint32_t sdp_wire_hdr_size(uint8_t mid);
/* 1 if messages with this MID may carry payload. */
int sdp_wire_mid_has_payload(uint8_t mid);
const char *sdp_mid_name(uint8_t mid);

/* Decode a message received by SEND (`n` = receive completion byte count). */
int sdp_wire_decode(const void *buf, size_t n, struct sdp_msg *out);
/* Encode BSDH + extended header of `m` into buf (m->bsdh.len must already be
 * the full length incl. payload, payload is NOT copied).  Returns the header
 * size written, or -EINVAL / -ENOSPC. */
int sdp_wire_encode_hdr(const struct sdp_msg *m, void *buf, size_t cap);

int sdp_wire_decode_hello(const void *buf, size_t n, struct sdp_hello *out);
int sdp_wire_encode_hello(const struct sdp_hello *h, void *buf, size_t cap);
int sdp_wire_decode_hello_ack(const void *buf, size_t n,
			      struct sdp_hello_ack *out);
int sdp_wire_encode_hello_ack(const struct sdp_hello_ack *h, void *buf,
			      size_t cap);

/* Serial-number arithmetic on 32-bit message sequence numbers. */
static inline int sdp_seq_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline int sdp_seq_after_eq(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) >= 0;
}

/* Credits available to us given the peer's header (annex §4.2):
 * peer_bufs - (messages we sent that the peer had not yet received). */
static inline int32_t sdp_credits_from_peer(uint16_t peer_bufs,
					    uint32_t peer_mseq_ack,
					    uint32_t our_next_mseq)
{
	return (int32_t)peer_bufs - (int32_t)((our_next_mseq - 1u) - peer_mseq_ack);
}

#endif /* SDP_WIRE_H */
