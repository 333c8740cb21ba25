/* SPDX-License-Identifier: MIT */
/*
 * test_policy.c — unit tests for src/policy: every form of the libsdp.conf
 * grammar, first-match-wins, address prefixes (IPv4, IPv6, v4-mapped),
 * port ranges, program globs (checked against fnmatch(3)), roles, the
 * socket()-time program verdict, the exact error messages with FILE:LINE,
 * where the file comes from (argument, LIBSDP_CONFIG_FILE, default path,
 * built-in default), and the reason strings.
 *
 * Output is TAP, as the other unit tests.  Exit 0 if all pass.
 */
#include <arpa/inet.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/policy.h"

#include "unit_tap.h"

#define CHECK_STR(a, b)                                                      \
	do {                                                                 \
		const char *a_ = (a), *b_ = (b);                             \
		if (strcmp(a_, b_)) {                                        \
			printf("#   %s:%d: CHECK_STR(%s, %s):\n#     got  "   \
			       "\"%s\"\n#     want \"%s\"\n", __FILE__,      \
			       __LINE__, #a, #b, a_, b_);                    \
			g_checks_failed++;                                   \
		}                                                            \
	} while (0)

/* ---- helpers --------------------------------------------------------------- */

#define S SDP_ROLE_SERVER
#define C SDP_ROLE_CLIENT
#define TCP SDP_POLICY_TCP
#define SDP SDP_POLICY_SDP
#define BOTH SDP_POLICY_BOTH

union addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

/* "1.2.3.4:80" or "[::1]:80" into a sockaddr. */
static const struct sockaddr *A(const char *s)
{
	static union addr ring[8];
	static int next;
	union addr *a = &ring[next++ % 8];
	char host[64];
	const char *colon = strrchr(s, ':');
	size_t n = (size_t)(colon - s);

	memset(a, 0, sizeof(*a));
	if (s[0] == '[') {
		memcpy(host, s + 1, n - 2);
		host[n - 2] = '\0';
		a->in6.sin6_family = AF_INET6;
		a->in6.sin6_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET6, host, &a->in6.sin6_addr) != 1)
			printf("# bad test address %s\n", s);
	} else {
		memcpy(host, s, n);
		host[n] = '\0';
		a->in.sin_family = AF_INET;
		a->in.sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, host, &a->in.sin_addr) != 1)
			printf("# bad test address %s\n", s);
	}
	return &a->sa;
}

static char g_err[8192];

/* Parse text, capturing the error stream in g_err. */
static struct sdp_policy *P(const char *text)
{
	FILE *f = fmemopen(g_err, sizeof(g_err), "w");
	struct sdp_policy *p;

	memset(g_err, 0, sizeof(g_err));
	p = sdp_policy_parse(text, "t.conf", f);
	fclose(f);
	return p;
}

static enum sdp_policy_verdict M(const struct sdp_policy *p, int role,
				 const char *prog, const char *addr)
{
	return sdp_policy_match(p, role, prog, addr ? A(addr) : NULL, NULL);
}

static int rule_of(const struct sdp_policy *p, int role, const char *prog,
		   const char *addr)
{
	int r = -2;

	sdp_policy_match(p, role, prog, A(addr), &r);
	return r;
}

/* The one error message for `line` (a single bad line). */
static const char *err_of(const char *line)
{
	struct sdp_policy *p = P(line);
	static char msg[512];

	msg[0] = '\0';
	if (p) {
		size_t n = strcspn(g_err, "\n");

		memcpy(msg, g_err, n);
		msg[n] = '\0';
		/* exactly one line reported */
		if (g_err[n] != '\n' || g_err[n + 1]) {
			printf("#   not exactly one error line for '%s':\n%s",
			       line, g_err);
			g_checks_failed++;
		}
		if (sdp_policy_nrules(p) != 0) {
			printf("#   bad line '%s' was not skipped\n", line);
			g_checks_failed++;
		}
	}
	sdp_policy_free(p);
	return msg;
}

/* ---- tests ----------------------------------------------------------------- */

