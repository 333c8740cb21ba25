/* SPDX-License-Identifier: MIT */
/*
 * loop_transport.h — the "loop" transport (in-process, deterministic), for
 * the unit tests: it is not part of libsdp.
 *
 * The loop provider pairs QPs inside one process: a SEND is copied into the
 * peer's posted receive at post time, RDMA is a validated memcpy, and the
 * port space is a process-global table.  Tests use the hooks below to make
 * the N-th call of an op fail, so that every error path of the engine can be
 * walked (SQLite's "fail the N-th malloc, then N+1" loop).
 *
 * Op names: "bind", "listen", "create_qp", "create_qp_from_req", "connect",
 * "accept", "reg_mr", "post_send", "post_recv".
 *
 * Counting starts at the call after the hook is set: n = 1 is the next call.
 */
#ifndef SDP_TESTS_LOOP_TRANSPORT_H
#define SDP_TESTS_LOOP_TRANSPORT_H

#include "transport/transport.h"

extern const struct sdp_transport sdp_loop_transport;

/* The n-th call of `op` returns -ENOMEM (connect: the QP gets
 * SDP_CM_UNREACHABLE with -ENOMEM instead).  Returns -EINVAL for an unknown
 * op name. */
int sdp_loop_fail_nth(const char *op, int n);

/* Every call of `op` from the n-th on fails like sdp_loop_fail_nth(). */
int sdp_loop_fail_from(const char *op, int n);

/* The n-th post_send or post_recv is accepted (returns 0) but its work
 * request completes with `status` and the QP (and its peer) enter the error
 * state, like a hardware error. */
int sdp_loop_fail_wc(const char *op, int n, enum sdp_wc_status status);

/* Forget every injected failure and reset the call counters. */
void sdp_loop_fail_reset(void);

/* Calls of `op` since the last reset (successful or not). */
unsigned long sdp_loop_op_count(const char *op);

/* Put a QP and its peer into the error state at once, as if the link died:
 * both sides flush, both see SDP_CM_DISCONNECTED. */
void sdp_loop_qp_error(struct sdp_qp *qp);

#endif /* SDP_TESTS_LOOP_TRANSPORT_H */
