/* SPDX-License-Identifier: MIT */
/*
 * policy.c — libsdp.conf: a hand-written line parser (no flex/bison: this
 * runs inside an LD_PRELOAD library, at start-up, before the program's
 * main) and the matcher the socket switch calls on socket(), listen() and
 * connect().
 *
 * Everything is allocated at load time: the rule array and one string pool
 * for program globs.  Matching only reads them, so it is safe from any
 * thread and from signal handlers (async-signal-safe functions may create
 * sockets).  Syntax and semantics are documented in policy.h.
 */
#include "policy/policy.h"
#include "policy/text.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sdp_policy_rule {
	enum sdp_policy_verdict verdict;
	unsigned roles;			/* SDP_ROLE_* mask */
	unsigned line;			/* in the source, for reasons */
	uint8_t family;			/* 0 any address, 4 or 6 */
	uint8_t prefix;			/* bits of addr that must match */
	uint8_t addr[16];		/* 4 bytes used for IPv4 */
	uint16_t port_lo, port_hi;	/* 0-65535 = any port */
	const char *program;		/* glob, in the policy's pool */
};

struct sdp_policy {
	struct sdp_policy_rule *rules;
	size_t nrules, cap;
	char *source;			/* file name (malloc) */
	struct sdp_policy_log log;
	char *log_file;			/* log.file points here */
	unsigned is_static:1;		/* builtin_policy: never freed */
	unsigned is_default:1;		/* the built-in rules (reasons) */
};

/* ---- the built-in default ------------------------------------------------ */

static struct sdp_policy_rule builtin_rules[] = {
	{ .verdict = SDP_POLICY_BOTH, .roles = SDP_ROLE_SERVER, .line = 1,
	  .port_hi = 65535, .program = "*" },
	{ .verdict = SDP_POLICY_BOTH, .roles = SDP_ROLE_CLIENT, .line = 2,
	  .port_hi = 65535, .program = "*" },
};

static struct sdp_policy builtin_policy = {
	.rules = builtin_rules,
	.nrules = sizeof(builtin_rules) / sizeof(builtin_rules[0]),
	.source = (char *)"built-in",
	.is_static = 1,
	.is_default = 1,
};

const struct sdp_policy *sdp_policy_builtin(void)
{
	return &builtin_policy;
}

static const struct sdp_policy *or_builtin(const struct sdp_policy *p)
{
	return p ? p : &builtin_policy;
}

size_t sdp_policy_nrules(const struct sdp_policy *p)
{
	return or_builtin(p)->nrules;
}

const char *sdp_policy_source(const struct sdp_policy *p)
{
	return or_builtin(p)->source;
}

const struct sdp_policy_log *sdp_policy_log_config(const struct sdp_policy *p)
{
	return &or_builtin(p)->log;
}

void sdp_policy_free(struct sdp_policy *p)
{
	size_t i;

	if (!p || p->is_static)
		return;
	for (i = 0; i < p->nrules; i++)
		free((char *)p->rules[i].program);
	free(p->rules);
	free(p->source);
	free(p->log_file);
	free(p);
}

/* ---- glob ------------------------------------------------------------------ */

/* One [...] expression at p (just past '['); returns the char past ']', or
 * NULL if unterminated (then '[' is an ordinary character, as in glibc). */
static const char *bracket_match(const char *p, unsigned char c, int *hit)
{
	int neg = 0, match = 0, first = 1;

	if (*p == '!' || *p == '^') {
		neg = 1;
		p++;
	}
	for (;; first = 0) {
		unsigned char lo, hi;

		if (!*p)
			return NULL;
		if (*p == ']' && !first)
			break;
		if (*p == '\\' && p[1])
			p++;
		lo = hi = (unsigned char)*p++;
		if (*p == '-' && p[1] && p[1] != ']') {
			p++;
			if (*p == '\\' && p[1])
				p++;
			hi = (unsigned char)*p++;
		}
		if (c >= lo && c <= hi)
			match = 1;
	}
	*hit = match != neg;
	return p + 1;
}

