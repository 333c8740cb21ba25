/* SPDX-License-Identifier: MIT */
/*
 * policy.h — which TCP sockets the socket switch carries over SDP: the
 * libsdp.conf rules (docs/reference §8.2 grammar), parsed once at start-up
 * and then matched, without allocation, locks or stdio, at socket(),
 * listen() and connect() time.
 *
 * File syntax, one statement per line, `#` starts a comment:
 *
 *   use sdp|tcp|both server|listen|client|connect|all PROGRAM ADDRESS
 *   log [destination stderr|syslog|file NAME] [min-level 1-9]
 *
 * PROGRAM is an fnmatch(3) glob (`*`, `?`, `[...]`, `\` escapes) matched
 * against the program's short name (sdp_policy_program_name()).
 *
 * ADDRESS is `*` (any address, any port) or HOST:PORTS where
 *   HOST  = `*` | IPv4[/0-32] | [IPv6][/0-128] | [IPv6/0-128] | IPv6/0-128
 *   PORTS = `*` | N | LO-HI (inclusive, LO <= HI)
 * A bare IPv6 address must carry a /PREFIX before the port (`::1/128:80`),
 * otherwise write it in brackets (`[::1]:80`): `::1:80` is ambiguous and is
 * rejected rather than guessed.  Host bits beyond the prefix are ignored.
 *
 * IPv4 and IPv6: an IPv4-mapped IPv6 socket address (::ffff:a.b.c.d, what
 * a dual-stack socket sees for IPv4 peers) is matched as the IPv4 address
 * it carries, so IPv4 rules cover it.  A rule written in the mapped range
 * with a prefix of at least 96 (`::ffff:10.0.0.0/104`) is an IPv4 rule
 * (`10.0.0.0/8`).  Other IPv6 rules, `::/0` included, match only genuine
 * IPv6 addresses; `*` matches both families.
 *
 * Evaluation: rules are tried in file order, server rules (server, listen,
 * all) against the local bound address at listen(), client rules (client,
 * connect, all) against the remote address at connect(); the first rule
 * whose program, address and ports all match decides.  No match: BOTH.
 * Unlike libsdp 1.1.108, a file with no `use` rule at all also means BOTH
 * (libsdp made that SDP), so a file holding only `log` lines never makes
 * connections to TCP-only peers fail.
 *
 * Where the rules come from (sdp_policy_load(NULL, ...)):
 *   - $LIBSDP_CONFIG_FILE if set and non-empty (a missing file is an error,
 *     reported once; the built-in default then applies);
 *   - else SDP_POLICY_DEFAULT_PATH (/etc/libsdp.conf, libsdp's
 *     SYSCONFDIR "/libsdp.conf"); a missing file there is not an error;
 *   - else the built-in default, the shipped libsdp.conf:
 *       use both server * *:*
 *       use both client * *:*
 *     (listen on SDP and TCP alike; connect over SDP, fall back to TCP).
 *
 * Errors: each bad line is reported once on the error stream as
 * "libsdp: FILE:LINE: what is wrong" and skipped; the other lines apply.
 */
#ifndef SDP_POLICY_H
#define SDP_POLICY_H

#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

#define SDP_POLICY_DEFAULT_PATH "/etc/libsdp.conf"
#define SDP_POLICY_ENV "LIBSDP_CONFIG_FILE"

/* Roles: a bit mask (`all` in the file is both bits). */
#define SDP_ROLE_SERVER 0x1
#define SDP_ROLE_CLIENT 0x2

enum sdp_policy_verdict {
	SDP_POLICY_TCP = 0,	/* plain kernel TCP */
	SDP_POLICY_SDP,		/* SDP only: no fallback */
	SDP_POLICY_BOTH,	/* listen on both / try SDP, fall back to TCP */
};

