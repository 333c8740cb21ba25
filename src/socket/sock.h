/* SPDX-License-Identifier: MIT */
/*
 * sock.h — the socket switch's view of one SDP socket (what the application
 * sees through a descriptor), and the descriptor table.
 *
 * The descriptor the application holds is a real kernel descriptor (one end
 * of a socketpair, see engine/readiness.h), so it is unique, survives
 * poll/epoll/select untouched, and closes like any other.  dup() aliases map
 * to the same sdp_sock.
 */
#ifndef SDP_SOCK_H
#define SDP_SOCK_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "engine/conn.h"
#include "engine/listener.h"
#include "engine/readiness.h"

#define SDP_EXPORT __attribute__((visibility("default")))

enum sdp_sock_kind {
	SDP_SK_NEW = 0,		/* fresh */
	SDP_SK_BOUND,		/* bind() done: port reserved */
	SDP_SK_LISTEN,
	SDP_SK_CONN,		/* connect()/accept(): see conn->state */
};

struct sdp_sock {
	atomic_int refs;	/* table entries + calls in progress */
	atomic_int nfds;	/* descriptors naming it (dup) */
	pthread_mutex_t lock;	/* kind transitions (bind/listen/connect) */
	int domain;		/* AF_INET_SDP or AF_INET6_SDP */
	int family;		/* AF_INET or AF_INET6 (addresses) */
	enum sdp_sock_kind kind;
	struct sdp_ready ready;
	struct sdp_listener *bound;	/* SDP_SK_BOUND: the reservation */
	struct sockaddr_storage local;	/* bound address */
	socklen_t local_len;
	struct sdp_listen *lsn;
	struct sdp_conn *conn;

	/* Options as set by the application. */
	atomic_int nonblock;
	int reuseaddr, reuseport, keepalive, oobinline, nodelay, cork;
	int v6only, rcvlowat, keepidle, keepintvl, keepcnt, tos, zcopy_thresh;
	int sndbuf, rcvbuf;	/* as getsockopt reports them */
	struct linger linger;
	int rcvtimeo_ms, sndtimeo_ms;	/* 0 = forever */
	int last_bind_err;

	/* Socket switch (switch.c): an AF_INET/AF_INET6 TCP socket that the
	 * policy sent to SDP.  `shadow` is the real TCP socket kept for
	 * falling back (policy "both"); -1 when the policy said "sdp". */
	int switched;		/* created from AF_INET/AF_INET6 */
	int shadow;		/* kernel TCP socket, or -1 */
	atomic_int shadow_nonblock; /* its O_NONBLOCK as we last set it */
	int tcp_family;		/* AF_INET or AF_INET6, as the app asked */
	int sock_type;		/* type flags given to socket() */
	int may_fallback;	/* connect verdict "both": TCP if refused */
	/* Where the SDP attempt of a "both" socket goes: a non-blocking one
	 * that fails later falls back when the application looks. */
	struct sockaddr_storage fb_dst;
	socklen_t fb_dst_len;		/* 0: none */
	/* Its close is reported to policy/destmemo.h ("both" connects). */
	struct sockaddr_storage sl_dst;	/* as given to connect() */
	socklen_t sl_dst_len;		/* 0: not reported */
	uint64_t sl_t0_ns;		/* connect() called */

	/* Listeners (lsnfd.c): the application's descriptor is an epoll set
	 * over kernel objects; ready.app_fd is then a hidden descriptor. */
	int lsn_fd;		/* the application's descriptor number */
	int lsn_ep;		/* our own handle on that epoll set, or -1 */
	struct sdp_sock *lsn_next;	/* listeners (fork handling) */
	unsigned lsn_tracked:1;
	unsigned share_failed:1;	/* transport cannot share: see switch.c */
	unsigned shadow_bound:1;	/* the application bound the shadow */

	/* User-space readiness (epfast.c), under its ep_lock. */
	int ep_regs;		/* epoll registrations known */
	int ep_ep, ep_idx;	/* where the last one is (a lookup hint) */
	_Atomic int ep_off;	/* kernel mirror only, for good */
};

