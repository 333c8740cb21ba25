// SPDX-License-Identifier: MIT
/*
 * multi.c — the port space over several providers, and the choice of
 * provider per connection (see multi.h).
 *
 * A combined listener holds an shm listener and, when the address is on an
 * RDMA device, a verbs listener bound to the same address and port.  Its fd
 * is an epoll fd over both; requests are wrapped with the provider they came
 * from so that create_qp_from_req/reject reach the right one.  Only the port
 * space goes through here: QPs carry their own provider's ops.
 */
#include "transport/multi.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/config.h"
#include "transport/shm/shm.h"
#include "base/real.h"

#define MULTI_BIND_TRIES 16

#ifdef SDP_HAVE_VERBS
static const struct sdp_transport_ops *verbs_ops(void)
{
	return sdp_verbs_available() == 0 ? sdp_verbs_transport.ops : NULL;
}

int sdp_tp_app_sleep_begin(void)
{
	return sdp_verbs_app_sleep_begin();
}

void sdp_tp_app_sleep_end(int token)
{
	sdp_verbs_app_sleep_end(token);
}

void sdp_tp_app_look(void)
{
	sdp_verbs_app_look();
}
#else
int sdp_tp_app_sleep_begin(void)
{
	return 0;
}

void sdp_tp_app_sleep_end(int token)
{
	(void)token;
}

void sdp_tp_app_look(void)
{
}

int sdp_verbs_available(void)
{
	return -ENOSYS;
}

static const struct sdp_transport_ops *verbs_ops(void)
{
	return NULL;
}
#endif

struct multi_listener {
	struct sdp_tp_object obj;
	struct sdp_listener *shm;
	struct sdp_listener *verbs;	/* NULL: not on an RDMA device */
	int epfd;
};

struct multi_req {
	const struct sdp_transport_ops *ops;
	struct sdp_conn_req *req;
};

static struct sdp_transport_ops multi_ops;
#define ML(l) ((struct multi_listener *)(l))
#define SHM (sdp_shm_transport.ops)

static uint16_t sa_port(const struct sockaddr *sa)
{
	return ntohs(sa->sa_family == AF_INET6 ?
		     ((const struct sockaddr_in6 *)sa)->sin6_port :
		     ((const struct sockaddr_in *)sa)->sin_port);
}

static int multi_bind_once(const struct sockaddr *addr, socklen_t len,
			   unsigned flags, struct multi_listener *ml)
{
	const struct sdp_transport_ops *v = verbs_ops();
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int r;

	r = sdp_tp_bind(SHM, addr, len, flags, &ml->shm);
	if (r < 0 || !v)
		return r;
	/* The same address and the port shm got, on the RDMA CM too. */
	SHM->bound_addr(ml->shm, &ss, &sl);
	r = v->bind((struct sockaddr *)&ss, sl, &ml->verbs);
	if (r == 0)
		return 0;
	ml->verbs = NULL;
	if (r == -EADDRINUSE) {
		SHM->close_listener(ml->shm);
		ml->shm = NULL;
		return r;
	}
	return 0;	/* not an RDMA address: shm only */
}

static int multi_bind_flags(const struct sockaddr *addr, socklen_t len,
			    unsigned flags, struct sdp_listener **out)
{
	struct multi_listener *ml;
	int r, i;

	ml = calloc(1, sizeof(*ml));
	if (!ml)
		return -ENOMEM;
	ml->obj.ops = &multi_ops;
	ml->epfd = sdp_real.epoll_create1(EPOLL_CLOEXEC);
	if (ml->epfd < 0) {
		free(ml);
		return -errno;
	}
	for (i = 0; i < MULTI_BIND_TRIES; i++) {
		r = multi_bind_once(addr, len, flags, ml);
		/* An ephemeral port free for shm but taken on the RDMA CM:
		 * try another one. */
		if (r != -EADDRINUSE || sa_port(addr) != 0)
			break;
	}
	if (r < 0) {
		sdp_close(ml->epfd);
		free(ml);
		return r;
	}
	*out = (struct sdp_listener *)ml;
	return 0;
}

