/* SPDX-License-Identifier: MIT */
/*
 * fdhigh.h — keep the library's own descriptors out of the application's way.
 *
 * Programs size tables by descriptor number (nginx's connection array, wrk's
 * event loop of 10 + 3 x connections, select()'s FD_SETSIZE): if every SDP
 * socket also took the next few low numbers for the library's internal
 * descriptors, an application would see its numbers grow several times as
 * fast as with TCP and overflow those tables.  So internal descriptors are
 * moved to the top quarter of RLIMIT_NOFILE; the application's own SDP
 * descriptor is then the only low number an SDP socket uses, as with TCP.
 */
#ifndef SDP_BASE_FDHIGH_H
#define SDP_BASE_FDHIGH_H

#include <stdbool.h>

/* Move `fd` high (close-on-exec) and return the new number; on any failure
 * (no room up there) return `fd` unchanged.  Negative input passes through.
 * Either way the descriptor is marked as the library's own. */
int sdp_fd_high(int fd);

/* The library's own descriptors are protected from the application's
 * close(), closefrom() and close_range() (socket/socket.c): a program that
 * closes "every descriptor but its own", in a loop or by range, would take
 * the library's epoll sets, eventfds and rendezvous sockets from under it,
 * and the next connection would hang.  The library closes its own with
 * sdp_close() (base/real.h), which drops the mark
 * (sdp_fd_internal_closing()). */
bool sdp_fd_is_internal(int fd);
void sdp_fd_internal_closing(int fd);
/* The first marked descriptor in [from, to], or -1. */
int sdp_fd_next_internal(int from, int to);

#endif
