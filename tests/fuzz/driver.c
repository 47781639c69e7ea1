/* driver.c - runs a fuzz target (target.h) without libFuzzer: over every
 * file named (or in a directory named) on the command line, then over -n
 * inputs generated, mutated and random from a fixed seed, so a run is
 * the same every time; ends with the target's health check.
 *
 *   fuzz_<target> [-n COUNT] [-s SEED] [-o FILE] PATH...   run
 *   fuzz_<target> --write-seeds DIR                        write the seeds
 *
 * With -o, each input is written to FILE before it runs: after a crash,
 * FILE holds the input that caused it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

#define INPUT_CAP (400 * 1024)

struct input {
	char *name;
	uint8_t *data;
	size_t len;
};

static int save_fd = -1;
static struct input *corpus;
static size_t ncorpus, corpus_cap;

static int read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = malloc(INPUT_CAP);
	size_t n;

	if (!f || !buf) {
		fprintf(stderr, "driver: %s: %s\n", path, strerror(errno));
		free(buf);
		if (f)
			fclose(f);
		return -1;
	}
	n = fread(buf, 1, INPUT_CAP, f);
	fclose(f);
	if (ncorpus == corpus_cap) {
		corpus_cap = corpus_cap ? 2 * corpus_cap : 64;
		corpus = realloc(corpus, corpus_cap * sizeof(*corpus));
		if (!corpus)
			return -1;
	}
	corpus[ncorpus++] = (struct input){strdup(path), buf, n};
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's regular files, in name order (readdir's order is not
 * fixed, and a run must be). */
static int read_path(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;

	if (stat(path, &st)) {
		fprintf(stderr, "driver: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return read_file(path);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char full[4096];

		if (de->d_name[0] == '.')
			continue;
		snprintf(full, sizeof(full), "%s/%s", path, de->d_name);
		if (stat(full, &st) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names) {
				closedir(d);
				return -1;
			}
		}
		names[n++] = strdup(full);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		if (!ret)
			ret = read_file(names[i]);
		free(names[i]);
	}
	free(names);
	return ret;
}

/* libFuzzer-style mutations: flip, set, insert, erase, duplicate, splice. */
static size_t mutate(uint64_t *rng, uint8_t *buf, size_t len, size_t cap)
{
	static const uint8_t vals[] = {0, 1, 2, 3, 0x7f, 0x80, 0xfe, 0xff, 0x40, 0x10};
	unsigned rounds = 1 + (unsigned)(fz_rand(rng) % 6);

	for (unsigned i = 0; i < rounds; i++) {
		uint64_t r = fz_rand(rng);
		size_t at = len ? (size_t)(fz_rand(rng) % len) : 0;
		size_t n = 1 + (size_t)(fz_rand(rng) % 16);

		switch (r % 8) {
		case 0:
			if (len)
				buf[at] ^= (uint8_t)(1u << (r >> 8) % 8);
			break;
		case 1:
			if (len)
				buf[at] = vals[(r >> 8) % sizeof(vals)];
			break;
		case 2: { /* a 32-bit field set to a limit */
			static const uint32_t lim[] = {
			    0,     1,     63,    64,         65,
			    65535, 65536, 65537, 0x7fffffff, 0xffffffff};
			uint32_t v = lim[(r >> 8) % (sizeof(lim) / sizeof(lim[0]))];

			at &= ~(size_t)3;
			if (at + 4 <= len)
				memcpy(buf + at, &v, 4);
			break;
		}
		case 3: /* insert n random bytes */
			if (len + n <= cap) {
				memmove(buf + at + n, buf + at, len - at);
				for (size_t k = 0; k < n; k++)
					buf[at + k] = (uint8_t)fz_rand(rng);
				len += n;
			}
			break;
		case 4: /* erase */
			if (n > len - at)
				n = len - at;
			memmove(buf + at, buf + at + n, len - at - n);
			len -= n;
			break;
		case 5: /* duplicate a chunk at the end (a second frame) */
			if (len && len + n * 8 <= cap) {
				size_t from = (size_t)(fz_rand(rng) % len), k = n * 8;

				if (k > len - from)
					k = len - from;
				memmove(buf + len, buf + from, k);
				len += k;
			}
			break;
		case 6: /* splice in the tail of a corpus input */
			if (ncorpus) {
				const struct input *o = &corpus[fz_rand(rng) % ncorpus];
				size_t from =
				    o->len ? (size_t)(fz_rand(rng) % o->len) : 0;
				size_t k = o->len - from;

				if (k > cap - at)
					k = cap - at;
				memcpy(buf + at, o->data + from, k);
				if (at + k > len)
					len = at + k;
			}
			break;
		default: /* truncate */
			len = at;
			break;
		}
	}
	return len;
}

static void run(const uint8_t *data, size_t len)
{
	if (save_fd >= 0 && (pwrite(save_fd, data, len, 0) != (ssize_t)len ||
	                     ftruncate(save_fd, (off_t)len))) {
		perror("driver: saving the input");
		exit(1);
	}
	LLVMFuzzerTestOneInput(data, len);
}

int main(int argc, char **argv)
{
	unsigned long count = 0;
	uint64_t rng = 0x6c6f6f6d2d66757aULL; /* "loom-fuz" */
	uint8_t *buf = malloc(INPUT_CAP);
	time_t t0 = time(NULL);
	int i;

	if (!buf)
		return 1;
	if (argc == 3 && !strcmp(argv[1], "--write-seeds"))
		return fz_write_seeds(argv[2]) ? 1 : 0;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc) {
			count = strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			save_fd = open(argv[++i],
			               O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (save_fd < 0) {
				perror(argv[i]);
				return 1;
			}
		} else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
			rng = strtoull(argv[++i], NULL, 0) | 1;
		} else if (read_path(argv[i])) {
			return 1;
		}
	}

	for (size_t k = 0; k < ncorpus; k++) {
		fprintf(stderr, "driver: %s (%zu bytes)\n", corpus[k].name,
		        corpus[k].len);
		run(corpus[k].data, corpus[k].len);
	}
	for (unsigned long k = 0; k < count; k++) {
		uint64_t r = fz_rand(&rng);
		size_t len;

		if (r % 8 < 3) {
			len = fz_generate(&rng, buf, INPUT_CAP);
		} else if (r % 8 < 6) {
			/* A seed or a generated input, mutated. */
			if (ncorpus && r % 8 != 5) {
				const struct input *o = &corpus[(r >> 8) % ncorpus];

				memcpy(buf, o->data, o->len);
				len = o->len;
			} else {
				len = fz_generate(&rng, buf, INPUT_CAP);
			}
			len = mutate(&rng, buf, len, INPUT_CAP);
		} else {
			len = (size_t)(fz_rand(&rng) % (r % 8 == 6 ? 80 : 600));
			for (size_t b = 0; b < len; b++)
				buf[b] = (uint8_t)fz_rand(&rng);
		}
		run(buf, len);
	}
	fz_final_check();
	fz_report();
	printf("driver: %zu corpus files and %lu generated inputs, endpoint healthy, "
	       "%ld s\n",
	       ncorpus, count, (long)(time(NULL) - t0));
	for (size_t k = 0; k < ncorpus; k++) {
		free(corpus[k].name);
		free(corpus[k].data);
	}
	free(corpus);
	free(buf);
	return 0;
}
