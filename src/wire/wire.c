/* SPDX-License-Identifier: MIT */
/*
 * wire.c — the BSDH and every SEND-carried SDP message: the per-MID table,
 * decode (validation of everything that does not need connection state) and
 * header encode.  Hello/HelloAck live in wire_hello.c.
 *
 * Wire facts (MIDs, header layouts, flag bits) follow the IBTA SDP annex as
 * reconstructed in docs/PROTOCOL.md §1-§3; all multi-byte fields are big
 * endian.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/wire.h"
#include "wire/wire_internal.h"

/*
 * Wire layouts.  Packed, explicit big-endian types, no bitfields; they are
 * the documentation of each header and the source of the sizes in the MID
 * table, while the codecs below walk the bytes with a bounds-checked cursor.
 */

/* RWCH (RdmaWrCompl), RRCH (RdmaRdCompl), CRBH (ChRcvBuf), CRBAH
 * (ChRcvBufAck): one u32 after the BSDH. */
struct sdp_wire_u32hdr {
	struct sdp_wire_bsdh bsdh;
	sdp_be32 len;
} __attribute__((packed));

/* SrcAH: advertised source buffer; inline payload may follow at 32. */
struct sdp_wire_srcah {
	struct sdp_wire_bsdh bsdh;
	sdp_be32 len;		/* whole advertised buffer, incl. inline bytes */
	sdp_be32 rkey;
	sdp_be64 vaddr;		/* opaque to the sink (OFED puts an offset) */
} __attribute__((packed));

/* SinkAH: advertised sink buffer; payload (reverse-direction data) may
 * follow at 36. */
struct sdp_wire_sinkah {
	struct sdp_wire_bsdh bsdh;
	sdp_be32 len;
	sdp_be32 rkey;
	sdp_be64 vaddr;
	sdp_be32 non_discards;	/* data messages seen when advertised */
} __attribute__((packed));

/* MCH: one flags byte (send-half bit, mode code) and 3 reserved bytes. */
struct sdp_wire_mch {
	struct sdp_wire_bsdh bsdh;
	uint8_t flags;
	uint8_t reserved[3];
} __attribute__((packed));

/* SCH (SuspComm): the new service ID. */
struct sdp_wire_sch {
	struct sdp_wire_bsdh bsdh;
	sdp_be64 service_id;
} __attribute__((packed));

_Static_assert(sizeof(struct sdp_wire_bsdh) == SDP_BSDH_SIZE,
	       "BSDH must be 16 bytes: fix struct sdp_wire_bsdh");
_Static_assert(offsetof(struct sdp_wire_bsdh, bufs) == 2 &&
	       offsetof(struct sdp_wire_bsdh, len) == 4 &&
	       offsetof(struct sdp_wire_bsdh, mseq) == 8 &&
	       offsetof(struct sdp_wire_bsdh, mseq_ack) == 12,
	       "BSDH field offsets: mid 0, flags 1, bufs 2, len 4, mseq 8, mseq_ack 12");
_Static_assert(sizeof(struct sdp_wire_u32hdr) == 20,
	       "RWCH/RRCH/CRBH/CRBAH are 4 bytes after the BSDH");
_Static_assert(offsetof(struct sdp_wire_u32hdr, len) == 16,
	       "u32 extended headers start at offset 16");
_Static_assert(sizeof(struct sdp_wire_srcah) == 32,
	       "SrcAH is 16 bytes after the BSDH");
_Static_assert(offsetof(struct sdp_wire_srcah, rkey) == 20 &&
	       offsetof(struct sdp_wire_srcah, vaddr) == 24,
	       "SrcAH: len 16, rkey 20, vaddr 24");
_Static_assert(sizeof(struct sdp_wire_sinkah) == 36,
	       "SinkAH is 20 bytes after the BSDH");
_Static_assert(offsetof(struct sdp_wire_sinkah, vaddr) == 24 &&
	       offsetof(struct sdp_wire_sinkah, non_discards) == 32,
	       "SinkAH: len 16, rkey 20, vaddr 24, non_discards 32");
_Static_assert(sizeof(struct sdp_wire_mch) == 20,
	       "MCH is 4 bytes after the BSDH");
_Static_assert(offsetof(struct sdp_wire_mch, flags) == 16,
	       "MCH flags byte is at offset 16");
_Static_assert(sizeof(struct sdp_wire_sch) == 24,
	       "SCH is 8 bytes after the BSDH");
_Static_assert(SDP_HELLO_SIZE <= UINT8_MAX && SDP_HELLO_ACK_SIZE <= UINT8_MAX,
	       "sdp_mid_info.hdr_size is a uint8_t");

/*
 * One row per MID.  hdr_size == 0 marks every MID the annex does not define
 * (0x0F-0x3F and 0x80-0xFC reserved, 0x40-0x7F experimental): we refuse
 * them rather than guess a length.
 */
