// SPDX-License-Identifier: MIT
/*
 * destmemo.c — see destmemo.h.
 *
 * A small table of destinations, least recently used out: a program talks
 * to few peers, and a destination that falls out only starts its run
 * again (its next connections go over SDP until a run or a refusal is
 * seen anew).
 */
#include "policy/destmemo.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>


#define SL_ENTRIES 64

struct sl_key {
	uint8_t v6;
	uint8_t addr[16];
	uint16_t port;
};

struct sl_entry {
	struct sl_key key;
	bool used;
	bool takes_tcp;		/* its listener's last word */
	uint32_t run;		/* consecutive short connections */
	uint64_t tcp_until_ns;	/* short-lived: over TCP until then */
	uint64_t no_sdp_until_ns; /* no SDP listener: over TCP until then */
	uint64_t last_ns;	/* least recently used goes */
};

static struct {
	pthread_mutex_t lock;
	uint32_t run;		/* 0: off */
	uint64_t life_ns;
	uint64_t refused_ns;	/* 0: off */
	struct sl_entry e[SL_ENTRIES];
} SL = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.run = SDP_SHORT_RUN, .life_ns = SDP_SHORT_LIFE_MS * 1000000ull,
	.refused_ns = SDP_REFUSED_HOLD_MS * 1000000ull,
};

#define HOLD_NS (SDP_SHORT_HOLD_MS * 1000000ull)

void sdp_destmemo_configure(uint32_t run, uint32_t life_ms,
			    uint32_t refused_ms)
{
	pthread_mutex_lock(&SL.lock);
	SL.run = run;
	SL.life_ns = life_ms * 1000000ull;
	SL.refused_ns = refused_ms * 1000000ull;
	pthread_mutex_unlock(&SL.lock);
}

void sdp_destmemo_fork_prepare(void)
{
	pthread_mutex_lock(&SL.lock);
}

void sdp_destmemo_fork_parent(void)
{
	pthread_mutex_unlock(&SL.lock);
}

void sdp_destmemo_fork_child(void)
{
	pthread_mutex_init(&SL.lock, NULL);
}

/* An IPv4-mapped IPv6 address is the IPv4 destination. */
static bool sl_key_of(const struct sockaddr *sa, socklen_t len,
		      struct sl_key *k)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					    0xff, 0xff };

	memset(k, 0, sizeof(*k));
	if (!sa)
		return false;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;

		memcpy(k->addr, &in->sin_addr, 4);
		k->port = in->sin_port;
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		if (!memcmp(&in6->sin6_addr, mapped, sizeof(mapped))) {
			memcpy(k->addr, (const uint8_t *)&in6->sin6_addr + 12,
			       4);
		} else {
			k->v6 = 1;
			memcpy(k->addr, &in6->sin6_addr, 16);
		}
		k->port = in6->sin6_port;
		return true;
	}
	return false;
}

/* The key of `dst`, with the table locked; false (not locked) when `dst`
 * is not an IP address. */
static bool sl_lock_key(const struct sockaddr *dst, socklen_t len,
			struct sl_key *k)
{
	if (!sl_key_of(dst, len, k))
		return false;
	pthread_mutex_lock(&SL.lock);
	return true;
}

static struct sl_entry *sl_find(const struct sl_key *k)
{
	for (int i = 0; i < SL_ENTRIES; i++)
		if (SL.e[i].used && !memcmp(&SL.e[i].key, k, sizeof(*k)))
			return &SL.e[i];
	return NULL;
}

static struct sl_entry *sl_insert(const struct sl_key *k)
{
	struct sl_entry *victim = &SL.e[0];

	for (int i = 0; i < SL_ENTRIES; i++) {
		if (!SL.e[i].used) {
			victim = &SL.e[i];
			break;
		}
		if (SL.e[i].last_ns < victim->last_ns)
			victim = &SL.e[i];
	}
	memset(victim, 0, sizeof(*victim));
	victim->key = *k;
	victim->used = true;
	return victim;
}