/* Socket switch (switch.c). */
int sdp_switch_socket(int domain, int type, int protocol);
int sdp_switch_bind(struct sdp_sock *s, int fd, const struct sockaddr *sa,
		    socklen_t len);
int sdp_switch_listen(struct sdp_sock *s, int fd, int backlog);
int sdp_switch_connect(struct sdp_sock *s, int fd, const struct sockaddr *sa,
		       socklen_t len);
/* Apply an option set on the SDP socket to the TCP shadow too. */
void sdp_switch_mirror_sockopt(struct sdp_sock *s, int level, int name,
			       const void *v, socklen_t len);
void sdp_switch_mirror_nonblock(struct sdp_sock *s, int on);
void sdp_switch_release(struct sdp_sock *s);
/* The last descriptor of a connected socket is closing (s->lock held):
 * tell policy/destmemo.h how long it lived and what it moved. */
void sdp_switch_conn_closing(struct sdp_sock *s);
/* At fork, for a transport that cannot share: the listener becomes the
 * plain kernel TCP listener ("both" only; `child` in the fork child). */
void sdp_switch_listener_to_tcp(struct sdp_sock *s, int child);
/* sdpstat records for kernel TCP connections the switch could have made
 * SDP: `why` is shown as the fallback reason. */
void sdp_switch_record_tcp(int fd, const char *why,
			   const struct sockaddr *remote);
void sdp_switch_forget_tcp(int fd);

/* Listener descriptors (lsnfd.c).  install: with s->lock held, right after
 * the listener exists; makes `fd` the epoll set. */
int sdp_lsnfd_install(struct sdp_sock *s, int fd);
/* Untrack and close the hidden descriptors (last close, or fallback). */
void sdp_lsnfd_release(struct sdp_sock *s);
/* getsockopt(SO_ERROR): a failed non-blocking "both" attempt goes TCP
 * (socket.c); 1 if it handled the call, *so_error (errno) to report. */
int sdp_sock_late_fallback(struct sdp_sock *s, int fd, int *so_error);
/* The SDP connect of a "both" socket succeeded (switch.c). */
void sdp_switch_connected(struct sdp_sock *s);
/* The SDP attempt failed with `sdp_err` for `reason` (conn.h): maybe TCP. */
int sdp_switch_fallback_connect(struct sdp_sock *s, int fd,
				const struct sockaddr *sa, socklen_t len,
				int sdp_err, enum sdp_reason reason);

/* epoll_ctl() on behalf of the application: the kernel's, and the
 * user-space record of SDP sockets (epfast.c).  -1/errno as the kernel's. */
int sdp_epfast_ctl(int ep, int op, int fd, struct epoll_event *ev);
/* `fd` stops naming socket s: every epoll set that holds the pair forgets
 * s and, with `readd` (it became a new kernel socket, dup3), gets the new
 * file with the same events and data.  Not with s->lock held. */
void sdp_epfast_fd_replaced(int fd, struct sdp_sock *s, int readd);
/* A socket gained or lost its connection: epoll_wait's cached snapshots
 * (epfast.c) are stale. */
void sdp_epfast_conns_changed(void);
/* fdlimit.c: at load, raise RLIMIT_NOFILE's soft limit to SDP_NOFILE. */
void sdp_fdlimit_raise(void);

/* Descriptor table (fdtable.c).  get() returns a referenced socket or NULL
 * (cheap for descriptors that are not SDP). */
struct sdp_sock *sdp_fd_get(int fd);
/* The descriptor's file may be read or shared from now on (a dup, a
 * signal owner): its lone socket gives way to the readiness pair
 * (engine/readiness.h, sdp_ready_pair).  0 or -errno.  Not with s->lock
 * held. */
int sdp_sock_pair(struct sdp_sock *s);
/* A wait in the kernel may name the socket's descriptor from now on
 * (engine/readiness.h, kwatched): poll, select, epoll, O_ASYNC.  Pairs
 * it first: 0 or -errno (then nothing is marked). */