struct sdp_mid_info {
	const char *name;
	uint8_t hdr_size;	/* BSDH + extended header */
	uint8_t payload;	/* may carry ULP payload after the header */
	uint8_t send;		/* may travel as an RC SEND */
};

#define BSDH_ONLY SDP_BSDH_SIZE

static const struct sdp_mid_info sdp_mid_table[256] = {
	/* Hello/HelloAck travel only in IB CM REQ/REP private data. */
	[SDP_MID_HELLO] = { "Hello", SDP_HELLO_SIZE, 0, 0 },
	[SDP_MID_HELLO_ACK] = { "HelloAck", SDP_HELLO_ACK_SIZE, 0, 0 },
	[SDP_MID_DISCONN] = { "DisConn", BSDH_ONLY, 0, 1 },
	[SDP_MID_ABORT_CONN] = { "AbortConn", BSDH_ONLY, 0, 1 },
	[SDP_MID_SEND_SM] = { "SendSm", BSDH_ONLY, 0, 1 },
	[SDP_MID_RDMA_WR_COMPL] = { "RdmaWrCompl",
				    sizeof(struct sdp_wire_u32hdr), 0, 1 },
	[SDP_MID_RDMA_RD_COMPL] = { "RdmaRdCompl",
				    sizeof(struct sdp_wire_u32hdr), 0, 1 },
	[SDP_MID_MODE_CHANGE] = { "ModeChange",
				  sizeof(struct sdp_wire_mch), 0, 1 },
	[SDP_MID_SRC_AVAIL_CANCEL] = { "SrcAvailCancel", BSDH_ONLY, 0, 1 },
	[SDP_MID_SINK_AVAIL_CANCEL] = { "SinkAvailCancel", BSDH_ONLY, 0, 1 },
	[SDP_MID_SINK_CANCEL_ACK] = { "SinkCancelAck", BSDH_ONLY, 0, 1 },
	[SDP_MID_CH_RCV_BUF] = { "ChRcvBuf",
				 sizeof(struct sdp_wire_u32hdr), 0, 1 },
	[SDP_MID_CH_RCV_BUF_ACK] = { "ChRcvBufAck",
				     sizeof(struct sdp_wire_u32hdr), 0, 1 },
	[SDP_MID_SUSP_COMM] = { "SuspComm", sizeof(struct sdp_wire_sch), 0, 1 },
	[SDP_MID_SUSP_COMM_ACK] = { "SuspCommAck", BSDH_ONLY, 0, 1 },
	/* Payload of a SinkAvail is ordinary data flowing the other way. */
	[SDP_MID_SINK_AVAIL] = { "SinkAvail",
				 sizeof(struct sdp_wire_sinkah), 1, 1 },
	/* Inline payload: first bytes of the advertised buffer (Combined). */
	[SDP_MID_SRC_AVAIL] = { "SrcAvail", sizeof(struct sdp_wire_srcah), 1, 1 },
	/* Zero-length Data is a pure credit update. */
	[SDP_MID_DATA] = { "Data", BSDH_ONLY, 1, 1 },
};

uint32_t sdp_wire_hdr_size(uint8_t mid)
{
	return sdp_mid_table[mid].hdr_size;
}

int sdp_wire_mid_has_payload(uint8_t mid)
{
	return sdp_mid_table[mid].payload;
}

const char *sdp_mid_name(uint8_t mid)
{
	const char *name = sdp_mid_table[mid].name;

	return name ? name : "unknown";
}

/* MCH flags byte (annex MCH): bits 3..0 reserved, mode code in 6..4 is one
 * of Buffered/Combined/Pipelined.  Bit 7 (send half) is free. */
static int sdp_mch_valid(uint8_t mch)
{
	if (mch & SDP_MCH_RESERVED)
		return 0;
	return ((mch & SDP_MCH_MODE_MASK) >> SDP_MCH_MODE_SHIFT) <=
	       SDP_MODE_PIPELINED;
}

/*
 * Everything a SEND-carried message must satisfy, whatever the state.
 * Shared by decode (peer fault) and encode (our bug) so the encoder can
 * never emit a message our own decoder would refuse.
 */
static int sdp_msg_check(const struct sdp_bsdh *b, const struct sdp_mid_info *mi,
			 uint8_t mch)
{
	uint32_t payload_len = b->len - mi->hdr_size;

	if (b->flags & SDP_FLAG_RESERVED)
		return -EBADMSG;
	if (b->len < mi->hdr_size)
		return -EBADMSG;
	if (payload_len && !mi->payload)
		return -EBADMSG;
	/* CA4-7: OOB_PRES names the last payload byte, so it needs one. */
	if ((b->flags & SDP_FLAG_OOB_PRES) && !payload_len)
		return -EBADMSG;
	if (b->mid == SDP_MID_MODE_CHANGE && !sdp_mch_valid(mch))
		return -EBADMSG;
	return 0;
}