/* `log` statement, as parsed (the last option given wins). */
enum sdp_policy_log_dest {
	SDP_POLICY_LOG_UNSET = 0,
	SDP_POLICY_LOG_STDERR,
	SDP_POLICY_LOG_SYSLOG,
	SDP_POLICY_LOG_FILE,
};

struct sdp_policy_log {
	enum sdp_policy_log_dest dest;
	const char *file;	/* SDP_POLICY_LOG_FILE: the NAME given */
	int min_level;		/* 1 (debug) .. 9 (errors only); 0 = unset */
};

struct sdp_policy;

/*
 * Parse `path`, or, when path is NULL, $LIBSDP_CONFIG_FILE or the default
 * path as described above.  Bad lines are reported on `errstream` (may be
 * NULL: silent) and skipped.  Never fails for file contents; returns NULL
 * only when out of memory, and every function below treats a NULL policy
 * as the built-in default.
 */
struct sdp_policy *sdp_policy_load(const char *path, FILE *errstream);
/* Parse rules from a string (tests, sdp_run --rule); `name` labels errors. */
struct sdp_policy *sdp_policy_parse(const char *text, const char *name,
				    FILE *errstream);
/* The built-in default (static; sdp_policy_free ignores it). */
const struct sdp_policy *sdp_policy_builtin(void);
void sdp_policy_free(struct sdp_policy *p);

/* Number of `use` rules that were accepted. */
size_t sdp_policy_nrules(const struct sdp_policy *p);
/* The file the rules came from ("built-in" for the default). */
const char *sdp_policy_source(const struct sdp_policy *p);
/* The `log` settings (all unset when there was no `log` line). */
const struct sdp_policy_log *sdp_policy_log_config(const struct sdp_policy *p);

/*
 * Decide for listen() (role SDP_ROLE_SERVER, addr = local bound address)
 * or connect() (SDP_ROLE_CLIENT, addr = remote address).  addr may be NULL
 * or of another family: then only rules with `*` address and ports match.
 * If `rule` is not NULL it receives the index of the deciding rule, or -1.
 * Async-signal-safe: no allocation, no locks, no stdio.
 */
enum sdp_policy_verdict sdp_policy_match(const struct sdp_policy *p, int role,
					 const char *program,
					 const struct sockaddr *addr,
					 int *rule);

/*
 * Decide at socket() time, before any address is known (libsdp's
 * __sdp_match_by_program).  In each list, the first program-matching rule
 * with `*` address and `*` ports decides, provided every earlier
 * program-matching rule of that list (which names addresses or ports) has
 * the same verdict; otherwise the list says BOTH.  The two lists must
 * agree, else BOTH.  `rule` as above (the server list's rule when they
 * agree, -1 for BOTH by disagreement).
 */
enum sdp_policy_verdict sdp_policy_program_verdict(const struct sdp_policy *p,
						   const char *program,
						   int *rule);

const char *sdp_policy_verdict_name(enum sdp_policy_verdict v);

/*
 * Human-readable reason for logs and sdpstat, e.g.
 *   "rule 3 (/etc/libsdp.conf:12) tcp"
 *   "built-in rule 2 both"
 *   "no rule matched: both"
 * Always NUL-terminates (truncating); returns buf.  Async-signal-safe.
 */
char *sdp_policy_describe(const struct sdp_policy *p,
			  enum sdp_policy_verdict v, int rule, char *buf,
			  size_t len);

/*
 * The program's short name, for PROGRAM globs: program_invocation_short_name
 * (argv[0] without its directory, as libsdp matched) or, if that is empty,
 * the basename of /proc/self/exe.  Call it once early (library
 * constructor) and keep the copy: some servers overwrite argv[0] later to
 * retitle themselves.  Returns buf.
 */
char *sdp_policy_program_name(char *buf, size_t len);

/* fnmatch(pattern, name, 0) for byte strings, without allocation (glibc's
 * fnmatch may malloc in multibyte locales).  1 = match. */
int sdp_policy_glob_match(const char *pattern, const char *name);

#endif /* SDP_POLICY_H */