static void test_verdicts_and_roles(void)
{
	struct sdp_policy *p = P("use tcp server a *:*\n"
				 "use sdp listen b *:*\n"
				 "use both client c *:*\n"
				 "use sdp connect d *:*\n"
				 "use tcp all e *:*\n");

	CHECK(p);
	CHECK_STR(g_err, "");
	CHECK_EQ(sdp_policy_nrules(p), 5);
	CHECK_EQ(M(p, S, "a", "1.2.3.4:5"), TCP);
	CHECK_EQ(rule_of(p, C, "a", "1.2.3.4:5"), -1);	/* server only */
	CHECK_EQ(M(p, S, "b", "1.2.3.4:5"), SDP);
	CHECK_EQ(rule_of(p, C, "b", "1.2.3.4:5"), -1);
	CHECK_EQ(M(p, C, "c", "1.2.3.4:5"), BOTH);
	CHECK_EQ(rule_of(p, C, "c", "1.2.3.4:5"), 2);
	CHECK_EQ(rule_of(p, S, "c", "1.2.3.4:5"), -1);
	CHECK_EQ(M(p, C, "d", "1.2.3.4:5"), SDP);
	CHECK_EQ(rule_of(p, S, "d", "1.2.3.4:5"), -1);
	CHECK_EQ(M(p, S, "e", "1.2.3.4:5"), TCP);
	CHECK_EQ(M(p, C, "e", "1.2.3.4:5"), TCP);
	/* nothing matches: both */
	CHECK_EQ(M(p, C, "zzz", "1.2.3.4:5"), BOTH);
	CHECK_EQ(rule_of(p, C, "zzz", "1.2.3.4:5"), -1);
	sdp_policy_free(p);
}

static void test_first_match_wins(void)
{
	struct sdp_policy *p = P("use tcp client * 10.0.0.1:*\n"
				 "use sdp client * 10.0.0.0/8:*\n"
				 "use tcp client * *:22\n"
				 "use both client * *:*\n"
				 "use sdp client * *:*\n");

	CHECK_STR(g_err, "");
	CHECK_EQ(M(p, C, "x", "10.0.0.1:22"), TCP);
	CHECK_EQ(rule_of(p, C, "x", "10.0.0.1:22"), 0);
	CHECK_EQ(M(p, C, "x", "10.0.0.2:22"), SDP);
	CHECK_EQ(rule_of(p, C, "x", "10.0.0.2:22"), 1);
	CHECK_EQ(M(p, C, "x", "11.0.0.2:22"), TCP);
	CHECK_EQ(M(p, C, "x", "11.0.0.2:23"), BOTH);
	CHECK_EQ(rule_of(p, C, "x", "11.0.0.2:23"), 3);
	sdp_policy_free(p);
}

static void test_comments_blanks_whitespace(void)
{
	struct sdp_policy *p = P("# a comment\n"
				 "\n"
				 "   \t  \n"
				 "\tuse\t sdp   client  *\t*:*   # trailing\n"
				 "#use tcp client * *:*\n"
				 "use tcp server * *:*\r\n"
				 "log # nothing\n"
				 "use tcp client zz *:*");	/* no final \n */

	CHECK_STR(g_err, "");
	CHECK_EQ(sdp_policy_nrules(p), 3);
	CHECK_EQ(M(p, C, "x", "1.1.1.1:1"), SDP);
	CHECK_EQ(M(p, S, "x", "1.1.1.1:1"), TCP);
	sdp_policy_free(p);
}

static void test_ipv4_prefixes(void)
{
	struct sdp_policy *p = P("use tcp client * 192.168.1.7:*\n"
				 "use tcp client * 10.128.0.0/9:*\n"
				 "use tcp client * 172.16.0.0/12:*\n"
				 "use sdp client * 0.0.0.0/0:*\n");

	CHECK_STR(g_err, "");
	CHECK_EQ(rule_of(p, C, "x", "192.168.1.7:1"), 0);	/* /32 implied */
	CHECK_EQ(rule_of(p, C, "x", "192.168.1.8:1"), 3);
	CHECK_EQ(rule_of(p, C, "x", "10.128.0.1:1"), 1);
	CHECK_EQ(rule_of(p, C, "x", "10.255.255.255:1"), 1);
	CHECK_EQ(rule_of(p, C, "x", "10.127.255.255:1"), 3);	/* bit 9 */
	CHECK_EQ(rule_of(p, C, "x", "172.31.0.1:1"), 2);
	CHECK_EQ(rule_of(p, C, "x", "172.32.0.1:1"), 3);
	/* /0 matches every IPv4 address, but not IPv6 ones */
	CHECK_EQ(rule_of(p, C, "x", "255.255.255.255:1"), 3);
	CHECK_EQ(rule_of(p, C, "x", "[2001:db8::1]:1"), -1);
	sdp_policy_free(p);

	/* host bits beyond the prefix are ignored; explicit /32 */
	p = P("use tcp client * 10.1.2.3/8:*\nuse sdp client * 1.2.3.4/32:*\n");
	CHECK_STR(g_err, "");
	CHECK_EQ(rule_of(p, C, "x", "10.9.9.9:1"), 0);
	CHECK_EQ(rule_of(p, C, "x", "1.2.3.4:1"), 1);
	CHECK_EQ(rule_of(p, C, "x", "1.2.3.5:1"), -1);
	sdp_policy_free(p);
}

