// SPDX-License-Identifier: MIT
/*
 * passfd.c — an SDP socket's descriptor sent to another process over a
 * unix socket (SCM_RIGHTS).
 *
 * vsftpd's privileged process accepts each data connection and hands it to
 * the session process, which it did not fork after that connection existed;
 * dispatchers hand accepted connections to workers the same way.  What
 * arrives is the application's end of the readiness pair: without the
 * connection's state, the receiver's writes went into the mirror and were
 * lost, and it read mirror bytes.  So before the descriptor leaves, the
 * connection is relayed in place (engine/relay.h) by the process that
 * drives it: the pair becomes the stream, every byte of the connection in
 * it, and the descriptor leaves the library's table here; the receiver
 * reads and writes a plain socket, with or without libsdp, for as long as
 * the relaying process lives.  Listening and unconnected SDP sockets carry
 * nothing a receiver could use: sending one fails with EOPNOTSUPP.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "base/config.h"
#include "base/owner.h"
#include "engine/conn.h"
#include "engine/relay.h"
#include "socket/sock.h"

/* Every number of `s` leaves our table: the descriptor is a plain socket
 * from now on (socket.c, sdp_sock_went_plain). */
static void forget_numbers(struct sdp_sock *s)
{
	int n;

	for (n = sdp_fd_scan_next(0); n >= 0; n = sdp_fd_scan_next(n + 1))
		if (sdp_fd_peek(n) == s)
			sdp_sock_went_plain(n, s);
}

static int carry(int fd, struct sdp_sock *s)
{
	struct sdp_conn *c = NULL;
	bool ended;
	int r;

	pthread_mutex_lock(&s->lock);
	if (s->kind == SDP_SK_CONN && s->conn) {
		c = s->conn;
		sdp_conn_get(c);
	}
	pthread_mutex_unlock(&s->lock);
	if (!c) {
		sdp_log(SDP_LOG_ERR, "fd %d: a listening or unconnected SDP "
			"socket cannot be passed to another process", fd);
		return -EOPNOTSUPP;
	}
	pthread_mutex_lock(&c->lock);
	ended = c->state == SDP_ST_RESET || c->state == SDP_ST_CLOSED;
	pthread_mutex_unlock(&c->lock);
	r = sdp_sock_pair(s);	/* the file that leaves is the pair's end */
	/* An ended connection is what its pair says already (EOF, reset). */
	if (r == 0 && !ended && !sdp_relay_in_place(c))
		r = sdp_owner_is_me(c->owner_slot) ?
		    sdp_relay_in_place_here(c) :
		    sdp_relay_ask_in_place(c, fd);
	if (r == 0 && !ended)
		forget_numbers(s);
	else if (r < 0)
		sdp_log(SDP_LOG_ERR, "fd %d: not passed to another process: "
			"its connection could not be relayed (%s)", fd,
			strerror(-r));
	sdp_conn_put(c);
	return r;
}

int sdp_passfd_prepare(const struct msghdr *msg)
{
	const char *end = (const char *)msg->msg_control + msg->msg_controllen;
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
		size_t i, n;

		/* A header that claims more than the buffer holds: the
		 * kernel refuses the message (EINVAL), we read no further. */
		if (cm->cmsg_len < CMSG_LEN(0) ||
		    cm->cmsg_len > (size_t)(end - (const char *)cm))
			break;
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			struct sdp_sock *s;
			int fd, r;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
			s = sdp_fd_get(fd);
			if (!s)
				continue;
			r = carry(fd, s);
			sdp_sock_put(s);
			if (r < 0)
				return r;
		}
	}
	return 0;
}
