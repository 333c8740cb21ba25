/* SPDX-License-Identifier: MIT */
/*
 * destmemo.h — what the switch learnt about destinations, so that a "both"
 * connect can skip an SDP attempt that would not pay or not succeed.
 *
 * An SDP connect costs more than a TCP one (docs/DESIGN.md, "Connection
 * setup cost"), and a refused one costs that and a TCP connect on top.
 * Two rules, per destination, each a hold of kernel TCP for new connects:
 *
 * - Short-lived runs (an adaptive fallback, like SMC's handshake limits).
 *   A program that opens a connection per request and moves a few bytes
 *   on each loses more in the setup than SDP wins on the data.  The switch
 *   reports every SDP connection it opened under a "both" verdict when it
 *   closes; after a run of short ones to a destination whose listener said
 *   it takes kernel TCP too (SDP_CM_F_TCP_TOO), new connections there go
 *   over TCP for a hold period.  The first connection after the hold goes
 *   over SDP again, and one that lives long or moves much ends the run.
 * - No SDP listener.  An SDP connect was refused and the TCP connect of
 *   the fallback reached a listener: a plain TCP server.  New connections
 *   there go over TCP for a hold period, then SDP is asked again.  A TCP
 *   connect refused under the hold ends it (maybe the server moved to
 *   SDP only).
 *
 * Nothing here touches a connection that exists: the choice is made
 * before connect() starts.  Time comes from the caller (unit tests drive
 * it).  Thread-safe, and fork-safe with the fork handlers below
 * registered; not async-signal-safe (neither is
 * connect() of the switch).
 */
#ifndef SDP_POLICY_DESTMEMO_H
#define SDP_POLICY_DESTMEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Defaults.  A connection is short if it lived less than LIFE (from
 * connect() to close()) and moved fewer bytes, both directions, than
 * BYTES; RUN short ones in a row start a hold of HOLD. */
#define SDP_SHORT_LIFE_MS	10
#define SDP_SHORT_BYTES		(64u * 1024)
#define SDP_SHORT_RUN		16
#define SDP_SHORT_HOLD_MS	1000

/* How long a destination with no SDP listener is remembered. */
#define SDP_REFUSED_HOLD_MS	1000

/* SDP_SHORT_CONN, SDP_SHORT_CONN_MS and SDP_REFUSED_HOLD_MS
 * (base/config.c): `run` 0 turns the short-lived rule off, `refused_ms`
 * 0 the no-listener rule. */
void sdp_destmemo_configure(uint32_t run, uint32_t life_ms,
			    uint32_t refused_ms);

/* An SDP connection this process opened to `dst` (as given to connect())
 * closed after `life_ns`, having moved `bytes`; `peer_takes_tcp`: its
 * listener said it takes TCP too.  Returns true if this started a hold
 * (for the caller's log). */
bool sdp_destmemo_closed(const struct sockaddr *dst, socklen_t len,
			 uint64_t life_ns, uint64_t bytes,
			 bool peer_takes_tcp, uint64_t now_ns);
/* An SDP connect to `dst` was refused and the fallback's TCP connect
 * reached a listener there. */
void sdp_destmemo_refused(const struct sockaddr *dst, socklen_t len,
			  uint64_t now_ns);
/* A TCP connect to `dst` made under a no-listener hold was refused: ask
 * SDP again next time. */
void sdp_destmemo_tcp_refused(const struct sockaddr *dst, socklen_t len);
/* True if a new connection to `dst` should go over TCP now; `why` then
 * says so for sdpstat and logs. */
bool sdp_destmemo_prefer_tcp(const struct sockaddr *dst, socklen_t len,
			     uint64_t now_ns, char *why, size_t why_len);
/* Fork handlers for the table's lock, for the caller to register (policy/
 * sits below the process runtime and registers nothing itself). */
void sdp_destmemo_fork_prepare(void);
void sdp_destmemo_fork_parent(void);
void sdp_destmemo_fork_child(void);
/* Forget everything (tests). */
void sdp_destmemo_reset(void);

#endif