static void test_ipv6_forms(void)
{
	struct sdp_policy *p = P("use tcp client * [::1]:80\n"
				 "use tcp client * ::2/128:80\n"
				 "use tcp client * [2001:db8::]/32:*\n"
				 "use tcp client * [fe80::/10]:1-2\n"
				 "use tcp client * fd00::/8:7\n"
				 "use sdp client * [::]/0:*\n");

	CHECK_STR(g_err, "");
	CHECK_EQ(sdp_policy_nrules(p), 6);
	CHECK_EQ(rule_of(p, C, "x", "[::1]:80"), 0);		/* /128 implied */
	CHECK_EQ(rule_of(p, C, "x", "[::1]:81"), 5);
	CHECK_EQ(rule_of(p, C, "x", "[::2]:80"), 1);
	CHECK_EQ(rule_of(p, C, "x", "[::3]:80"), 5);
	CHECK_EQ(rule_of(p, C, "x", "[2001:db8:ffff::1]:9"), 2);
	CHECK_EQ(rule_of(p, C, "x", "[2001:db9::1]:9"), 5);
	CHECK_EQ(rule_of(p, C, "x", "[febf::1]:2"), 3);
	CHECK_EQ(rule_of(p, C, "x", "[fec0::1]:2"), 5);
	CHECK_EQ(rule_of(p, C, "x", "[fd12::1]:7"), 4);
	/* ::/0 is IPv6 only: IPv4 and v4-mapped addresses are IPv4 */
	CHECK_EQ(rule_of(p, C, "x", "1.2.3.4:7"), -1);
	CHECK_EQ(rule_of(p, C, "x", "[::ffff:1.2.3.4]:7"), -1);
	sdp_policy_free(p);
}

static void test_v4_mapped(void)
{
	struct sdp_policy *p = P("use tcp client * 10.0.0.0/8:*\n"
				 "use sdp client * [::ffff:192.168.0.0]/112:*\n"
				 "use both client * ::ffff:1.2.3.4/128:*\n");

	CHECK_STR(g_err, "");
	/* a mapped socket address matches the IPv4 rule */
	CHECK_EQ(rule_of(p, C, "x", "[::ffff:10.1.2.3]:5"), 0);
	CHECK_EQ(rule_of(p, C, "x", "10.1.2.3:5"), 0);
	/* a mapped rule is an IPv4 rule: matches both spellings */
	CHECK_EQ(rule_of(p, C, "x", "192.168.7.7:5"), 1);
	CHECK_EQ(rule_of(p, C, "x", "[::ffff:192.168.7.7]:5"), 1);
	CHECK_EQ(rule_of(p, C, "x", "192.169.7.7:5"), -1);
	CHECK_EQ(rule_of(p, C, "x", "1.2.3.4:5"), 2);
	CHECK_EQ(rule_of(p, C, "x", "1.2.3.5:5"), -1);
	/* not mapped: a genuine IPv6 address with the same low bits */
	CHECK_EQ(rule_of(p, C, "x", "[::10.1.2.3]:5"), -1);
	sdp_policy_free(p);
}