int sdp_policy_glob_match(const char *pat, const char *name)
{
	const char *star_p = NULL, *star_n = NULL;

	/* Classic single-backtrack glob: a later '*' supersedes an earlier
	 * one, so remembering only the last star is enough. */
	while (*name) {
		const char *next = NULL;
		int hit = 0;

		switch (*pat) {
		case '*':
			star_p = ++pat;
			star_n = name;
			continue;
		case '?':
			hit = 1;
			next = pat + 1;
			break;
		case '[':
			next = bracket_match(pat + 1, (unsigned char)*name, &hit);
			if (next)
				break;
			hit = *name == '[';
			next = pat + 1;
			break;
		case '\\':
			/* A trailing backslash matches nothing (glibc). */
			hit = pat[1] && pat[1] == *name;
			next = pat + 2;
			break;
		default:
			hit = *pat && *pat == *name;
			next = pat + 1;
			break;
		}
		if (hit) {
			pat = next;
			name++;
		} else if (star_p) {
			pat = star_p;
			name = ++star_n;
		} else {
			return 0;
		}
	}
	while (*pat == '*')
		pat++;
	return !*pat;
}

/* ---- matching ------------------------------------------------------------- */

struct match_addr {
	uint8_t family;		/* 0 none, 4, 6 */
	uint8_t addr[16];
	uint16_t port;
};

static void match_addr_from(const struct sockaddr *sa, struct match_addr *m)
{
	memset(m, 0, sizeof(*m));
	if (!sa)
		return;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)sa;

		m->family = 4;
		memcpy(m->addr, &sin->sin_addr, 4);
		m->port = ntohs(sin->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)sa;

		m->port = ntohs(sin6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			m->family = 4;
			memcpy(m->addr, sin6->sin6_addr.s6_addr + 12, 4);
		} else {
			m->family = 6;
			memcpy(m->addr, sin6->sin6_addr.s6_addr, 16);
		}
	}
}

static int prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (memcmp(a, b, full))
		return 0;
	if (!rest)
		return 1;
	return !((a[full] ^ b[full]) & (uint8_t)(0xff << (8 - rest)));
}

static int rule_is_global(const struct sdp_policy_rule *r)
{
	return !r->family && r->port_lo == 0 && r->port_hi == 65535;
}

static int rule_matches_addr(const struct sdp_policy_rule *r,
			     const struct match_addr *m)
{
	if (rule_is_global(r))
		return 1;
	if (!m->family)
		return 0;
	if (m->port < r->port_lo || m->port > r->port_hi)
		return 0;
	if (!r->family)
		return 1;
	return r->family == m->family && prefix_equal(r->addr, m->addr, r->prefix);
}

enum sdp_policy_verdict sdp_policy_match(const struct sdp_policy *p, int role,
					 const char *program,
					 const struct sockaddr *addr,
					 int *rule)
{
	struct match_addr m;
	size_t i;

	p = or_builtin(p);
	match_addr_from(addr, &m);
	for (i = 0; i < p->nrules; i++) {
		const struct sdp_policy_rule *r = &p->rules[i];

		if (!(r->roles & (unsigned)role) ||
		    !sdp_policy_glob_match(r->program, program ? program : "") ||
		    !rule_matches_addr(r, &m))
			continue;
		if (rule)
			*rule = (int)i;
		return r->verdict;
	}
	if (rule)
		*rule = -1;
	return SDP_POLICY_BOTH;
}

/* One list's answer at socket() time (see policy.h). */
static enum sdp_policy_verdict program_list_verdict(const struct sdp_policy *p,
						    unsigned role,
						    const char *program,
						    int *rule)
{
	unsigned seen = 0;	/* verdicts of earlier specific rules */
	size_t i;

	*rule = -1;
	for (i = 0; i < p->nrules; i++) {
		const struct sdp_policy_rule *r = &p->rules[i];

		if (!(r->roles & role) ||
		    !sdp_policy_glob_match(r->program, program))
			continue;
		if (!rule_is_global(r)) {
			seen |= 1u << r->verdict;
			continue;
		}
		/* An earlier rule for some addresses disagrees: the socket
		 * must be able to go either way until connect/listen. */
		if (seen & ~(1u << r->verdict))
			return SDP_POLICY_BOTH;
		*rule = (int)i;
		return r->verdict;
	}
	return SDP_POLICY_BOTH;
}

