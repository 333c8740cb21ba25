/* SPDX-License-Identifier: MIT */
/*
 * test_destmemo.c — unit tests of what the switch remembers about
 * destinations (policy/destmemo.c), with time driven by the test.  The
 * adaptive fallback for short-lived connections: when a run starts a hold,
 * how long it lasts, what ends a run, that a listener without TCP never
 * gets one, and that destinations are told apart.  The no-SDP-listener
 * hold: its length, that a TCP refusal ends it, and its setting.
 *
 * Output is TAP; exit 0 if all pass, 1 otherwise.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "policy/destmemo.h"
#include "unit_tap.h"

#define MS 1000000ull

static struct sockaddr_in v4(const char *ip, uint16_t port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

#define SA(a) ((const struct sockaddr *)&(a)), sizeof(a)

static void fresh(void)
{
	sdp_destmemo_reset();
	sdp_destmemo_configure(SDP_SHORT_RUN, SDP_SHORT_LIFE_MS,
			       SDP_REFUSED_HOLD_MS);
}

/* `n` short connections to `a`, one per millisecond from *t; whether the
 * last one started a hold. */
static bool shorts(const struct sockaddr_in *a, int n, uint64_t *t,
		   bool takes_tcp)
{
	bool hold = false;

	for (int i = 0; i < n; i++) {
		*t += MS;
		hold = sdp_destmemo_closed((const struct sockaddr *)a,
					   sizeof(*a), MS / 2, 1500,
					   takes_tcp, *t);
	}
	return hold;
}

static void test_run_starts_hold(void)
{
	struct sockaddr_in a = v4("127.0.0.1", 8080);
	uint64_t t = 1000 * MS;
	char why[128] = "";

	fresh();
	CHECK(!shorts(&a, SDP_SHORT_RUN - 1, &t, true));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, why, sizeof(why)));
	CHECK(shorts(&a, 1, &t, true));
	CHECK(sdp_destmemo_prefer_tcp(SA(a), t, why, sizeof(why)));
	CHECK(strstr(why, "short-lived") != NULL);
	/* The hold lasts SDP_SHORT_HOLD_MS, then SDP is tried again. */
	CHECK(sdp_destmemo_prefer_tcp(SA(a), t + SDP_SHORT_HOLD_MS * MS - 1,
				      NULL, 0));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t + SDP_SHORT_HOLD_MS * MS,
				       NULL, 0));
}

static void test_probe_after_hold(void)
{
	struct sockaddr_in a = v4("127.0.0.1", 8080);
	uint64_t t = 1000 * MS;

	fresh();
	CHECK(shorts(&a, SDP_SHORT_RUN, &t, true));
	t += SDP_SHORT_HOLD_MS * MS;
	/* The probe over SDP was short again: a new hold at once. */
	CHECK(shorts(&a, 1, &t, true));
	CHECK(sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
	/* A probe that lives long ends the run: SDP from then on. */
	t += SDP_SHORT_HOLD_MS * MS;
	CHECK(!sdp_destmemo_closed(SA(a), 50 * MS, 100, true, t));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
	CHECK(!shorts(&a, SDP_SHORT_RUN - 1, &t, true));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
}

static void test_long_or_big_ends_run(void)
{
	struct sockaddr_in a = v4("10.1.2.3", 443);
	uint64_t t = 1000 * MS;

	fresh();
	CHECK(!shorts(&a, SDP_SHORT_RUN - 1, &t, true));
	/* Quick, but it moved 1 MiB: SDP's bandwidth is worth its setup. */
	CHECK(!sdp_destmemo_closed(SA(a), MS, 1u << 20, true, t));
	CHECK(!shorts(&a, SDP_SHORT_RUN - 1, &t, true));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
	CHECK(shorts(&a, 1, &t, true));
}

static void test_sdp_only_listener_never(void)
{
	struct sockaddr_in a = v4("127.0.0.1", 9000);
	uint64_t t = 1000 * MS;

	fresh();
	/* Its listener takes no TCP: a TCP connect would be refused. */
	CHECK(!shorts(&a, 10 * SDP_SHORT_RUN, &t, false));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
	/* It starts taking TCP (restarted with "both"): the run counts. */
	CHECK(!shorts(&a, SDP_SHORT_RUN - 1, &t, true));
	CHECK(shorts(&a, 1, &t, true));
}

static void test_destinations_apart(void)
{
	struct sockaddr_in a = v4("127.0.0.1", 8080), b = v4("127.0.0.1", 8081);
	struct sockaddr_in6 m;
	uint64_t t = 1000 * MS;

	fresh();
	CHECK(shorts(&a, SDP_SHORT_RUN, &t, true));
	CHECK(!sdp_destmemo_prefer_tcp(SA(b), t, NULL, 0));
	/* The same destination as an IPv4-mapped IPv6 address. */
	memset(&m, 0, sizeof(m));
	m.sin6_family = AF_INET6;
	m.sin6_port = htons(8080);
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.sin6_addr);
	CHECK(sdp_destmemo_prefer_tcp(SA(m), t, NULL, 0));
	/* Not an IP address: never. */
	struct sockaddr bad = { .sa_family = AF_UNIX };
	CHECK(!sdp_destmemo_closed(&bad, sizeof(bad), MS, 1, true, t));
	CHECK(!sdp_destmemo_prefer_tcp(&bad, sizeof(bad), t, NULL, 0));
	CHECK(!sdp_destmemo_prefer_tcp(NULL, 0, t, NULL, 0));
}