bool sdp_destmemo_closed(const struct sockaddr *dst, socklen_t len,
			 uint64_t life_ns, uint64_t bytes,
			 bool peer_takes_tcp, uint64_t now_ns)
{
	bool is_short, hold = false;
	struct sl_entry *e;
	struct sl_key k;

	if (!sl_lock_key(dst, len, &k))
		return false;
	if (!SL.run) {
		pthread_mutex_unlock(&SL.lock);
		return false;
	}
	is_short = life_ns < SL.life_ns && bytes < SDP_SHORT_BYTES;
	e = sl_find(&k);
	if (!e && is_short && peer_takes_tcp)
		e = sl_insert(&k);	/* a long one needs no entry */
	if (e) {
		e->last_ns = now_ns;
		e->takes_tcp = peer_takes_tcp;
		if (!is_short) {
			e->run = 0;
			e->tcp_until_ns = 0;
		} else if (e->run < UINT32_MAX) {
			e->run++;
		}
		if (e->takes_tcp && e->run >= SL.run &&
		    e->tcp_until_ns <= now_ns) {
			e->tcp_until_ns = now_ns + HOLD_NS;
			hold = true;
		}
	}
	pthread_mutex_unlock(&SL.lock);
	return hold;
}

void sdp_destmemo_refused(const struct sockaddr *dst, socklen_t len,
			  uint64_t now_ns)
{
	struct sl_entry *e;
	struct sl_key k;

	if (!sl_lock_key(dst, len, &k))
		return;
	if (SL.refused_ns) {
		e = sl_find(&k);
		if (!e)
			e = sl_insert(&k);
		e->last_ns = now_ns;
		e->no_sdp_until_ns = now_ns + SL.refused_ns;
	}
	pthread_mutex_unlock(&SL.lock);
}

void sdp_destmemo_tcp_refused(const struct sockaddr *dst, socklen_t len)
{
	struct sl_entry *e;
	struct sl_key k;

	if (!sl_lock_key(dst, len, &k))
		return;
	e = sl_find(&k);
	if (e)
		e->no_sdp_until_ns = 0;
	pthread_mutex_unlock(&SL.lock);
}

bool sdp_destmemo_prefer_tcp(const struct sockaddr *dst, socklen_t len,
			     uint64_t now_ns, char *why, size_t why_len)
{
	enum { SDP_OK, SHORT_LIVED, NO_LISTENER } rule = SDP_OK;
	struct sl_entry *e;
	struct sl_key k;
	uint32_t run = 0;
	uint64_t life_ms = 0, hold_ms = 0;

	if (!sl_lock_key(dst, len, &k))
		return false;
	e = sl_find(&k);
	if (e && SL.refused_ns && now_ns < e->no_sdp_until_ns) {
		rule = NO_LISTENER;
		hold_ms = SL.refused_ns / 1000000;
	} else if (e && SL.run && e->takes_tcp && now_ns < e->tcp_until_ns) {
		rule = SHORT_LIVED;
		run = e->run;
		life_ms = SL.life_ns / 1000000;
	}
	if (rule != SDP_OK)
		e->last_ns = now_ns;
	pthread_mutex_unlock(&SL.lock);
	if (rule == SHORT_LIVED && why && why_len)
		snprintf(why, why_len,
			 "short-lived: the last %u SDP connections here lived "
			 "< %llu ms and moved < %u KiB", run,
			 (unsigned long long)life_ms, SDP_SHORT_BYTES / 1024);
	else if (rule == NO_LISTENER && why && why_len)
		snprintf(why, why_len,
			 "no SDP listener at the peer (a TCP one answered "
			 "within the last %llu ms)",
			 (unsigned long long)hold_ms);
	return rule != SDP_OK;
}

void sdp_destmemo_reset(void)
{
	pthread_mutex_lock(&SL.lock);
	memset(SL.e, 0, sizeof(SL.e));
	pthread_mutex_unlock(&SL.lock);
}