enum sdp_policy_verdict sdp_policy_program_verdict(const struct sdp_policy *p,
						   const char *program,
						   int *rule)
{
	enum sdp_policy_verdict s, c;
	int rs, rc;

	p = or_builtin(p);
	if (!program)
		program = "";
	s = program_list_verdict(p, SDP_ROLE_SERVER, program, &rs);
	c = program_list_verdict(p, SDP_ROLE_CLIENT, program, &rc);
	if (rule)
		*rule = s == c ? (rs >= 0 ? rs : rc) : -1;
	return s == c ? s : SDP_POLICY_BOTH;
}

const char *sdp_policy_verdict_name(enum sdp_policy_verdict v)
{
	switch (v) {
	case SDP_POLICY_TCP:
		return "tcp";
	case SDP_POLICY_SDP:
		return "sdp";
	case SDP_POLICY_BOTH:
		return "both";
	}
	return "?";
}

/* ---- reasons (no stdio: may run in a signal handler) ---------------------- */

struct strbuf {
	char *buf;
	size_t len, pos;
};

static void sb_put(struct strbuf *b, const char *s)
{
	while (*s && b->pos + 1 < b->len)
		b->buf[b->pos++] = *s++;
	b->buf[b->pos] = '\0';
}

static void sb_uint(struct strbuf *b, unsigned long v)
{
	char tmp[24];
	int i = (int)sizeof(tmp) - 1;

	tmp[i] = '\0';
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v && i > 0);
	sb_put(b, tmp + i);
}

char *sdp_policy_describe(const struct sdp_policy *p,
			  enum sdp_policy_verdict v, int rule, char *buf,
			  size_t len)
{
	struct strbuf b = { buf, len, 0 };

	if (!len)
		return buf;
	buf[0] = '\0';
	p = or_builtin(p);
	if (rule < 0 || (size_t)rule >= p->nrules) {
		sb_put(&b, "no rule matched: ");
	} else if (p->is_default) {
		sb_put(&b, "built-in rule ");
		sb_uint(&b, (unsigned long)rule + 1);
		sb_put(&b, " ");
	} else {
		sb_put(&b, "rule ");
		sb_uint(&b, (unsigned long)rule + 1);
		sb_put(&b, " (");
		sb_put(&b, p->source);
		sb_put(&b, ":");
		sb_uint(&b, p->rules[rule].line);
		sb_put(&b, ") ");
	}
	sb_put(&b, sdp_policy_verdict_name(v));
	return buf;
}

/* ---- parsing ------------------------------------------------------------- */

#define MAX_TOKENS 12

struct parse_ctx {
	struct sdp_policy *p;
	FILE *err;
	const char *name;
	unsigned line;
	unsigned errors;	/* bad lines so far */
	char msg[256];
};

/* A file that is not a configuration at all (a binary, some other text) is
 * reported in a few lines, not one per line of it. */
#define POLICY_ERRORS_SHOWN 10

