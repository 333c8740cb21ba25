/* SPDX-License-Identifier: MIT */
/*
 * relay.h — a connection carried across exec() by the process that drives
 * it.
 *
 * A process that execs with an SDP descriptor open (inetd-style: sshd,
 * git daemon) cannot take the connection into its new image: the engine
 * state, the QP and its mappings live in the old one, and an RDMA QP
 * cannot move to another process at all.  When another process of the
 * ancestor drives the connection (the server that accepted and forked: the
 * usual case), the exec'ing process asks it to *relay*: it hands over one
 * end of a fresh AF_UNIX stream pair (SCM_RIGHTS, on a socket the ancestor
 * made for its children at fork, with its copy of the connection's
 * descriptor as proof), puts the other end on every number of the
 * connection, and execs.  From then on the owner copies bytes both ways
 * between the connection and the pair: the new image reads and writes a
 * plain stream socket, with or without libsdp, and gets every byte once,
 * in order, data in flight included.  Half-closes pass both ways.  A
 * relayed connection stays with the process that relays it.
 * docs/DESIGN.md, "exec()".
 */
#ifndef SDP_RELAY_H
#define SDP_RELAY_H

struct sdp_conn;

/* Fork prepare, with connections open: make the socket our children send
 * requests on. */
void sdp_relay_before_fork(void);
/* Exec'ing side: ask the owner of `c` to relay it for our next image,
 * which gets it as stdin, stdout or stderr (`stdio`) or under another
 * number; `app_fd` is our descriptor of it (the proof that we hold it).  The owner relays only what it no longer uses itself: a
 * connection it holds no descriptor of, or one given as stdio (inetd,
 * sshd, git daemon: the server closes its copy soon after, never reading
 * it); a client's connection that a helper inherits by accident (no
 * FD_CLOEXEC) stays the client's and the helper's copy is reset.  Returns a close-on-exec descriptor of the stream socket the new image is
 * to hold, or -errno (-ENOTSUP: the owner is not an ancestor of ours, or
 * this process; the caller falls back to a reset).  Only system calls and
 * atomics: no lock, no allocation. */
int sdp_relay_ask(struct sdp_conn *c, int app_fd, int nonblock, int stdio);

/* Sandbox side: ask the owner of `c` (an ancestor) to relay it *in
 * place*: into the pair behind the application's descriptor `app_fd`
 * itself, which then becomes, in every process that holds it, the plain
 * stream socket it is (read, write, poll: system calls a seccomp sandbox
 * allows), with every holder sharing one receive queue as on a TCP socket.
 * For a process about to restrict its own system calls (sshd's preauth
 * child).  0, or -errno as sdp_relay_ask. */
int sdp_relay_ask_in_place(struct sdp_conn *c, int app_fd);
/* This process, which drives `c`, hands its descriptor to another process
 * (SCM_RIGHTS): relay it in place, here.  Whoever receives the
 * descriptor reads and writes the plain stream socket it is, with or
 * without libsdp, as long as this process lives.  The readiness pair must
 * be in place (not lone).  0, or -errno (-EBUSY: connecting, closing, or
 * relayed already). */
int sdp_relay_in_place_here(struct sdp_conn *c);
/* Is `c` relayed in place?  Any process of the family; atomic. */
int sdp_relay_in_place(const struct sdp_conn *c);
/* A socket of `c`, relayed in place, leaves our descriptor table (its
 * descriptor is a plain socket now): drops that reference.  In the owner,
 * the relay ends the connection once the last descriptor is gone. */
void sdp_relay_forget_in_place(struct sdp_conn *c);

/* Owner, progress thread: take the requests that arrived. */
void sdp_relay_serve_requests(void);
/* Was `c` ever relayed?  (An application close then leaves it to the
 * relay, which ends it.)  Atomic: no lock needed. */
int sdp_relay_active(const struct sdp_conn *c);
/* Owner, progress thread, c->lock NOT held: move bytes both ways; when the
 * new image has closed the stream, end the relay (and the connection, if
 * no other descriptor of it is left). */
void sdp_relay_pump(struct sdp_conn *c);
/* Owner, c->lock held: stop relaying (exiting, or the connection is
 * finished); the image reads EOF and its writes fail.  The caller ends the
 * connection. */
void sdp_relay_abort_locked(struct sdp_conn *c);
/* Owner, exiting (or leaving, daemon()), c->lock NOT held: the relay ends
 * with this process, and the connection with it: a close when nothing is
 * left undelivered (in place), else a reset. */
void sdp_relay_owner_exiting(struct sdp_conn *c);
/* Has the relay ended (the image closed its end, or we aborted)? */
int sdp_relay_done(const struct sdp_conn *c);
/* fork() child: the parent relays `c`; drop our copy of its stream. */
void sdp_relay_atfork_child(struct sdp_conn *c);
/* The connection is freed. */
void sdp_relay_free(struct sdp_conn *c);
#endif