static void test_ports(void)
{
	struct sdp_policy *p = P("use tcp client * *:80\n"
				 "use tcp client * *:1000-2000\n"
				 "use tcp client * 1.2.3.4:0-0\n"
				 "use tcp client * [::1]:65535\n"
				 "use sdp client * *:*\n");

	CHECK_STR(g_err, "");
	CHECK_EQ(rule_of(p, C, "x", "9.9.9.9:80"), 0);
	CHECK_EQ(rule_of(p, C, "x", "[::9]:80"), 0);	/* * is any family */
	CHECK_EQ(rule_of(p, C, "x", "9.9.9.9:79"), 4);
	CHECK_EQ(rule_of(p, C, "x", "9.9.9.9:999"), 4);
	CHECK_EQ(rule_of(p, C, "x", "9.9.9.9:1000"), 1);
	CHECK_EQ(rule_of(p, C, "x", "9.9.9.9:2000"), 1);
	CHECK_EQ(rule_of(p, C, "x", "9.9.9.9:2001"), 4);
	CHECK_EQ(rule_of(p, C, "x", "1.2.3.4:0"), 2);
	CHECK_EQ(rule_of(p, C, "x", "[::1]:65535"), 3);
	/* no address: only the all-wildcard rule applies */
	CHECK_EQ(M(p, C, "x", NULL), SDP);
	sdp_policy_free(p);

	/* "*" alone is "*:*" */
	p = P("use tcp client * *\n");
	CHECK_STR(g_err, "");
	CHECK_EQ(M(p, C, "x", "1.1.1.1:1"), TCP);
	CHECK_EQ(M(p, C, "x", NULL), TCP);
	sdp_policy_free(p);
}

static void test_program_globs(void)
{
	static const char *const pats[] = {
		"*", "?", "redis-*", "*-server", "nginx", "ngin?", "[ab]*",
		"[!ab]*", "[a-c]x", "[]]x", "[!]]x", "\\*x", "a*b*c", "*a*",
		"python3*", "[", "[a", "a\\", "*?*", "x[-a]", "[z-a]",
	};
	static const char *const names[] = {
		"", "a", "x", "redis-server", "redis-cli", "nginx", "ngin",
		"bx", "cx", "dx", "]x", "*x", "xx", "abc", "aXbYc", "acb",
		"python3", "python3.11", "[", "[a", "a\\", "x-", "xa", "zx",
	};
	struct sdp_policy *p;
	size_t i, j;

	for (i = 0; i < sizeof(pats) / sizeof(pats[0]); i++)
		for (j = 0; j < sizeof(names) / sizeof(names[0]); j++) {
			int want = fnmatch(pats[i], names[j], 0) == 0;
			int got = sdp_policy_glob_match(pats[i], names[j]);

			if (want != got) {
				printf("#   glob '%s' vs '%s': got %d, fnmatch "
				       "%d\n", pats[i], names[j], got, want);
				g_checks_failed++;
			}
		}

	p = P("use tcp all redis-* *:*\nuse sdp all ngin? *:*\n");
	CHECK_EQ(M(p, C, "redis-server", "1.1.1.1:1"), TCP);
	CHECK_EQ(M(p, S, "redis-benchmark", "1.1.1.1:1"), TCP);
	CHECK_EQ(M(p, C, "nginx", "1.1.1.1:1"), SDP);
	CHECK_EQ(M(p, C, "nginx2", "1.1.1.1:1"), BOTH);
	CHECK_EQ(M(p, C, NULL, "1.1.1.1:1"), BOTH);	/* no name: "" */
	sdp_policy_free(p);
}