/* Record what is wrong with the current line; always returns -EINVAL. */
static int bad(struct parse_ctx *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int bad(struct parse_ctx *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Decimal without sign, spaces or leading '+'; -1 if not a number or > max. */
static long parse_num(const char *s, size_t n, long max)
{
	long v = 0;
	size_t i;

	if (!n || n > 10)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v > max ? -1 : v;
}

static int parse_ports(struct parse_ctx *x, const char *s,
		       struct sdp_policy_rule *r)
{
	const char *dash = strchr(s, '-');
	long lo, hi;

	if (!strcmp(s, "*")) {
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	if (!*s)
		return bad(x, "missing port after ':'");
	lo = parse_num(s, dash ? (size_t)(dash - s) : strlen(s), 65535);
	hi = dash ? parse_num(dash + 1, strlen(dash + 1), 65535) : lo;
	if (lo < 0 || hi < 0)
		return bad(x, "bad port '%s' (expected N, LO-HI or * with "
			   "ports 0-65535)", s);
	if (hi < lo)
		return bad(x, "port range reversed in '%s' (%ld < %ld)", s,
			   hi, lo);
	r->port_lo = (uint16_t)lo;
	r->port_hi = (uint16_t)hi;
	return 0;
}

/* HOST without brackets or prefix; `v6only` for bracketed text. */
static int parse_host(struct parse_ctx *x, const char *h, int bracketed,
		      const char *prefix, struct sdp_policy_rule *r)
{
	struct in6_addr a6;
	long bits;
	unsigned max;

	if (!*h)
		return bad(x, "missing address before ':'");
	if (!strcmp(h, "*")) {
		if (prefix)
			return bad(x, "'*' takes no /PREFIX");
		r->family = 0;
		return 0;
	}
	if (!bracketed && inet_pton(AF_INET, h, r->addr) == 1) {
		r->family = 4;
		max = 32;
	} else if (inet_pton(AF_INET6, h, &a6) == 1) {
		r->family = 6;
		memcpy(r->addr, a6.s6_addr, 16);
		max = 128;
	} else if (bracketed && inet_pton(AF_INET, h, r->addr) == 1) {
		return bad(x, "brackets are for IPv6 addresses, not '%s'", h);
	} else {
		return bad(x, "bad address '%s'", h);
	}
	bits = max;
	if (prefix) {
		bits = parse_num(prefix, strlen(prefix), max);
		if (bits < 0)
			return bad(x, "bad prefix '/%s' for %s (0-%u)", prefix,
				   h, max);
	}
	r->prefix = (uint8_t)bits;
	/* A v4-mapped rule is an IPv4 rule: that is how mapped socket
	 * addresses are matched (policy.h). */
	if (r->family == 6 && bits >= 96 && IN6_IS_ADDR_V4MAPPED(&a6)) {
		r->family = 4;
		memmove(r->addr, r->addr + 12, 4);
		r->prefix = (uint8_t)(bits - 96);
	}
	return 0;
}

/* ADDRESS field: `*` or HOST[/PREFIX]:PORTS (policy.h).  Edits tok. */
static int parse_address(struct parse_ctx *x, char *tok,
			 struct sdp_policy_rule *r)
{
	char *host = tok, *prefix = NULL, *ports, *p;
	int bracketed = 0, err;

	if (!strcmp(tok, "*")) {
		r->family = 0;
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	if (*tok == '[') {
		p = strchr(tok, ']');
		if (!p)
			return bad(x, "missing ']' in '%s'", tok);
		*p++ = '\0';
		host = tok + 1;
		bracketed = 1;
		if (*p == '/') {
			if (strchr(host, '/'))
				return bad(x, "two prefixes in '%s]%s'", tok, p);
			prefix = ++p;
			p = strchr(p, ':');
			if (!p)
				return bad(x, "missing ':PORT' after "
					   "address '[%s]/%s'", host, prefix);
			*p = '\0';
		} else if (*p != ':') {
			return bad(x, "expected ':PORT' after ']', not '%s'",
				   p);
		}
		ports = p + 1;
		p = strchr(host, '/');
		if (p) {
			*p = '\0';
			prefix = p + 1;
		}
	} else if ((p = strchr(tok, '/'))) {
		*p = '\0';
		prefix = p + 1;
		p = strchr(prefix, ':');
		if (!p)
			return bad(x, "missing ':PORT' after address '%s/%s'",
				   host, prefix);
		*p = '\0';
		ports = p + 1;
	} else {
		p = strrchr(tok, ':');
		if (!p)
			return bad(x, "missing ':PORT' after address '%s'", tok);
		*p = '\0';
		ports = p + 1;
		if (strchr(host, ':'))
			return bad(x, "ambiguous IPv6 address '%s:%s': write "
				   "[ADDRESS]:PORT or ADDRESS/PREFIX:PORT",
				   host, ports);
	}
	err = parse_host(x, host, bracketed, prefix, r);
	if (err)
		return err;
	return parse_ports(x, ports, r);
}

static int add_rule(struct parse_ctx *x, struct sdp_policy_rule *r,
		    const char *program)
{
	struct sdp_policy *p = x->p;

	if (p->nrules == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 16;
		void *n = realloc(p->rules, ncap * sizeof(*p->rules));

		if (!n)
			return -ENOMEM;
		p->rules = n;
		p->cap = ncap;
	}
	r->program = strdup(program);
	if (!r->program)
		return -ENOMEM;
	p->rules[p->nrules++] = *r;
	return 0;
}

static int parse_use(struct parse_ctx *x, char **tok, int n)
{
	struct sdp_policy_rule r;
	int err;

	memset(&r, 0, sizeof(r));
	r.line = x->line;
	if (n < 2)
		return bad(x, "missing sdp, tcp or both after 'use'");
	if (!strcmp(tok[1], "sdp"))
		r.verdict = SDP_POLICY_SDP;
	else if (!strcmp(tok[1], "tcp"))
		r.verdict = SDP_POLICY_TCP;
	else if (!strcmp(tok[1], "both"))
		r.verdict = SDP_POLICY_BOTH;
	else
		return bad(x, "unknown verdict '%s' (expected sdp, tcp or "
			   "both)", tok[1]);
	if (n < 3)
		return bad(x, "missing server, client or all after '%s'",
			   tok[1]);
	if (!strcmp(tok[2], "server") || !strcmp(tok[2], "listen"))
		r.roles = SDP_ROLE_SERVER;
	else if (!strcmp(tok[2], "client") || !strcmp(tok[2], "connect"))
		r.roles = SDP_ROLE_CLIENT;
	else if (!strcmp(tok[2], "all"))
		r.roles = SDP_ROLE_SERVER | SDP_ROLE_CLIENT;
	else
		return bad(x, "unknown role '%s' (expected server, listen, "
			   "client, connect or all)", tok[2]);
	if (n < 4)
		return bad(x, "missing program name or glob after '%s'",
			   tok[2]);
	if (n < 5)
		return bad(x, "missing ADDRESS:PORT after program '%s'",
			   tok[3]);
	if (n > 5)
		return bad(x, "unexpected '%s' after ADDRESS:PORT", tok[5]);
	err = parse_address(x, tok[4], &r);
	if (err)
		return err;
	return add_rule(x, &r, tok[3]);
}

static int parse_log(struct parse_ctx *x, char **tok, int n)
{
	struct sdp_policy_log lg = x->p->log;
	const char *file = NULL;
	long lvl;
	int i;

	for (i = 1; i < n; i++) {
		if (!strcmp(tok[i], "destination")) {
			if (++i >= n)
				return bad(x, "'destination' needs stderr, "
					   "syslog or file NAME");
			if (!strcmp(tok[i], "stderr")) {
				lg.dest = SDP_POLICY_LOG_STDERR;
			} else if (!strcmp(tok[i], "syslog")) {
				lg.dest = SDP_POLICY_LOG_SYSLOG;
			} else if (!strcmp(tok[i], "file")) {
				if (++i >= n)
					return bad(x, "'file' needs a NAME");
				lg.dest = SDP_POLICY_LOG_FILE;
				file = tok[i];
			} else {
				return bad(x, "unknown log destination '%s' "
					   "(expected stderr, syslog or file "
					   "NAME)", tok[i]);
			}
		} else if (!strcmp(tok[i], "min-level")) {
			if (++i >= n)
				return bad(x, "'min-level' needs a level 1-9");
			lvl = parse_num(tok[i], strlen(tok[i]), 9);
			if (lvl < 1)
				return bad(x, "bad min-level '%s' (expected "
					   "1-9)", tok[i]);
			lg.min_level = (int)lvl;
		} else {
			return bad(x, "unknown log option '%s' (expected "
				   "destination or min-level)", tok[i]);
		}
	}
	/* Only a fully valid line changes anything. */
	if (file) {
		char *f = strdup(file);

		if (!f)
			return -ENOMEM;
		free(x->p->log_file);
		x->p->log_file = f;
	}
	lg.file = lg.dest == SDP_POLICY_LOG_FILE ? x->p->log_file : NULL;
	x->p->log = lg;
	return 0;
}

/* One line (comment already cut).  0, -EINVAL (x->msg says why), -ENOMEM. */
static int parse_line(struct parse_ctx *x, char *s)
{
	char *tok[MAX_TOKENS + 1];
	int n = 0;

	for (;;) {
		while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\v' ||
		       *s == '\f')
			s++;
		if (!*s)
			break;
		if (n == MAX_TOKENS + 1)
			return bad(x, "too many fields");
		tok[n++] = s;
		while (*s && *s != ' ' && *s != '\t' && *s != '\r' &&
		       *s != '\v' && *s != '\f')
			s++;
		if (*s)
			*s++ = '\0';
	}
	if (!n)
		return 0;
	if (!strcmp(tok[0], "use"))
		return parse_use(x, tok, n);
	if (!strcmp(tok[0], "log"))
		return parse_log(x, tok, n);
	return bad(x, "unknown keyword '%s' (expected use or log)", tok[0]);
}

static struct sdp_policy *policy_new(const char *source)
{
	struct sdp_policy *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->source = strdup(source);
	if (!p->source) {
		free(p);
		return NULL;
	}
	return p;
}

/* Feed one line; returns -ENOMEM only (syntax errors are reported here). */
static int feed_line(struct parse_ctx *x, char *s)
{
	char *hash = strchr(s, '#');
	int r;

	if (hash)
		*hash = '\0';
	x->line++;
	r = parse_line(x, s);
	if (r == -EINVAL) {
		char shown[4 * sizeof(x->msg)];

		if (x->err && ++x->errors <= POLICY_ERRORS_SHOWN)
			fprintf(x->err, "libsdp: %s:%u: %s\n", x->name, x->line,
				sdp_text_escape(shown, sizeof(shown), x->msg));
		return 0;
	}
	return r;
}

static void report_errors_not_shown(const struct parse_ctx *x)
{
	if (x->err && x->errors > POLICY_ERRORS_SHOWN)
		fprintf(x->err, "libsdp: %s: %u more errors not shown\n",
			x->name, x->errors - POLICY_ERRORS_SHOWN);
}

struct sdp_policy *sdp_policy_parse(const char *text, const char *name,
				    FILE *errstream)
{
	struct parse_ctx x = { .err = errstream, .name = name };
	char *copy, *s, *nl;

	x.p = policy_new(name);
	copy = strdup(text);
	if (!x.p || !copy)
		goto err;
	for (s = copy; s; s = nl) {
		nl = strchr(s, '\n');
		if (nl)
			*nl++ = '\0';
		else if (!*s)
			break;	/* text ended with a newline */
		if (feed_line(&x, s) < 0)
			goto err;
	}
	free(copy);
	report_errors_not_shown(&x);
	return x.p;
err:
	free(copy);
	sdp_policy_free(x.p);
	return NULL;
}

static struct sdp_policy *builtin_copy(void)
{
	/* A private copy so that callers may always sdp_policy_free() what
	 * sdp_policy_load() returned. */
	struct sdp_policy *p = policy_new("built-in");
	size_t i;

	if (!p)
		return NULL;
	p->rules = calloc(builtin_policy.nrules, sizeof(*p->rules));
	if (!p->rules)
		goto err;
	p->cap = builtin_policy.nrules;
	for (i = 0; i < builtin_policy.nrules; i++) {
		p->rules[i] = builtin_rules[i];
		p->rules[i].program = strdup(builtin_rules[i].program);
		if (!p->rules[i].program)
			goto err;
		p->nrules++;
	}
	p->is_default = 1;
	return p;
err:
	sdp_policy_free(p);
	return NULL;
}

struct sdp_policy *sdp_policy_load(const char *path, FILE *errstream)
{
	struct parse_ctx x = { .err = errstream };
	const char *env = NULL;
	char *line = NULL;
	size_t cap = 0;
	FILE *f;
	int explicit_path = path != NULL;

	if (!path) {
		env = getenv(SDP_POLICY_ENV);
		path = env && *env ? env : SDP_POLICY_DEFAULT_PATH;
		explicit_path = env && *env;
	}
	f = fopen(path, "re");
	if (!f) {
		if (explicit_path && errstream)
			fprintf(errstream, "libsdp: %s: cannot read the "
				"configuration: %s; using the built-in "
				"default\n", path, strerror(errno));
		return builtin_copy();
	}
	x.name = path;
	x.p = policy_new(path);
	if (!x.p)
		goto err;
	while (getline(&line, &cap, f) >= 0) {
		line[strcspn(line, "\n")] = '\0';
		if (feed_line(&x, line) < 0)
			goto err;
	}
	free(line);
	fclose(f);
	report_errors_not_shown(&x);
	return x.p;
err:
	free(line);
	fclose(f);
	sdp_policy_free(x.p);
	return NULL;
}

char *sdp_policy_program_name(char *buf, size_t len)
{
	extern char *program_invocation_short_name;
	const char *n = program_invocation_short_name;
	char exe[4096];
	ssize_t r;

	if (!len)
		return buf;
	buf[0] = '\0';
	if (!n || !*n) {
		r = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (r <= 0)
			return buf;
		exe[r] = '\0';
		n = strrchr(exe, '/');
		n = n ? n + 1 : exe;
	}
	strncpy(buf, n, len - 1);
	buf[len - 1] = '\0';
	return buf;
}