static int multi_bind(const struct sockaddr *addr, socklen_t len,
		      struct sdp_listener **out)
{
	return multi_bind_flags(addr, len, 0, out);
}

static int multi_set_tcp_claim(struct sdp_listener *l, int fd)
{
	return SHM->set_tcp_claim(((struct multi_listener *)l)->shm, fd);
}

static int multi_bound_addr(struct sdp_listener *l, struct sockaddr_storage *ss,
			    socklen_t *len)
{
	return SHM->bound_addr(ML(l)->shm, ss, len);
}

static int watch(int epfd, int fd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };

	if (fd < 0)
		return fd;
	return sdp_real.epoll_ctl(epfd, EPOLL_CTL_ADD, fd,
				  &ev) < 0 ? -errno : 0;
}

static int multi_listen(struct sdp_listener *l, int backlog)
{
	struct multi_listener *ml = ML(l);
	const struct sdp_transport_ops *v = verbs_ops();
	int r;

	r = SHM->listen(ml->shm, backlog);
	if (r < 0)
		return r;
	r = watch(ml->epfd, SHM->listener_fd(ml->shm), 0);
	if (r < 0 && r != -EEXIST)
		return r;
	if (ml->verbs && (v->listen(ml->verbs, backlog) < 0 ||
			  watch(ml->epfd, v->listener_fd(ml->verbs), 1) < 0)) {
		v->close_listener(ml->verbs);	/* shm only */
		ml->verbs = NULL;
	}
	return 0;
}

static int multi_listener_fd(struct sdp_listener *l)
{
	return ML(l)->epfd;
}

static int multi_get_request(struct sdp_listener *l, struct sdp_conn_req **req,
			     void *priv, uint32_t *priv_len)
{
	struct multi_listener *ml = ML(l);
	const struct sdp_transport_ops *ops = SHM;
	struct sdp_listener *sub = ml->shm;
	uint32_t cap = *priv_len;
	struct multi_req *mr;
	struct sdp_conn_req *in;
	int r;

	r = ops->get_request(sub, &in, priv, priv_len);
	if (r == -EAGAIN && ml->verbs) {
		ops = verbs_ops();
		*priv_len = cap;
		r = ops->get_request(ml->verbs, &in, priv, priv_len);
	}
	if (r < 0)
		return r;
	mr = malloc(sizeof(*mr));
	if (!mr) {
		ops->reject(in);
		return -EAGAIN;
	}
	mr->ops = ops;
	mr->req = in;
	*req = (struct sdp_conn_req *)mr;
	return 0;
}

/* Sharing across fork is an shm-only mechanism (the verbs CM's listen
 * queue lives in the RDMA CM channel of one process): not with verbs. */
static int multi_share_listener(struct sdp_listener *l, int watch_ep)
{
	struct multi_listener *ml = ML(l);

	if (ml->verbs)
		return -EOPNOTSUPP;
	return SHM->share_listener(ml->shm, watch_ep);
}

static int multi_take_request(struct sdp_listener *l, struct sdp_conn_req **req,
			      void *priv, uint32_t *priv_len)
{
	struct multi_listener *ml = ML(l);
	struct multi_req *mr;
	struct sdp_conn_req *in;
	int r;

	if (ml->verbs)
		return -EOPNOTSUPP;
	r = SHM->take_request(ml->shm, &in, priv, priv_len);
	if (r < 0)
		return r;
	mr = malloc(sizeof(*mr));
	if (!mr) {
		SHM->reject(in);
		return -EAGAIN;
	}
	mr->ops = SHM;
	mr->req = in;
	*req = (struct sdp_conn_req *)mr;
	return 0;
}

static void multi_reject(struct sdp_conn_req *req)
{
	struct multi_req *mr = (struct multi_req *)req;

	mr->ops->reject(mr->req);
	free(mr);
}

const struct sdp_transport_ops *sdp_tp_req_provider(
	const struct sdp_transport_ops *port_ops,
	const struct sdp_conn_req *req)
{
	if (port_ops == &multi_ops)
		return ((const struct multi_req *)req)->ops;
	return port_ops;
}