static void test_program_verdict(void)
{
	struct sdp_policy *p;
	int r;

	/* global rules decide, per list; lists must agree */
	p = P("use sdp all a *:*\n"
	      "use sdp server b *:*\nuse tcp client b *:*\n"
	      "use tcp server c 10.0.0.0/8:*\nuse sdp all c *:*\n"
	      "use sdp server d *:80\nuse sdp all d *:*\n"
	      "use both client e *:*\n"
	      "use tcp all f *\n");
	CHECK_STR(g_err, "");
	CHECK_EQ(sdp_policy_program_verdict(p, "a", &r), SDP);
	CHECK_EQ(r, 0);
	CHECK_EQ(sdp_policy_program_verdict(p, "b", &r), BOTH);	/* disagree */
	CHECK_EQ(r, -1);
	/* an earlier rule for some addresses says otherwise: undecided */
	CHECK_EQ(sdp_policy_program_verdict(p, "c", &r), BOTH);
	/* earlier specific rules with the same verdict do not matter */
	CHECK_EQ(sdp_policy_program_verdict(p, "d", &r), SDP);
	CHECK_EQ(r, 6);
	/* client list says both, server list has nothing (both) */
	CHECK_EQ(sdp_policy_program_verdict(p, "e", &r), BOTH);
	CHECK_EQ(sdp_policy_program_verdict(p, "f", &r), TCP);
	CHECK_EQ(r, 8);
	CHECK_EQ(sdp_policy_program_verdict(p, "nobody", &r), BOTH);
	CHECK_EQ(r, -1);
	sdp_policy_free(p);

	/* built-in default and NULL policy */
	CHECK_EQ(sdp_policy_program_verdict(sdp_policy_builtin(), "x", &r), BOTH);
	CHECK_EQ(sdp_policy_program_verdict(NULL, "x", &r), BOTH);
}

static void test_log_lines(void)
{
	struct sdp_policy *p = P("log destination file libsdp.log min-level 4\n"
				 "log min-level 9\n");
	const struct sdp_policy_log *lg = sdp_policy_log_config(p);

	CHECK_STR(g_err, "");
	CHECK_EQ(lg->dest, SDP_POLICY_LOG_FILE);
	CHECK_STR(lg->file, "libsdp.log");
	CHECK_EQ(lg->min_level, 9);
	sdp_policy_free(p);

	p = P("log min-level 1 destination syslog destination stderr\n");
	lg = sdp_policy_log_config(p);
	CHECK_STR(g_err, "");
	CHECK_EQ(lg->dest, SDP_POLICY_LOG_STDERR);
	CHECK_EQ(lg->min_level, 1);
	CHECK(lg->file == NULL);
	sdp_policy_free(p);

	/* a bad log line changes nothing */
	p = P("log destination syslog\nlog min-level 3 destination bogus\n");
	lg = sdp_policy_log_config(p);
	CHECK_STR(g_err, "libsdp: t.conf:2: unknown log destination 'bogus' "
		  "(expected stderr, syslog or file NAME)\n");
	CHECK_EQ(lg->dest, SDP_POLICY_LOG_SYSLOG);
	CHECK_EQ(lg->min_level, 0);
	sdp_policy_free(p);

	lg = sdp_policy_log_config(NULL);
	CHECK_EQ(lg->dest, SDP_POLICY_LOG_UNSET);
}

