// SPDX-License-Identifier: MIT
/*
 * rawsys.c — the C library's syscall(), for the library's own raw calls.
 *
 * The socket layer interposes syscall() (socket/rawsys_hook.c: programs
 * such as Node.js close descriptors with syscall(SYS_close, fd)), and a
 * call to syscall() from inside the library would find that interposer
 * first.  So the whole library is built with `syscall` renamed to
 * sdp_raw_syscall (CMakeLists.txt), which calls the C library's directly.
 * The pointer is resolved while the library loads, before anything runs
 * that may need it: after that this is async-signal-safe (exec.c calls it
 * after vfork()).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#undef syscall

typedef long (*syscall_fn)(long, ...);

static syscall_fn real_syscall;

__attribute__((constructor(101))) static void rawsys_ctor(void)
{
	*(void **)&real_syscall = dlsym(RTLD_NEXT, "syscall");
	if (!real_syscall)
		*(void **)&real_syscall = dlsym(RTLD_DEFAULT, "syscall");
}

long sdp_raw_syscall(long nr, ...)
{
	long a[6];
	va_list ap;
	int i;

	if (!real_syscall)
		rawsys_ctor();
	if (!real_syscall) {
		errno = ENOSYS;
		return -1;
	}
	/* As the C library's own: six argument registers, whatever the
	 * call uses of them. */
	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