/*
 * Decode one message received by SEND.  `n` is the receive completion's
 * byte count: BSDH.Len must equal it exactly (gen1 does the same), which is
 * what makes message boundaries trustworthy.
 */
int sdp_wire_decode(const void *buf, size_t n, struct sdp_msg *out)
{
	const struct sdp_mid_info *mi;
	struct sdp_bsdh *b = &out->bsdh;
	struct sdp_rd r;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!buf || n < SDP_BSDH_SIZE)
		return -EBADMSG;

	sdp__rd_init(&r, buf, n);
	sdp__bsdh_get(&r, b);
	if ((size_t)b->len != n)
		return -EBADMSG;

	mi = &sdp_mid_table[b->mid];
	if (!mi->hdr_size || !mi->send)
		return -EPROTO;	/* reserved/experimental MID, or Hello* */
	if (n < mi->hdr_size)
		return -EBADMSG;

	switch (b->mid) {
	case SDP_MID_RDMA_WR_COMPL:
	case SDP_MID_RDMA_RD_COMPL:
	case SDP_MID_CH_RCV_BUF:
	case SDP_MID_CH_RCV_BUF_ACK:
		out->h.len = sdp__get_u32(&r);
		break;
	case SDP_MID_MODE_CHANGE:
		out->h.mch = sdp__get_u8(&r);
		sdp__skip(&r, 3);	/* reserved: ignored */
		break;
	case SDP_MID_SUSP_COMM:
		out->h.service_id = sdp__get_u64(&r);
		break;
	case SDP_MID_SRC_AVAIL:
		out->h.srcah.len = sdp__get_u32(&r);
		out->h.srcah.rkey = sdp__get_u32(&r);
		out->h.srcah.vaddr = sdp__get_u64(&r);
		break;
	case SDP_MID_SINK_AVAIL:
		out->h.sinkah.len = sdp__get_u32(&r);
		out->h.sinkah.rkey = sdp__get_u32(&r);
		out->h.sinkah.vaddr = sdp__get_u64(&r);
		out->h.sinkah.non_discards = sdp__get_u32(&r);
		break;
	default:		/* BSDH only */
		break;
	}
	if (r.err)
		return r.err;	/* unreachable: n >= hdr_size checked */

	ret = sdp_msg_check(b, mi, out->h.mch);
	if (ret)
		return ret;

	out->payload_len = b->len - mi->hdr_size;
	out->payload = out->payload_len ? r.p : NULL;
	return 0;
}

int sdp_wire_encode_hdr(const struct sdp_msg *m, void *buf, size_t cap)
{
	const struct sdp_mid_info *mi;
	const struct sdp_bsdh *b;
	struct sdp_wr w;

	if (!m || !buf)
		return -EINVAL;
	b = &m->bsdh;
	mi = &sdp_mid_table[b->mid];
	if (!mi->hdr_size || !mi->send)
		return -EINVAL;
	if (sdp_msg_check(b, mi, b->mid == SDP_MID_MODE_CHANGE ? m->h.mch : 0))
		return -EINVAL;
	if (cap < mi->hdr_size)
		return -ENOSPC;

	sdp__wr_init(&w, buf, cap);
	sdp__bsdh_put(&w, b);
	switch (b->mid) {
	case SDP_MID_RDMA_WR_COMPL:
	case SDP_MID_RDMA_RD_COMPL:
	case SDP_MID_CH_RCV_BUF:
	case SDP_MID_CH_RCV_BUF_ACK:
		sdp__put_u32(&w, m->h.len);
		break;
	case SDP_MID_MODE_CHANGE:
		sdp__put_u8(&w, m->h.mch);
		sdp__put_zero(&w, 3);
		break;
	case SDP_MID_SUSP_COMM:
		sdp__put_u64(&w, m->h.service_id);
		break;
	case SDP_MID_SRC_AVAIL:
		sdp__put_u32(&w, m->h.srcah.len);
		sdp__put_u32(&w, m->h.srcah.rkey);
		sdp__put_u64(&w, m->h.srcah.vaddr);
		break;
	case SDP_MID_SINK_AVAIL:
		sdp__put_u32(&w, m->h.sinkah.len);
		sdp__put_u32(&w, m->h.sinkah.rkey);
		sdp__put_u64(&w, m->h.sinkah.vaddr);
		sdp__put_u32(&w, m->h.sinkah.non_discards);
		break;
	default:
		break;
	}
	if (w.err)
		return w.err;	/* unreachable: cap >= hdr_size checked */
	return (int)mi->hdr_size;
}