static void test_error_messages(void)
{
	static const struct {
		const char *line, *msg;
	} t[] = {
		{ "usa sdp client * *:*",
		  "unknown keyword 'usa' (expected use or log)" },
		{ "use", "missing sdp, tcp or both after 'use'" },
		{ "use sdb client * *:*",
		  "unknown verdict 'sdb' (expected sdp, tcp or both)" },
		{ "use sdp", "missing server, client or all after 'sdp'" },
		{ "use sdp clients * *:*",
		  "unknown role 'clients' (expected server, listen, client, "
		  "connect or all)" },
		{ "use sdp client", "missing program name or glob after 'client'" },
		{ "use sdp client *", "missing ADDRESS:PORT after program '*'" },
		{ "use sdp client * *:* extra",
		  "unexpected 'extra' after ADDRESS:PORT" },
		{ "use sdp client * 1.2.3:80", "bad address '1.2.3'" },
		{ "use sdp client * 1.2.3.256:80", "bad address '1.2.3.256'" },
		{ "use sdp client * host:80", "bad address 'host'" },
		{ "use sdp client * 1.2.3.4",
		  "missing ':PORT' after address '1.2.3.4'" },
		{ "use sdp client * 1.2.3.4/8",
		  "missing ':PORT' after address '1.2.3.4/8'" },
		{ "use sdp client * 1.2.3.4/33:*",
		  "bad prefix '/33' for 1.2.3.4 (0-32)" },
		{ "use sdp client * 1.2.3.4/x:*",
		  "bad prefix '/x' for 1.2.3.4 (0-32)" },
		{ "use sdp client * 1.2.3.4/:*",
		  "bad prefix '/' for 1.2.3.4 (0-32)" },
		{ "use sdp client * [::1]/129:*",
		  "bad prefix '/129' for ::1 (0-128)" },
		{ "use sdp client * ::1:80",
		  "ambiguous IPv6 address '::1:80': write [ADDRESS]:PORT or "
		  "ADDRESS/PREFIX:PORT" },
		{ "use sdp client * [::1:80", "missing ']' in '[::1:80'" },
		{ "use sdp client * [::1]80",
		  "expected ':PORT' after ']', not '80'" },
		{ "use sdp client * [1.2.3.4]:80",
		  "brackets are for IPv6 addresses, not '1.2.3.4'" },
		{ "use sdp client * [::1/8]/8:80",
		  "two prefixes in '[::1/8]/8:80'" },
		{ "use sdp client * */8:80", "'*' takes no /PREFIX" },
		{ "use sdp client * :80", "missing address before ':'" },
		{ "use sdp client * 1.2.3.4:", "missing port after ':'" },
		{ "use sdp client * *:65536",
		  "bad port '65536' (expected N, LO-HI or * with ports 0-65535)" },
		{ "use sdp client * *:http",
		  "bad port 'http' (expected N, LO-HI or * with ports 0-65535)" },
		{ "use sdp client * *:1-",
		  "bad port '1-' (expected N, LO-HI or * with ports 0-65535)" },
		{ "use sdp client * *:-5",
		  "bad port '-5' (expected N, LO-HI or * with ports 0-65535)" },
		{ "use sdp client * *:2000-1000",
		  "port range reversed in '2000-1000' (1000 < 2000)" },
		{ "log destination",
		  "'destination' needs stderr, syslog or file NAME" },
		{ "log destination file", "'file' needs a NAME" },
		{ "log min-level", "'min-level' needs a level 1-9" },
		{ "log min-level 0", "bad min-level '0' (expected 1-9)" },
		{ "log min-level 10", "bad min-level '10' (expected 1-9)" },
		{ "log level 3",
		  "unknown log option 'level' (expected destination or "
		  "min-level)" },
		{ "use a b c d e f g h i j k l m n", "too many fields" },
	};
	char want[512];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(want, sizeof(want), "libsdp: t.conf:1: %s", t[i].msg);
		CHECK_STR(err_of(t[i].line), want);
	}
}

static void test_errors_skip_only_bad_lines(void)
{
	struct sdp_policy *p = P("use tcp client * 10.0.0.0/8:*\n"
				 "use sdp client * 10.0.0.0/99:*\n"
				 "\n"
				 "bogus\n"
				 "use sdp client * *:*\n");

	CHECK_STR(g_err,
		  "libsdp: t.conf:2: bad prefix '/99' for 10.0.0.0 (0-32)\n"
		  "libsdp: t.conf:4: unknown keyword 'bogus' (expected use or "
		  "log)\n");
	CHECK_EQ(sdp_policy_nrules(p), 2);
	CHECK_EQ(M(p, C, "x", "10.1.1.1:1"), TCP);
	CHECK_EQ(M(p, C, "x", "11.1.1.1:1"), SDP);
	sdp_policy_free(p);

	/* a NULL error stream is silent */
	p = sdp_policy_parse("bogus\nuse tcp all * *:*\n", "x", NULL);
	CHECK_EQ(sdp_policy_nrules(p), 1);
	sdp_policy_free(p);
}

/* Load with a captured error stream. */
static struct sdp_policy *L(const char *path)
{
	FILE *f = fmemopen(g_err, sizeof(g_err), "w");
	struct sdp_policy *p;

	memset(g_err, 0, sizeof(g_err));
	p = sdp_policy_load(path, f);
	fclose(f);
	return p;
}

/* A file that is not a configuration (a binary, a typo'd path to some other
 * file) is reported in a few readable lines: quoted bytes that are not
 * printable ASCII come out as \xNN, and after the first errors the rest are
 * counted, not printed. */
