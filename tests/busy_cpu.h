/* SPDX-License-Identifier: MIT */
/*
 * busy_cpu.h — for tests: other work that keeps a CPU busy, as on a loaded
 * host.  busy_cpu_start() pins the calling process (and the threads it
 * starts later) to the CPU it runs on and starts a process that only spins
 * there; it dies with its parent.  Returns its pid, or -1 (errno).
 */
#ifndef SDP_TESTS_BUSY_CPU_H
#define SDP_TESTS_BUSY_CPU_H

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static inline pid_t busy_cpu_start(void)
{
	pid_t parent = getpid(), pid;
	int cpu = sched_getcpu();
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu < 0 ? 0 : cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);	/* it died before the prctl */
		for (;;)
			__asm__ volatile("" ::: "memory");
	}
	return pid;
}

static inline void busy_cpu_stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

#endif
