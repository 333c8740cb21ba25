/* SPDX-License-Identifier: MIT */
/*
 * tsan.h — telling ThreadSanitizer about hand-offs it cannot see.
 *
 * A pointer stored in an epoll item (epoll_ctl) and returned by epoll_wait
 * in another thread is ordered by the kernel, but ThreadSanitizer only
 * models user-space synchronisation and would report the object's first
 * use in that thread as a race with its initialisation.  Release on the
 * way in and acquire on the way out say what the kernel guarantees.
 * Nothing in other builds.
 */
#ifndef SDP_BASE_TSAN_H
#define SDP_BASE_TSAN_H

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define SDP_TSAN_RELEASE(p) __tsan_release((void *)(p))
#define SDP_TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#else
#define SDP_TSAN_RELEASE(p) ((void)0)
#define SDP_TSAN_ACQUIRE(p) ((void)0)
#endif

#endif