static void test_table_evicts_oldest(void)
{
	struct sockaddr_in a = v4("127.0.0.1", 7000);
	uint64_t t = 1000 * MS;

	fresh();
	CHECK(shorts(&a, SDP_SHORT_RUN, &t, true));
	/* Many other destinations later: `a` was the least recently used
	 * and went; its next connections start a run again. */
	for (int port = 1; port <= 200; port++) {
		struct sockaddr_in o = v4("127.0.0.2", (uint16_t)port);

		shorts(&o, 1, &t, true);
	}
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
}

static void test_off(void)
{
	struct sockaddr_in a = v4("127.0.0.1", 8080);
	uint64_t t = 1000 * MS;

	fresh();
	sdp_destmemo_configure(0, SDP_SHORT_LIFE_MS, SDP_REFUSED_HOLD_MS);
	CHECK(!shorts(&a, 10 * SDP_SHORT_RUN, &t, true));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
	/* A shorter run and a longer "short", as the environment sets. */
	sdp_destmemo_configure(2, 100, SDP_REFUSED_HOLD_MS);
	CHECK(!sdp_destmemo_closed(SA(a), 50 * MS, 10, true, t));
	CHECK(sdp_destmemo_closed(SA(a), 50 * MS, 10, true, t));
	CHECK(sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
}

static void test_refused_hold(void)
{
	struct sockaddr_in a = v4("127.0.0.1", 8080), b = v4("127.0.0.1", 8081);
	uint64_t t = 1000 * MS;
	char why[128] = "";

	fresh();
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, why, sizeof(why)));
	/* One refusal that TCP answered is enough: this is a plain server. */
	sdp_destmemo_refused(SA(a), t);
	CHECK(sdp_destmemo_prefer_tcp(SA(a), t, why, sizeof(why)));
	CHECK(strstr(why, "no SDP listener") != NULL);
	CHECK(!sdp_destmemo_prefer_tcp(SA(b), t, NULL, 0));
	/* It lasts SDP_REFUSED_HOLD_MS, then SDP is asked again... */
	CHECK(sdp_destmemo_prefer_tcp(SA(a), t + SDP_REFUSED_HOLD_MS * MS - 1,
				      NULL, 0));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t + SDP_REFUSED_HOLD_MS * MS,
				       NULL, 0));
	/* ... and a refusal of TCP under the hold ends it at once. */
	sdp_destmemo_refused(SA(a), t);
	sdp_destmemo_tcp_refused(SA(a));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
	/* A short-lived hold is not ended by it. */
	CHECK(shorts(&a, SDP_SHORT_RUN, &t, true));
	sdp_destmemo_tcp_refused(SA(a));
	CHECK(sdp_destmemo_prefer_tcp(SA(a), t, why, sizeof(why)));
	CHECK(strstr(why, "short-lived") != NULL);
}

static void test_refused_off(void)
{
	struct sockaddr_in a = v4("127.0.0.1", 8080);
	uint64_t t = 1000 * MS;

	fresh();
	sdp_destmemo_configure(SDP_SHORT_RUN, SDP_SHORT_LIFE_MS, 0);
	sdp_destmemo_refused(SA(a), t);
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t, NULL, 0));
	sdp_destmemo_configure(SDP_SHORT_RUN, SDP_SHORT_LIFE_MS, 5);
	sdp_destmemo_refused(SA(a), t);
	CHECK(sdp_destmemo_prefer_tcp(SA(a), t + 5 * MS - 1, NULL, 0));
	CHECK(!sdp_destmemo_prefer_tcp(SA(a), t + 5 * MS, NULL, 0));
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ test_run_starts_hold, "a run of short connections starts a hold of the set length" },
		{ test_probe_after_hold, "after a hold one connection probes SDP; a long one ends the run" },
		{ test_long_or_big_ends_run, "a long-lived or large connection ends the run" },
		{ test_sdp_only_listener_never, "a listener without TCP never gets TCP connects" },
		{ test_destinations_apart, "destinations apart; v4-mapped is v4; non-IP ignored" },
		{ test_table_evicts_oldest, "a full table drops the least recently used" },
		{ test_off, "SDP_SHORT_CONN=0 turns it off; run and lifetime are settings" },
		{ test_refused_hold, "no SDP listener: a hold of the set length, ended by a TCP refusal" },
		{ test_refused_off, "SDP_REFUSED_HOLD_MS=0 turns it off; the hold is a setting" },
	};
	return unit_run_all(tests, (int)(sizeof(tests) / sizeof(tests[0])));
}