static void test_garbage_file(void)
{
	char text[4096], *q = text;
	unsigned i, lines = 0, unreadable = 0, n;
	const char *s;

	for (i = 0; i < 300; i++) {
		*q++ = (char)(0x80 + i % 100);
		*q++ = '\x1b';
		*q++ = '[';
		*q++ = 'A';
		*q++ = '\n';
	}
	*q = '\0';
	sdp_policy_free(P(text));
	for (s = g_err; *s; s++) {
		lines += *s == '\n';
		unreadable += *s != '\n' && (*s < 0x20 || *s >= 0x7f);
	}
	CHECK_EQ(unreadable, 0);
	CHECK(lines <= 12);
	CHECK(strstr(g_err, "libsdp: t.conf:1: unknown keyword '\\x80\\x1b[A'") !=
	      NULL);
	CHECK(strstr(g_err, "libsdp: t.conf: 290 more errors not shown\n") != NULL);
	n = 0;
	for (s = g_err; (s = strstr(s, "unknown keyword")); s++)
		n++;
	CHECK_EQ(n, 10);
}

static void test_files(void)
{
	char dir[] = "/tmp/test_policy.XXXXXX", path[128], want[512];
	struct sdp_policy *p;
	struct stat st;
	FILE *f;
	int r;

	if (!mkdtemp(dir)) {
		CHECK(0);
		return;
	}
	snprintf(path, sizeof(path), "%s/libsdp.conf", dir);
	f = fopen(path, "w");
	fputs("# test\nuse tcp client * *:22\nuse sdp clinet * *:*\n"
	      "use sdp all * *:*\n", f);
	fclose(f);

	/* explicit path */
	p = L(path);
	snprintf(want, sizeof(want), "libsdp: %s:3: unknown role 'clinet' "
		 "(expected server, listen, client, connect or all)\n", path);
	CHECK_STR(g_err, want);
	CHECK_EQ(sdp_policy_nrules(p), 2);
	CHECK_STR(sdp_policy_source(p), path);
	CHECK_EQ(M(p, C, "x", "1.1.1.1:22"), TCP);
	CHECK_EQ(M(p, S, "x", "1.1.1.1:22"), SDP);
	sdp_policy_free(p);

	/* through LIBSDP_CONFIG_FILE */
	setenv(SDP_POLICY_ENV, path, 1);
	p = L(NULL);
	CHECK_STR(sdp_policy_source(p), path);
	CHECK_EQ(sdp_policy_nrules(p), 2);
	sdp_policy_free(p);

	/* LIBSDP_CONFIG_FILE names a missing file: one error, built-in */
	snprintf(path, sizeof(path), "%s/missing.conf", dir);
	setenv(SDP_POLICY_ENV, path, 1);
	p = L(NULL);
	snprintf(want, sizeof(want), "libsdp: %s: cannot read the "
		 "configuration: No such file or directory; using the "
		 "built-in default\n", path);
	CHECK_STR(g_err, want);
	CHECK_STR(sdp_policy_source(p), "built-in");
	CHECK_EQ(sdp_policy_nrules(p), 2);
	CHECK_EQ(M(p, C, "x", "1.1.1.1:22"), BOTH);
	sdp_policy_free(p);

	/* an explicit missing path is the same error */
	p = L(path);
	CHECK_STR(g_err, want);
	sdp_policy_free(p);

	/* default path: a missing /etc/libsdp.conf is not an error */
	unsetenv(SDP_POLICY_ENV);
	p = L(NULL);
	if (stat(SDP_POLICY_DEFAULT_PATH, &st) < 0) {
		CHECK_STR(g_err, "");
		CHECK_STR(sdp_policy_source(p), "built-in");
	} else {
		printf("# %s exists: default-path case not checked\n",
		       SDP_POLICY_DEFAULT_PATH);
		CHECK_STR(sdp_policy_source(p), SDP_POLICY_DEFAULT_PATH);
	}
	sdp_policy_free(p);
	/* an empty LIBSDP_CONFIG_FILE counts as unset */
	setenv(SDP_POLICY_ENV, "", 1);
	p = L(NULL);
	if (stat(SDP_POLICY_DEFAULT_PATH, &st) < 0)
		CHECK_STR(g_err, "");
	sdp_policy_free(p);
	unsetenv(SDP_POLICY_ENV);

	snprintf(path, sizeof(path), "%s/libsdp.conf", dir);
	r = unlink(path);
	CHECK_EQ(r, 0);
	rmdir(dir);
}

