/* SPDX-License-Identifier: MIT */
/*
 * libthreads.h — which threads of this process are libsdp's own (the
 * progress thread, the verbs event thread), so that code acting for the
 * application can tell whether the application itself has other threads
 * (exec.c: a descriptor swapped in the parent for the length of a spawn is
 * safe only when no other application thread can look at it).
 */
#ifndef SDP_BASE_LIBTHREADS_H
#define SDP_BASE_LIBTHREADS_H

#include <pthread.h>

/* pthread_create() for a library thread, which calls
 * sdp_lib_thread_started() first thing: until then it counts as starting.
 * 0 or an error number, as pthread_create(). */
int sdp_lib_thread_create(pthread_t *th, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg);
/* Called by a library thread when it starts running. */
void sdp_lib_thread_started(void);
/* Before a raw clone() (atfork.h): wait, up to a second, until no library
 * thread is between its creation and its first instructions, and hold
 * off new ones until sdp_lib_threads_release() (in the parent, or in the
 * child with child=1).  glibc's thread list, which that child keeps, would
 * show such a thread as starting for ever, and the child's
 * setuid()/setgroups() waited for it (vsftpd's session child hung in
 * setgroups). */
void sdp_lib_threads_hold(void);
void sdp_lib_threads_release(int child);
/* Nonzero in libsdp's own threads (set by sdp_lib_thread_started). */
extern __thread int sdp_in_lib_thread;
/* Library threads started in this process (a fork child has none until it
 * starts its own; a thread created but not yet running is not counted, so
 * callers err on the side of "the application has other threads"). */
int sdp_lib_threads(void);
/* 1 when the only threads of this process are the caller and library
 * threads (read from /proc/self/status), 0 otherwise or when unknown. */
int sdp_app_single_threaded(void);

#endif
