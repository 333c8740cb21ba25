/* SPDX-License-Identifier: MIT */
/*
 * libthreads.c — count of libsdp's own threads (see libthreads.h).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/libthreads.h"

/* Stamped with the pid: after fork() the child's count reads as 0 without
 * an atfork handler (threads are not copied by fork). */
static struct {
	pthread_mutex_t lock;
	pid_t pid;
	int n;
	int starting;	/* created, not yet running */
} T = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* T.lock held: start this process's count afresh after a fork. */
static void own_locked(pid_t me)
{
	if (T.pid != me) {
		T.pid = me;
		T.n = 0;
		T.starting = 0;
	}
}

int sdp_lib_thread_create(pthread_t *th, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg)
{
	int r;

	pthread_mutex_lock(&T.lock);
	own_locked(getpid());
	T.starting++;
	pthread_mutex_unlock(&T.lock);
	r = pthread_create(th, attr, fn, arg);
	if (r) {
		pthread_mutex_lock(&T.lock);
		T.starting--;
		pthread_mutex_unlock(&T.lock);
	}
	return r;
}

void sdp_lib_threads_hold(void)
{
	struct timespec nap = { 0, 100000 };
	pid_t me = getpid();

	for (int i = 0; i < 10000; i++) {
		pthread_mutex_lock(&T.lock);
		if (T.pid != me || !T.starting)
			return;		/* held: no creation until released */
		pthread_mutex_unlock(&T.lock);
		nanosleep(&nap, NULL);
	}
	pthread_mutex_lock(&T.lock);	/* a thread that never started */
}

void sdp_lib_threads_release(int child)
{
	if (child)
		pthread_mutex_init(&T.lock, NULL);	/* copied held */
	else
		pthread_mutex_unlock(&T.lock);
}

__thread int sdp_in_lib_thread;

void sdp_lib_thread_started(void)
{
	pid_t me = getpid();

	sdp_in_lib_thread = 1;
	pthread_mutex_lock(&T.lock);
	own_locked(me);
	T.n++;
	if (T.starting)
		T.starting--;
	pthread_mutex_unlock(&T.lock);
}

int sdp_lib_threads(void)
{
	int n;

	pthread_mutex_lock(&T.lock);
	n = T.pid == getpid() ? T.n : 0;
	pthread_mutex_unlock(&T.lock);
	return n;
}

/* The "Threads:" line of /proc/self/status, or -1. */
static int threads_in_process(void)
{
	char buf[4096], *p;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	/* Raw calls: read and close are interposed by this library. */
	n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strstr(buf, "\nThreads:");
	return p ? atoi(p + 9) : -1;
}

int sdp_app_single_threaded(void)
{
	int n = threads_in_process();

	return n > 0 && n - sdp_lib_threads() <= 1;
}