static void test_builtin_default(void)
{
	const struct sdp_policy *b = sdp_policy_builtin();
	char buf[128];
	int r;

	CHECK_EQ(sdp_policy_nrules(b), 2);
	CHECK_EQ(sdp_policy_match(b, S, "x", A("1.2.3.4:80"), &r), BOTH);
	CHECK_EQ(r, 0);
	CHECK_EQ(sdp_policy_match(b, C, "x", A("[::1]:80"), &r), BOTH);
	CHECK_EQ(r, 1);
	CHECK_EQ(sdp_policy_match(NULL, C, "x", A("1.2.3.4:80"), &r), BOTH);
	CHECK_EQ(r, 1);
	CHECK_STR(sdp_policy_describe(b, BOTH, 1, buf, sizeof(buf)),
		  "built-in rule 2 both");
	/* freeing the built-in one is a no-op */
	sdp_policy_free((struct sdp_policy *)b);
	CHECK_EQ(sdp_policy_nrules(b), 2);
}

static void test_describe(void)
{
	struct sdp_policy *p = P("\nuse tcp client * *:22\nuse sdp all * *:*\n");
	char buf[128], small[8];
	int r;
	enum sdp_policy_verdict v = sdp_policy_match(p, C, "x",
						     A("1.1.1.1:22"), &r);

	CHECK_STR(sdp_policy_describe(p, v, r, buf, sizeof(buf)),
		  "rule 1 (t.conf:2) tcp");
	v = sdp_policy_match(p, S, "x", A("1.1.1.1:22"), &r);
	CHECK_STR(sdp_policy_describe(p, v, r, buf, sizeof(buf)),
		  "rule 2 (t.conf:3) sdp");
	CHECK_STR(sdp_policy_describe(p, BOTH, -1, buf, sizeof(buf)),
		  "no rule matched: both");
	CHECK_STR(sdp_policy_describe(p, TCP, 0, small, sizeof(small)),
		  "rule 1 ");
	CHECK_STR(sdp_policy_verdict_name(SDP), "sdp");
	sdp_policy_free(p);
}

static void test_program_name(void)
{
	char buf[64], tiny[5];

	sdp_policy_program_name(buf, sizeof(buf));
	CHECK_STR(buf, "test_policy");
	sdp_policy_program_name(tiny, sizeof(tiny));
	CHECK_STR(tiny, "test");
}

static void test_other_families(void)
{
	struct sdp_policy *p = P("use tcp client * 1.2.3.4:*\n"
				 "use sdp client * *:*\n");
	struct sockaddr sa = { .sa_family = AF_UNIX };
	int r;

	CHECK_EQ(sdp_policy_match(p, C, "x", &sa, &r), SDP);
	CHECK_EQ(r, 1);
	sdp_policy_free(p);
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{ "verdicts and roles (server/listen/client/connect/all)",
	  test_verdicts_and_roles },
	{ "first match wins", test_first_match_wins },
	{ "comments, blank lines, whitespace, CRLF", test_comments_blanks_whitespace },
	{ "IPv4 prefixes /0 /8 /9 /12 /32", test_ipv4_prefixes },
	{ "IPv6 forms and prefixes /0 /10 /32 /128", test_ipv6_forms },
	{ "v4-mapped addresses and rules", test_v4_mapped },
	{ "ports: single, ranges, edges, *", test_ports },
	{ "program globs agree with fnmatch", test_program_globs },
	{ "socket()-time program verdict", test_program_verdict },
	{ "log lines", test_log_lines },
	{ "exact error messages", test_error_messages },
	{ "bad lines are skipped, the rest applies", test_errors_skip_only_bad_lines },
	{ "a binary file: escaped, and ten errors at most", test_garbage_file },
	{ "files: explicit, LIBSDP_CONFIG_FILE, missing, default path",
	  test_files },
	{ "built-in default", test_builtin_default },
	{ "reason strings", test_describe },
	{ "program short name", test_program_name },
	{ "non-IP addresses match only wildcard rules", test_other_families },
};

int main(void)
{
	size_t n = sizeof(tests) / sizeof(tests[0]);
	int failed = 0;

	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		g_checks_failed = 0;
		tests[i].fn();
		printf("%sok %zu - %s\n", g_checks_failed ? "not " : "", i + 1,
		       tests[i].name);
		if (g_checks_failed)
			failed++;
	}
	if (failed)
		printf("# %d of %zu tests failed\n", failed, n);
	return failed ? 1 : 0;
}
