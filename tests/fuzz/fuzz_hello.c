/* SPDX-License-Identifier: MIT */
/*
 * fuzz_hello.c — libFuzzer target for the Hello / HelloAck codecs (IB CM
 * REQ/REP private data, docs/PROTOCOL.md §3.1-§3.2).
 *
 * Invariants (abort() when broken):
 *  1. decoders never read outside the input (ASan);
 *  2. a decoded Hello/HelloAck re-encodes to the same bytes in every
 *     non-reserved position, and to zeros in every reserved one (decode
 *     ignores reserved bytes, encode clears them).
 * Deterministic: no clock, no RNG, no global state.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reserved byte ranges [lo, hi) of each message. */
struct range {
	size_t lo, hi;
};

static const struct range hello_rsvd[] = { { 18, 19 }, { 30, 32 }, { 64, 92 } };
static const struct range hello_ack_rsvd[] = { { 17, 19 }, { 24, 196 } };

static int is_reserved(const struct range *r, size_t nr, size_t off)
{
	for (size_t i = 0; i < nr; i++)
		if (off >= r[i].lo && off < r[i].hi)
			return 1;
	return 0;
}

static void compare(const uint8_t *in, const uint8_t *out, size_t n,
		    const struct range *r, size_t nr)
{
	for (size_t i = 0; i < n; i++) {
		if (is_reserved(r, nr, i) ? out[i] != 0 : out[i] != in[i])
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[SDP_HELLO_ACK_SIZE + 8];
	struct sdp_hello h;
	struct sdp_hello_ack a;

	if (sdp_wire_decode_hello(data, size, &h) == 0) {
		memset(out, 0xA5, sizeof(out));
		if (sdp_wire_encode_hello(&h, out, sizeof(out)) !=
		    (int)SDP_HELLO_SIZE)
			abort();
		compare(data, out, SDP_HELLO_SIZE, hello_rsvd,
			sizeof(hello_rsvd) / sizeof(hello_rsvd[0]));
		if (out[SDP_HELLO_SIZE] != 0xA5)
			abort();
		if (sdp_wire_encode_hello(&h, out, SDP_HELLO_SIZE - 1) >= 0)
			abort();
	}
	if (sdp_wire_decode_hello_ack(data, size, &a) == 0) {
		memset(out, 0xA5, sizeof(out));
		if (sdp_wire_encode_hello_ack(&a, out, sizeof(out)) !=
		    (int)SDP_HELLO_ACK_SIZE)
			abort();
		compare(data, out, SDP_HELLO_ACK_SIZE, hello_ack_rsvd,
			sizeof(hello_ack_rsvd) / sizeof(hello_ack_rsvd[0]));
		if (out[SDP_HELLO_ACK_SIZE] != 0xA5)
			abort();
		if (sdp_wire_encode_hello_ack(&a, out, SDP_HELLO_ACK_SIZE - 1) >= 0)
			abort();
	}
	return 0;
}
