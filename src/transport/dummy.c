// SPDX-License-Identifier: MIT
/*
 * dummy.c — "not supported" defaults for the core operations a table
 * leaves out (the multiplexer's, which serves only the port space: multi.c),
 * after libibverbs' dummy_ops.c, and two helpers providers take as theirs.
 * Defaults return -EOPNOTSUPP; void ops do nothing; wait_seq returns a
 * constant 0 so that a wait() on such a QP reports -EOPNOTSUPP instead of
 * sleeping forever.
 *
 * Also home of sdp_wc_status_str(), the only table shared by all providers.
 */
#include <errno.h>
#include <string.h>

#include "transport/transport.h"

static int dummy_bind(const struct sockaddr *addr, socklen_t len,
		      struct sdp_listener **out)
{
	return -EOPNOTSUPP;
}

static int dummy_bound_addr(struct sdp_listener *l, struct sockaddr_storage *ss,
			    socklen_t *len)
{
	return -EOPNOTSUPP;
}

static int dummy_listen(struct sdp_listener *l, int backlog)
{
	return -EOPNOTSUPP;
}

static int dummy_listener_fd(struct sdp_listener *l)
{
	return -EOPNOTSUPP;
}

static int dummy_get_request(struct sdp_listener *l, struct sdp_conn_req **req,
			     void *priv, uint32_t *priv_len)
{
	return -EOPNOTSUPP;
}

static void dummy_reject(struct sdp_conn_req *req)
{
}

static int dummy_share_listener(struct sdp_listener *l, int watch_ep)
{
	(void)l;
	(void)watch_ep;
	return -EOPNOTSUPP;
}

static int dummy_take_request(struct sdp_listener *l, struct sdp_conn_req **req,
			      void *priv, uint32_t *priv_len)
{
	(void)l;
	(void)req;
	(void)priv;
	(void)priv_len;
	return -EOPNOTSUPP;
}

static void dummy_close_listener(struct sdp_listener *l)
{
}

static int dummy_create_qp(const struct sdp_qp_attr *attr, struct sdp_qp **out)
{
	return -EOPNOTSUPP;
}

static int dummy_create_qp_from_req(struct sdp_conn_req *req,
				    const struct sdp_qp_attr *attr,
				    struct sdp_qp **out)
{
	return -EOPNOTSUPP;
}

static int dummy_connect(struct sdp_qp *qp, struct sdp_listener *local,
			 const struct sockaddr *dst, socklen_t len,
			 const void *priv, uint32_t priv_len)
{
	return -EOPNOTSUPP;
}

static int dummy_accept(struct sdp_qp *qp, const void *priv, uint32_t priv_len)
{
	return -EOPNOTSUPP;
}

static int dummy_get_event(struct sdp_qp *qp, struct sdp_cm_event *ev)
{
	return -EOPNOTSUPP;
}

static int dummy_addresses(struct sdp_qp *qp, struct sdp_tp_addr *addr)
{
	return -EOPNOTSUPP;
}

static void dummy_query_caps(struct sdp_qp *qp, struct sdp_tp_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
	strcpy(caps->rdma_reason, "not supported by transport");
	strcpy(caps->name, "none");
}

static int dummy_disconnect(struct sdp_qp *qp)
{
	return -EOPNOTSUPP;
}

static void dummy_destroy_qp(struct sdp_qp *qp)
{
}

static struct sdp_mr *dummy_recv_region(struct sdp_qp *qp)
{
	return NULL;
}

static int dummy_reg_mr(struct sdp_qp *qp, void *addr, size_t len,
			unsigned access, struct sdp_mr **out)
{
	return -EOPNOTSUPP;
}

static int dummy_dereg_mr(struct sdp_qp *qp, struct sdp_mr *mr)
{
	return -EOPNOTSUPP;
}

static int dummy_post_send(struct sdp_qp *qp, const struct sdp_send_wr *wr)
{
	return -EOPNOTSUPP;
}

