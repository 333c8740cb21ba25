/* SPDX-License-Identifier: MIT */
/*
 * multi.h — transport choice per connection.
 *
 * The port space is shared by the providers: a listener binds and listens on
 * shm always and on verbs too when an RDMA device can take the address, and
 * hands the engine requests from both.  An active connection picks its
 * provider from the destination (sdp_tp_for_dest): shm when the peer is on
 * this host, verbs when an RDMA device is present, else shm, whose connect
 * then fails with ENETUNREACH (the socket switch falls back to TCP).
 *
 * SDP_TRANSPORT=loop|shm|verbs forces one provider for everything; unset or
 * "auto" is the choice above.
 */
#ifndef SDP_TRANSPORT_MULTI_H
#define SDP_TRANSPORT_MULTI_H

#include "transport/transport.h"

/* The verbs provider (only in builds with rdma-core: SDP_HAVE_VERBS). */
extern const struct sdp_transport sdp_verbs_transport;
/* 0 when the verbs transport can be used, else why not (-ENODEV, ...). */
int sdp_verbs_available(void);
/* The verbs side of sdp_tp_app_sleep_begin/end and sdp_tp_app_look. */
int sdp_verbs_app_sleep_begin(void);
void sdp_verbs_app_sleep_end(int token);
void sdp_verbs_app_look(void);

/* An application thread is about to sleep in poll/select/epoll: transports
 * that let their completion notification lapse while the application
 * polls (verbs) must re-arm it now.  Pass what begin returned to end when
 * the thread is back. */
int sdp_tp_app_sleep_begin(void);
void sdp_tp_app_sleep_end(int token);
/* The same call with a zero timeout: a look, no sleep.  Such a transport
 * looks at its completions for it (verbs). */
void sdp_tp_app_look(void);

/* The ops that own the port space (bind/listen/requests) in this process. */
const struct sdp_transport_ops *sdp_tp_select_default(void);

/* The provider a connection request from `port_ops`'s get_request() will
 * be accepted on (a combined listener's requests carry theirs). */
const struct sdp_transport_ops *sdp_tp_req_provider(
	const struct sdp_transport_ops *port_ops,
	const struct sdp_conn_req *req);

/* The provider for a connection to `dst`. */
const struct sdp_transport_ops *sdp_tp_for_dest(const struct sockaddr *dst,
						socklen_t len);

/* A listener from the default ops' bind(), turned into the `local` argument
 * of `ops`->connect(): a combined listener gives up its other halves.  May
 * return NULL (no binding on that provider: an ephemeral source is used). */
struct sdp_listener *sdp_tp_local_for(const struct sdp_transport_ops *ops,
				      struct sdp_listener *local);

/* Tests: every connection and listener of this process over `t` (the unit
 * tests' in-process loop transport).  Call before the first socket. */
void sdp_tp_override(const struct sdp_transport *t);

/* Name of the provider a QP or listener belongs to, for diagnostics. */
const char *sdp_tp_name(const struct sdp_transport_ops *ops);

#endif /* SDP_TRANSPORT_MULTI_H */
