/* SPDX-License-Identifier: MIT */
/*
 * fuzz_msg.c — libFuzzer target for sdp_wire_decode / sdp_wire_encode_hdr.
 *
 * Invariants (abort() when broken so the fuzzer records the input):
 *  1. decode never reads outside [data, data + size) (ASan checks that);
 *  2. whatever decodes re-encodes to the same header bytes, except the
 *     ModeChange reserved bytes 17-19, which decode ignores and encode
 *     zeroes; payload is exactly the bytes after the header;
 *  3. whatever the encoder accepts, the decoder accepts and reads back
 *     unchanged: we never emit a message we would refuse.
 * Deterministic: no clock, no RNG, no global state.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_decoded(const uint8_t *data, size_t size,
			  const struct sdp_msg *m)
{
	uint8_t out[64];
	uint32_t hdr = sdp_wire_hdr_size(m->bsdh.mid);
	int ret;

	if (hdr < SDP_BSDH_SIZE || hdr > sizeof(out) || hdr > size)
		abort();
	if (m->bsdh.len != size || m->payload_len != size - hdr)
		abort();
	if (m->payload_len ? m->payload != data + hdr : m->payload != NULL)
		abort();

	memset(out, 0xA5, sizeof(out));
	ret = sdp_wire_encode_hdr(m, out, sizeof(out));
	if (ret != (int)hdr)
		abort();
	if (m->bsdh.mid == SDP_MID_MODE_CHANGE) {
		if (memcmp(out, data, 17) || out[17] || out[18] || out[19])
			abort();
	} else if (memcmp(out, data, hdr)) {
		abort();
	}
	/* A buffer one byte short must be refused, not overrun. */
	if (sdp_wire_encode_hdr(m, out, hdr - 1) != -ENOSPC)
		abort();
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* Build a host struct straight from fuzz bytes (layout irrelevant) and,
 * if the encoder takes it, check the decoder takes the result. */
static void check_encoder(const uint8_t *data, size_t size)
{
	uint8_t buf[64 + 256];
	struct sdp_msg m, d;
	int hdr;

	if (size < 40)
		return;
	memset(&m, 0, sizeof(m));
	m.bsdh.mid = data[0];
	m.bsdh.flags = data[1];
	m.bsdh.bufs = (uint16_t)(data[2] << 8 | data[3]);
	/* Keep Len near the header size so payload fits in buf. */
	m.bsdh.len = sdp_wire_hdr_size(data[0]) + (data[4] % 8 == 0 ? data[5] : 0)
		     - (data[6] == 0xFF ? 1 : 0);
	m.bsdh.mseq = rd32(data + 8);
	m.bsdh.mseq_ack = rd32(data + 12);
	m.h.sinkah.len = rd32(data + 16);
	m.h.sinkah.rkey = rd32(data + 20);
	m.h.sinkah.vaddr = (uint64_t)rd32(data + 24) << 32 | rd32(data + 28);
	m.h.sinkah.non_discards = rd32(data + 32);
	if (m.bsdh.mid == SDP_MID_MODE_CHANGE)
		m.h.mch = data[36];
	else if (m.bsdh.mid == SDP_MID_SUSP_COMM)
		m.h.service_id = (uint64_t)rd32(data + 28) << 32 | rd32(data + 32);
	else if (m.bsdh.mid != SDP_MID_SRC_AVAIL && m.bsdh.mid != SDP_MID_SINK_AVAIL)
		m.h.len = rd32(data + 36);

	hdr = sdp_wire_encode_hdr(&m, buf, data[7] % 2 ? sizeof(buf) : data[7]);
	if (hdr < 0)
		return;
	if (m.bsdh.len > sizeof(buf) || (uint32_t)hdr > m.bsdh.len)
		abort();
	memset(buf + hdr, 0x5A, m.bsdh.len - (uint32_t)hdr);
	if (sdp_wire_decode(buf, m.bsdh.len, &d) != 0)
		abort();
	if (memcmp(&d.bsdh, &m.bsdh, sizeof(d.bsdh)))
		abort();
	check_decoded(buf, m.bsdh.len, &d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sdp_msg m;

	if (size)
		(void)sdp_mid_name(data[0]);
	if (sdp_wire_decode(data, size, &m) == 0)
		check_decoded(data, size, &m);
	check_encoder(data, size);
	return 0;
}