static int dummy_post_recv(struct sdp_qp *qp, const struct sdp_recv_wr *wr)
{
	return -EOPNOTSUPP;
}

static int dummy_poll_cq(struct sdp_qp *qp, struct sdp_wc *wc, int max)
{
	return -EOPNOTSUPP;
}

static uint32_t dummy_wait_seq(struct sdp_qp *qp)
{
	return 0;
}

static int dummy_wait(struct sdp_qp *qp, uint32_t seq, int timeout_ms)
{
	return -EOPNOTSUPP;
}

static void dummy_kick(struct sdp_qp *qp)
{
}

static int dummy_event_fd(struct sdp_qp *qp)
{
	return -EOPNOTSUPP;
}

static int dummy_answer_fd(struct sdp_qp *qp)
{
	return -1;	/* the caller hands the QP to the progress thread */
}

static int dummy_req_notify(struct sdp_qp *qp)
{
	return -EOPNOTSUPP;
}

static void dummy_ack_events(struct sdp_qp *qp)
{
}

int sdp_tp_wait_rdma_plain(struct sdp_qp *qp, uint32_t seq, int timeout_ms,
			   uint64_t since_ns, uint64_t due_ns)
{
	int r = SDP_TP(qp)->wait(qp, seq, timeout_ms);

	return r == 0 ? 1 : r;	/* woken, not found polling */
}

uint8_t *sdp_tp_no_send_slot(struct sdp_qp *qp, uint32_t *cap)
{
	*cap = 0;
	return NULL;
}

#define FILL(op) do { if (!ops->op) ops->op = dummy_##op; } while (0)

void sdp_transport_fill_defaults(struct sdp_transport_ops *ops)
{
	if (!ops->detach_qp)
		ops->detach_qp = ops->destroy_qp;
	FILL(bind);
	FILL(bound_addr);
	FILL(listen);
	FILL(listener_fd);
	FILL(get_request);
	FILL(reject);
	FILL(close_listener);
	FILL(share_listener);
	FILL(take_request);
	FILL(create_qp);
	FILL(create_qp_from_req);
	FILL(connect);
	FILL(accept);
	FILL(get_event);
	FILL(addresses);
	FILL(query_caps);
	FILL(disconnect);
	FILL(destroy_qp);
	FILL(recv_region);
	FILL(reg_mr);
	FILL(dereg_mr);
	FILL(post_send);
	FILL(post_recv);
	FILL(poll_cq);
	FILL(wait_seq);
	FILL(wait);
	if (!ops->wait_rdma)
		ops->wait_rdma = sdp_tp_wait_rdma_plain;
	if (!ops->send_slot)
		ops->send_slot = sdp_tp_no_send_slot;
	FILL(kick);
	FILL(event_fd);
	FILL(req_notify);
	FILL(ack_events);
	FILL(answer_fd);
}

/* Keep in the order of enum sdp_wc_status. */
static const char *const wc_status_names[] = {
	[SDP_WC_SUCCESS] = "success",
	[SDP_WC_LOC_LEN_ERR] = "local length error",
	[SDP_WC_LOC_PROT_ERR] = "local protection error",
	[SDP_WC_WR_FLUSH_ERR] = "work request flushed",
	[SDP_WC_REM_ACCESS_ERR] = "remote access error",
	[SDP_WC_REM_INV_REQ_ERR] = "remote invalid request",
	[SDP_WC_RNR_RETRY_EXC_ERR] = "RNR retry exceeded",
	[SDP_WC_RETRY_EXC_ERR] = "transport retry exceeded",
	[SDP_WC_GENERAL_ERR] = "general error",
};

_Static_assert(sizeof(wc_status_names) / sizeof(wc_status_names[0]) ==
	       SDP_WC_GENERAL_ERR + 1,
	       "wc_status_names must name every enum sdp_wc_status value");

const char *sdp_wc_status_str(enum sdp_wc_status status)
{
	if ((unsigned)status >= sizeof(wc_status_names) / sizeof(wc_status_names[0]))
		return "unknown status";
	return wc_status_names[status];
}