int sdp_sock_kernel_watch(struct sdp_sock *s);
/* The table names fd (no lock, no reference: async-signal-safe). */
bool sdp_fd_mapped(int fd);
/* We run in the memory of another process (after vfork(), or a CLONE_VM
 * child): its table and engine are not ours to change. */
bool sdp_in_memory_sharing_child(void);
int sdp_fd_set(int fd, struct sdp_sock *s);
struct sdp_sock *sdp_fd_take(int fd);
/* Lock-free scan for exec (async-signal-safe): next mapped fd >= from. */
int sdp_fd_scan_next(int from);
/* An int option's value in and out, as the kernel checks it (sockopt.c). */
int sdp_opt_get_int(const void *v, socklen_t len, int *out);
int sdp_opt_put_int(void *v, socklen_t *len, int val);
/* Relayed connections in an image that exec'd with them (relayed.c,
 * engine/relay.h): the exec'ing process names them in SDP_RELAYED.  Each
 * returns -ENOENT when `fd` is not one (the kernel answers then). */
#define SDP_RELAYED_ENV "SDP_RELAYED"
#define SDP_RELAYED_MAX 32
int sdp_relayed_name(int fd, int peer, struct sockaddr *sa, socklen_t *len);
/* A descriptor relayed in place (engine/relay.h) answers the same way:
 * its pair's inode, and the connection's addresses. */
void sdp_relayed_add(uint64_t ino, const struct sockaddr *local,
		     socklen_t local_len, const struct sockaddr *peer,
		     socklen_t peer_len);
/* If `fd`'s socket has a connection relayed in place, it leaves the
 * table, a plain socket from now on (socket.c): 1, else 0. */
int sdp_sock_went_plain(int fd, struct sdp_sock *s);
/* A process about to restrict its system calls (seccomp): connections it
 * holds but does not drive are relayed in place first (sandbox.c). */
void sdp_sandbox_entering(void);
/* sendmsg() on a socket that is not ours, with SCM_RIGHTS naming SDP
 * sockets: each connection among them is relayed in place first, so that
 * the receiver gets a stream that carries it (passfd.c).  0, or -errno:
 * not sent. */
struct msghdr;
int sdp_passfd_prepare(const struct msghdr *msg);
/* prlimit() for the interposed setrlimit and syscall(): a
 * descriptor limit lowered below what taking over a connection needs
 * enters a sandbox as well (sandbox.c). */
long sdp_sandbox_prlimit(long pid, long resource, const void *new_limit,
			 void *old_limit);
int sdp_relayed_getsockopt(int fd, int level, int name, void *v,
			   socklen_t *len);
int sdp_relayed_setsockopt(int fd, int level, int name, const void *v,
			   socklen_t len);
/* The socket `fd` maps, without a lock or a reference: only where no other
 * application thread can close it meanwhile (exec.c). */
struct sdp_sock *sdp_fd_peek(int fd);
void sdp_sock_put(struct sdp_sock *s);

/* Socket object (socket.c). */
struct sdp_sock *sdp_sock_new(int domain, int flags, int *err);
/* Last descriptor closed: close the connection/listener, free the port. */
void sdp_sock_release(struct sdp_sock *s);

/* glibc's function `name` (dlsym RTLD_NEXT), cached in *slot: for calls
 * on descriptors that are not ours (io.c). */
void *sdp_real_sym(void **slot, const char *name);

/* errno at the POSIX boundary: -errno in, -1 out. */
static inline int sdp_ret(int r)
{
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return r;
}

static inline ssize_t sdp_sret(ssize_t r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* Address checks shared by bind/connect (socket.c): copy into `out` as
 * AF_INET/AF_INET6 (accepting the SDP family numbers too). */
int sdp_sock_addr_in(const struct sdp_sock *s, const struct sockaddr *sa,
		     socklen_t len, struct sockaddr_storage *out,
		     socklen_t *outlen);
/* Bind a new socket's SDP side (bind(), or the switch's SDP half of a
 * TCP socket): `flags` SDP_BIND_* (transport.h) beyond the socket's
 * IPV6_V6ONLY. */
int sdp_sock_bind_locked(struct sdp_sock *s, const struct sockaddr *a,
			 socklen_t len, unsigned flags);

#endif
