/* SPDX-License-Identifier: MIT */
/*
 * wire_internal.h — private to src/wire: the bounds-checked byte cursor and
 * the BSDH codec shared by wire.c (SEND-carried messages) and wire_hello.c
 * (Hello/HelloAck, carried in CM private data).
 *
 * The cursor has a sticky error: once a read or write would cross `end`, it
 * stops touching memory, reads yield 0 and `err` stays set.  Callers check
 * sizes up front (so a cursor error is a bug, not a peer fault) and then
 * check `err` once at the end, which keeps the codecs free of per-field
 * error plumbing while still never reading or writing out of bounds.
 */
#ifndef SDP_WIRE_INTERNAL_H
#define SDP_WIRE_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/wire.h"

struct sdp_rd {
	const uint8_t *p;
	const uint8_t *end;
	int err;		/* 0, or -EBADMSG once an access overran */
};

struct sdp_wr {
	uint8_t *p;
	uint8_t *end;
	int err;		/* 0, or -ENOSPC once an access overran */
};

static inline void sdp__rd_init(struct sdp_rd *r, const void *buf, size_t n)
{
	r->p = buf;
	r->end = r->p + n;
	r->err = 0;
}

static inline void sdp__wr_init(struct sdp_wr *w, void *buf, size_t cap)
{
	w->p = buf;
	w->end = w->p + cap;
	w->err = 0;
}

/* Returns a pointer to the next n readable bytes, or NULL (and sets err). */
static inline const uint8_t *sdp__rd_take(struct sdp_rd *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->err || (size_t)(r->end - r->p) < n) {
		r->err = -EBADMSG;
		return NULL;
	}
	r->p += n;
	return p;
}

static inline uint8_t *sdp__wr_take(struct sdp_wr *w, size_t n)
{
	uint8_t *p = w->p;

	if (w->err || (size_t)(w->end - w->p) < n) {
		w->err = -ENOSPC;
		return NULL;
	}
	w->p += n;
	return p;
}

static inline uint8_t sdp__get_u8(struct sdp_rd *r)
{
	const uint8_t *p = sdp__rd_take(r, 1);

	return p ? p[0] : 0;
}

static inline uint16_t sdp__get_u16(struct sdp_rd *r)
{
	const uint8_t *p = sdp__rd_take(r, 2);
	sdp_be16 v;

	if (!p)
		return 0;
	memcpy(v.b, p, 2);
	return sdp_get_be16(v);
}

static inline uint32_t sdp__get_u32(struct sdp_rd *r)
{
	const uint8_t *p = sdp__rd_take(r, 4);
	sdp_be32 v;

	if (!p)
		return 0;
	memcpy(v.b, p, 4);
	return sdp_get_be32(v);
}

static inline uint64_t sdp__get_u64(struct sdp_rd *r)
{
	const uint8_t *p = sdp__rd_take(r, 8);
	sdp_be64 v;

	if (!p)
		return 0;
	memcpy(v.b, p, 8);
	return sdp_get_be64(v);
}

static inline void sdp__get_bytes(struct sdp_rd *r, void *dst, size_t n)
{
	const uint8_t *p = sdp__rd_take(r, n);

	if (p)
		memcpy(dst, p, n);
	else
		memset(dst, 0, n);
}

/* Reserved bytes: skipped on decode (be liberal), zeroed on encode. */
static inline void sdp__skip(struct sdp_rd *r, size_t n)
{
	(void)sdp__rd_take(r, n);
}

static inline void sdp__put_u8(struct sdp_wr *w, uint8_t x)
{
	uint8_t *p = sdp__wr_take(w, 1);

	if (p)
		p[0] = x;
}

static inline void sdp__put_u16(struct sdp_wr *w, uint16_t x)
{
	uint8_t *p = sdp__wr_take(w, 2);
	sdp_be16 v;

	if (!p)
		return;
	sdp_put_be16(&v, x);
	memcpy(p, v.b, 2);
}

static inline void sdp__put_u32(struct sdp_wr *w, uint32_t x)
{
	uint8_t *p = sdp__wr_take(w, 4);
	sdp_be32 v;

	if (!p)
		return;
	sdp_put_be32(&v, x);
	memcpy(p, v.b, 4);
}

static inline void sdp__put_u64(struct sdp_wr *w, uint64_t x)
{
	uint8_t *p = sdp__wr_take(w, 8);
	sdp_be64 v;

	if (!p)
		return;
	sdp_put_be64(&v, x);
	memcpy(p, v.b, 8);
}

static inline void sdp__put_bytes(struct sdp_wr *w, const void *src, size_t n)
{
	uint8_t *p = sdp__wr_take(w, n);

	if (p)
		memcpy(p, src, n);
}

static inline void sdp__put_zero(struct sdp_wr *w, size_t n)
{
	uint8_t *p = sdp__wr_take(w, n);

	if (p)
		memset(p, 0, n);
}

/* BSDH (annex BSDH, 16 bytes at offset 0): field order = struct sdp_wire_bsdh. */
static inline void sdp__bsdh_get(struct sdp_rd *r, struct sdp_bsdh *h)
{
	h->mid = sdp__get_u8(r);
	h->flags = sdp__get_u8(r);
	h->bufs = sdp__get_u16(r);
	h->len = sdp__get_u32(r);
	h->mseq = sdp__get_u32(r);
	h->mseq_ack = sdp__get_u32(r);
}

static inline void sdp__bsdh_put(struct sdp_wr *w, const struct sdp_bsdh *h)
{
	sdp__put_u8(w, h->mid);
	sdp__put_u8(w, h->flags);
	sdp__put_u16(w, h->bufs);
	sdp__put_u32(w, h->len);
	sdp__put_u32(w, h->mseq);
	sdp__put_u32(w, h->mseq_ack);
}

#endif /* SDP_WIRE_INTERNAL_H */
