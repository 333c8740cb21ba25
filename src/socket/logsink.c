// SPDX-License-Identifier: MIT
/*
 * logsink.c — whether the library's log lines may go to stderr.
 *
 * inetd-style servers run with the client's connection as descriptors 0, 1
 * and 2 (vsftpd's session processes, a daemon exec'd by inetd or git
 * daemon): a log line written there reaches the client inside its
 * protocol stream (an FTP client read "libsdp[PID]: conn 2: ..." where it
 * expected a reply) and tells it about the server.  So a line is dropped
 * when descriptor 2 is a connection: an SDP socket, a stream relayed for
 * one, or a kernel TCP/IP socket.
 */
#include <errno.h>
#include <sys/socket.h>

#include "base/config.h"
#include "base/real.h"
#include "socket/sock.h"

static int stderr_is_connection(void)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss), dl;
	int dom = 0;

	if (sdp_fd_peek(2))
		return 1;
	dl = sizeof(dom);
	if (!sdp_real.getsockopt ||
	    sdp_real.getsockopt(2, SOL_SOCKET, SO_DOMAIN, &dom, &dl) < 0)
		return 0;	/* not a socket (a terminal, a file, a pipe) */
	if (dom == AF_INET || dom == AF_INET6)
		return 1;
	/* An AF_UNIX socket: journald's is fine, a relayed SDP stream not. */
	return dom == AF_UNIX &&
	       sdp_relayed_name(2, 1, (struct sockaddr *)&ss, &sl) == 0;
}

__attribute__((constructor)) static void logsink_init(void)
{
	sdp_log_set_stderr_check(stderr_is_connection);
}
