/* SPDX-License-Identifier: MIT */
/*
 * replay_main.c — run a fuzz target over a stored corpus without libFuzzer
 * (SQLite fuzzcheck style), so every `make test` replays the corpus with
 * whatever compiler and sanitizers the build uses.
 *
 * Usage: fuzz_xxx FILE|DIR...   (directories: regular files directly inside,
 * in name order; dotfiles skipped).  Each input is copied into a buffer of
 * exactly its size so ASan catches any read past the end.  Exit 0 after
 * replaying at least one input, 1 on no input or an unreadable path.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t cap = 0, len = 0;
	int ret = -1;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		size_t n;

		if (len == cap) {
			uint8_t *nb;

			cap = cap ? cap * 2 : 4096;
			nb = realloc(buf, cap);
			if (!nb)
				goto out;
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, "replay: %s: read error\n", path);
		goto out;
	}
	/* Exact-size copy: an overread is an ASan error, not a silent pass. */
	{
		uint8_t *exact = malloc(len ? len : 1);

		if (!exact)
			goto out;
		memcpy(exact, buf, len);
		LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	}
	ret = 0;
out:
	free(buf);
	fclose(f);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Returns inputs replayed, or -1 on error. */
static long run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	long count = 0;

	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn;

			cap = cap ? cap * 2 : 64;
			nn = realloc(names, cap * sizeof(*names));
			if (!nn) {
				count = -1;
				goto out;
			}
			names = nn;
		}
		if (asprintf(&names[n], "%s/%s", dir, de->d_name) < 0) {
			count = -1;
			goto out;
		}
		n++;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (stat(names[i], &st) || !S_ISREG(st.st_mode))
			continue;
		if (run_file(names[i])) {
			count = -1;
			goto out;
		}
		count++;
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return count;
}

int main(int argc, char **argv)
{
	long total = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		long c;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
				strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			c = run_dir(argv[i]);
		} else {
			c = run_file(argv[i]) ? -1 : 1;
		}
		if (c < 0)
			return 1;
		total += c;
	}
	printf("%s: replayed %ld inputs\n", argc ? argv[0] : "replay", total);
	if (total == 0) {
		fprintf(stderr, "replay: no inputs\n");
		return 1;
	}
	return 0;
}
