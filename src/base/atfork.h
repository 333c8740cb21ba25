/* SPDX-License-Identifier: MIT */
/*
 * One pthread_atfork() registration for the whole library, so that the
 * order of the fork handlers is ours, not the order in which modules
 * happened to initialise.
 *
 * Why: handlers registered with pthread_atfork() run their prepare parts in
 * reverse registration order and their parent/child parts in registration
 * order.  The listener switch (socket/lsnfd.c) registered first, at load
 * time, so its parent handler ran while later modules still held the locks
 * their prepare handlers took: a "both" listener that could not be shared
 * (verbs) closed its SDP side in the parent and waited for the stats lock
 * held by that same thread, for ever.  In the child it ran before the
 * transports had forgotten the parent's objects.
 *
 * Inner handlers protect one module's state across fork (take its lock in
 * prepare, drop or re-initialise it after).  Outer handlers act on the
 * whole library (switching listeners): their prepare runs before every
 * inner prepare, their parent/child parts after every inner one, when each
 * module is consistent and unlocked again.  Within a class, pthread_atfork's
 * order.  Async-signal-safety rules of fork handlers apply to both.
 */
#ifndef SDP_BASE_ATFORK_H
#define SDP_BASE_ATFORK_H

enum sdp_atfork_class { SDP_ATFORK_INNER, SDP_ATFORK_OUTER };

/* Any part may be NULL.  0, or -ENOMEM when the (small, fixed) table is
 * full: a programming error, reported once on stderr. */
int sdp_atfork_add(enum sdp_atfork_class cls, void (*prepare)(void),
		   void (*parent)(void), void (*child)(void));

/* Run `call` between the library's prepare handlers and its parent or child
 * ones, as fork() runs them: for a process made by a raw clone() with
 * fork's semantics, which glibc's handlers never see.  `call` returns what
 * clone() does (0 in the child); errno is kept from it. */
long sdp_atfork_around(long (*call)(void *), void *arg);

#endif