static int multi_create_qp_from_req(struct sdp_conn_req *req,
				    const struct sdp_qp_attr *attr,
				    struct sdp_qp **out)
{
	struct multi_req *mr = (struct multi_req *)req;
	const struct sdp_transport_ops *ops = mr->ops;
	struct sdp_conn_req *in = mr->req;

	free(mr);
	return ops->create_qp_from_req(in, attr, out);
}

static void multi_close_listener(struct sdp_listener *l)
{
	struct multi_listener *ml = ML(l);

	if (ml->shm)
		SHM->close_listener(ml->shm);
	if (ml->verbs)
		verbs_ops()->close_listener(ml->verbs);
	sdp_close(ml->epfd);
	free(ml);
}

static int multi_create_qp(const struct sdp_qp_attr *attr, struct sdp_qp **out)
{
	return SHM->create_qp(attr, out);
}

static struct sdp_transport_ops multi_ops = {
	.bind = multi_bind,
	.bind_flags = multi_bind_flags,
	.set_tcp_claim = multi_set_tcp_claim,
	.bound_addr = multi_bound_addr,
	.listen = multi_listen,
	.listener_fd = multi_listener_fd,
	.get_request = multi_get_request,
	.reject = multi_reject,
	.close_listener = multi_close_listener,
	.share_listener = multi_share_listener,
	.take_request = multi_take_request,
	.create_qp = multi_create_qp,
	.create_qp_from_req = multi_create_qp_from_req,
};

/* ---- the choice -------------------------------------------------------------- */

enum tp_mode { TP_AUTO, TP_SHM, TP_VERBS };

static enum tp_mode mode;
static pthread_once_t mode_once = PTHREAD_ONCE_INIT;
static const struct sdp_transport *override;

void sdp_tp_override(const struct sdp_transport *t)
{
	override = t;
}

static void mode_init(void)
{
	const char *t;

	sdp_config_init();
	t = sdp_cfg.transport;
	if (!strcmp(t, "shm"))
		mode = TP_SHM;
	else if (!strcmp(t, "verbs"))
		mode = TP_VERBS;
	else if (verbs_ops())
		mode = TP_AUTO;
	else
		mode = TP_SHM;	/* no RDMA here: exactly the shm behaviour */
	sdp_transport_fill_defaults(&multi_ops);
}

const struct sdp_transport_ops *sdp_tp_select_default(void)
{
	pthread_once(&mode_once, mode_init);
	if (override)
		return override->ops;
	switch (mode) {
	case TP_SHM:
		return SHM;
#ifdef SDP_HAVE_VERBS
	case TP_VERBS:
		return sdp_verbs_transport.ops;
#endif
	default:
		return &multi_ops;
	}
}

const struct sdp_transport_ops *sdp_tp_for_dest(const struct sockaddr *dst,
						socklen_t len)
{
	const struct sdp_transport_ops *ops = sdp_tp_select_default();
	struct shm_addr a;
	int v6;

	if (ops != &multi_ops)
		return ops;
	if (sdp__shm_addr_parse(dst, len, &a, &v6) == 0 &&
	    sdp__shm_addr_is_local(&a) == 1)
		return SHM;
	return verbs_ops() ? verbs_ops() : SHM;
}

struct sdp_listener *sdp_tp_local_for(const struct sdp_transport_ops *ops,
				      struct sdp_listener *local)
{
	struct multi_listener *ml;
	struct sdp_listener *keep = NULL;

	if (!local || SDP_TP(local) != &multi_ops)
		return local;
	ml = ML(local);
	if (ops == SHM) {
		keep = ml->shm;
		ml->shm = NULL;
	} else if (ml->verbs && ops == verbs_ops()) {
		keep = ml->verbs;
		ml->verbs = NULL;
	}
	multi_close_listener(local);
	return keep;
}

const char *sdp_tp_name(const struct sdp_transport_ops *ops)
{
	if (ops == SHM)
		return "shm";
	if (override && ops == override->ops)
		return override->name;
	if (ops == &multi_ops)
		return "auto";
	return "verbs";
}
