/* target.h - what a fuzz target gives the plain driver (driver.c): the
 * libFuzzer entry point, its input builders, and the final health check.
 * Each target program links driver.c with one target's files. */
#ifndef LOOM_TEST_FUZZ_TARGET_H
#define LOOM_TEST_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* xorshift64*: the driver's only source of randomness, so runs repeat. */
static inline uint64_t fz_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

/* A well-formed-looking input with fields near their limits, of at most
 * cap bytes; returns its length. */
size_t fz_generate(uint64_t *rng, uint8_t *buf, size_t cap);

/* Write the seed corpus into dir (which must exist): 0, or -1. */
int fz_write_seeds(const char *dir);

/* The checks with a legitimate peer that run every so many inputs, now:
 * aborts if the endpoint stopped working. */
void fz_final_check(void);

/* Print the target's counts (stderr) after a run. */
void fz_report(void);

#endif
