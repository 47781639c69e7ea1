/* mr.c - memory registration on the utiltest domain: keys (provider,
 * requested, duplicates, key size), the target-side range and access check
 * under hostile addresses, multi-iov regions, enable and bindings, raw
 * keys, asynchronous registration, compatibility modes, threads.
 *
 * The utiltest domain is opened with FI_MR_PROV_KEY | FI_MR_VIRT_ADDR |
 * FI_MR_ALLOCATED; tests of other modes set the lm_domain's mr_mode (and
 * mr_key_size / caps in its info copy) directly, as a provider would. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "testdom.h"
#include "v1_names.h"

#define RW (FI_REMOTE_READ | FI_REMOTE_WRITE)

static struct lm_domain *dom_of(struct testdom *t)
{
	return lm_container_of(t->domain, struct lm_domain, domain_fid);
}

static uint64_t addr_of(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

static void *const SENTINEL = (void *)0x5e5e;

/* lm_mr_verify's verdict, checking that *local is written only on success
 * and then equals want. */
static int verify(struct lm_domain *dom, uint64_t key, uint64_t addr, size_t len,
                  uint64_t access, const void *want)
{
	void *p = SENTINEL;
	int ret = lm_mr_verify(dom, key, addr, len, access, &p);

	if (ret)
		CHECK(p == SENTINEL);
	else
		CHECK(p == want);
	return ret;
}

static void test_prov_keys_virt_addr(void)
{
	static char buf[4096];
	struct fid_mr *mr, *ro, *local, *many[100];
	struct lm_domain *dom;
	struct testdom t;
	uint64_t key, base = addr_of(buf);
	int ctx, ret, dups = 0;

	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	dom = dom_of(&t);
	ret = fi_mr_reg(t.domain, buf, sizeof(buf), RW, 0, 0x1234, 0, &mr, &ctx);
	CHECK_INT(ret, 0);
	if (ret)
		goto out;
	CHECK_INT(mr->fid.fclass, FI_CLASS_MR);
	CHECK(mr->fid.context == &ctx);
	CHECK(fi_mr_desc(mr) != NULL);
	key = fi_mr_key(mr);
	CHECK(key != FI_KEY_NOTAVAIL);

	/* The whole region and pieces of it, by virtual address. */
	CHECK_INT(verify(dom, key, base, sizeof(buf), FI_REMOTE_WRITE, buf), 0);
	CHECK_INT(verify(dom, key, base, sizeof(buf), RW, buf), 0);
	CHECK_INT(verify(dom, key, base + 100, 10, FI_REMOTE_READ, buf + 100), 0);
	CHECK_INT(verify(dom, key, base + 4095, 1, FI_REMOTE_WRITE, buf + 4095), 0);
	CHECK_INT(verify(dom, key, base + 4095, 0, FI_REMOTE_WRITE, buf + 4095), 0);
	CHECK_INT(verify(dom, key, base, 0, FI_REMOTE_WRITE, buf), 0);

	/* Everything around and across the edges. */
	CHECK_INT(verify(dom, key, base + 4095, 2, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, base + 4096, 0, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, base + 4096, 1, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, base + 4097, 0, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, base + 8192, 1, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, base + (UINT64_C(1) << 40), 8, FI_REMOTE_WRITE, NULL),
	          -FI_EACCES);
	CHECK_INT(verify(dom, key, base - 1, 1, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, base - 1, 2, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, base - 1, 0, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, base, sizeof(buf) + 1, FI_REMOTE_WRITE, NULL),
	          -FI_EACCES);
	CHECK_INT(verify(dom, key, base, SIZE_MAX, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	/* addr + len wraps around 2^64 to land inside the region. */
	CHECK_INT(verify(dom, key, base + 100, (size_t)(UINT64_MAX - 49), FI_REMOTE_WRITE,
	                 NULL),
	          -FI_EACCES);
	CHECK_INT(verify(dom, key, base + 100, (size_t)(0 - base), FI_REMOTE_WRITE, NULL),
	          -FI_EACCES);
	CHECK_INT(verify(dom, key, UINT64_MAX, 1, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, UINT64_MAX, 2, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, 0, 10, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, 100, 10, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key + 1, base, 1, FI_REMOTE_WRITE, NULL), -FI_EKEYREJECTED);
	CHECK_INT(verify(dom, ~key, base, 1, FI_REMOTE_WRITE, NULL), -FI_EKEYREJECTED);
	CHECK_INT(lm_mr_verify(dom, key, base, 1, FI_REMOTE_WRITE, NULL), -FI_EINVAL);

	/* Access bits. */
	CHECK_INT(fi_mr_reg(t.domain, buf, 64, FI_REMOTE_READ, 0, 0, 0, &ro, NULL), 0);
	CHECK_INT(fi_mr_reg(t.domain, buf, 64, FI_READ | FI_WRITE | FI_SEND | FI_RECV, 0,
	                    0, 0, &local, NULL),
	          0);
	CHECK(fi_mr_key(ro) != key && fi_mr_key(local) != key &&
	      fi_mr_key(ro) != fi_mr_key(local));
	CHECK_INT(verify(dom, fi_mr_key(ro), base, 64, FI_REMOTE_READ, buf), 0);
	CHECK_INT(verify(dom, fi_mr_key(ro), base, 64, FI_REMOTE_WRITE, NULL),
	          -FI_EACCES);
	CHECK_INT(verify(dom, fi_mr_key(ro), base, 64, RW, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, fi_mr_key(local), base, 1, FI_REMOTE_READ, NULL),
	          -FI_EACCES);
	CHECK_INT(verify(dom, fi_mr_key(local), base, 1, FI_REMOTE_WRITE, NULL),
	          -FI_EACCES);

	/* A domain with registrations open does not close. */
	CHECK_INT(fi_close(&t.domain->fid), -FI_EBUSY);
	CHECK_INT(fi_close(&ro->fid), 0);
	CHECK_INT(fi_close(&local->fid), 0);
	CHECK_INT(verify(dom, key, base, 1, FI_REMOTE_WRITE, buf), 0);

	/* Provider keys are distinct. */
	for (int i = 0; i < 100; i++)
		CHECK_INT(fi_mr_reg(t.domain, buf + i, 1, RW, 0, 0, 0, &many[i], NULL),
		          0);
	for (int i = 0; i < 100; i++) {
		if (fi_mr_key(many[i]) == key)
			dups++;
		for (int j = 0; j < i; j++)
			dups += fi_mr_key(many[i]) == fi_mr_key(many[j]);
	}
	CHECK_INT(dups, 0);
	/* A provider key is a serial number in its low 32 bits (so the upper
	 * bytes of that half stay zero, as programs written against
	 * libfabric's serial keys assume) under 32 random bits. */
	for (int i = 1; i < 100; i++) {
		uint64_t a = fi_mr_key(many[i - 1]), b = fi_mr_key(many[i]);

		if ((uint32_t)b != (uint32_t)a + 1 || (b & 0xff000000) || (b >> 32) == (a >> 32))
			dups++;
	}
	CHECK_INT(dups, 0);
	CHECK_INT(
	    verify(dom, fi_mr_key(many[42]), base + 42, 1, FI_REMOTE_WRITE, buf + 42), 0);
	CHECK_INT(verify(dom, fi_mr_key(many[42]), base + 43, 1, FI_REMOTE_WRITE, NULL),
	          -FI_EACCES);
	for (int i = 0; i < 100; i++)
		CHECK_INT(fi_close(&many[i]->fid), 0);

	/* Closed means gone. */
	CHECK_INT(fi_close(&mr->fid), 0);
	CHECK_INT(verify(dom, key, base, 1, FI_REMOTE_WRITE, NULL), -FI_EKEYREJECTED);
out:
	testdom_close(&t);
}

static void test_requested_keys_offsets(void)
{
	static char buf[4096];
	struct fid_mr *mr, *dup, *off, *k16, *big, *small[257];
	struct fi_mr_attr attr;
	struct iovec iov = {buf, sizeof(buf)};
	struct lm_domain *dom;
	struct testdom t;
	int ret, n, dups = 0;

	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	dom = dom_of(&t);
	dom->mr_mode = FI_MR_ALLOCATED; /* application keys, 0-based offsets */

	CHECK_INT(fi_mr_reg(t.domain, buf, sizeof(buf), RW, 0, 42, 0, &mr, NULL), 0);
	CHECK_HEX(fi_mr_key(mr), 42);
	dup = SENTINEL;
	CHECK_INT(fi_mr_reg(t.domain, buf, 16, RW, 0, 42, 0, &dup, NULL), -FI_ENOKEY);
	CHECK(dup == SENTINEL);
	CHECK_INT(verify(dom, 42, 0, sizeof(buf), FI_REMOTE_WRITE, buf), 0);
	CHECK_INT(verify(dom, 42, 100, 10, FI_REMOTE_WRITE, buf + 100), 0);
	CHECK_INT(verify(dom, 42, 4095, 1, FI_REMOTE_WRITE, buf + 4095), 0);
	CHECK_INT(verify(dom, 42, 4096, 0, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, 42, 1, sizeof(buf), FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, 42, addr_of(buf), 1, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, 42, UINT64_MAX, 2, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, 43, 0, 1, FI_REMOTE_WRITE, NULL), -FI_EKEYREJECTED);

	/* The regattr offset is the address of the region's first byte. */
	memset(&attr, 0, sizeof(attr));
	attr.mr_iov = &iov;
	attr.iov_count = 1;
	attr.access = RW;
	attr.offset = 1000;
	attr.requested_key = 7;
	CHECK_INT(fi_mr_regattr(t.domain, &attr, 0, &off), 0);
	CHECK_INT(verify(dom, 7, 1000, 1, FI_REMOTE_READ, buf), 0);
	CHECK_INT(verify(dom, 7, 1000 + 4095, 1, FI_REMOTE_READ, buf + 4095), 0);
	CHECK_INT(verify(dom, 7, 999, 1, FI_REMOTE_READ, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, 7, 0, 1, FI_REMOTE_READ, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, 7, 1000 + 4096, 0, FI_REMOTE_READ, NULL), -FI_EACCES);
	attr.offset = UINT64_MAX - 10; /* region would end past 2^64 */
	attr.requested_key = 8;
	CHECK_INT(fi_mr_regattr(t.domain, &attr, 0, &big), -FI_EINVAL);

	/* Keys must fit mr_key_size. */
	dom->info->domain_attr->mr_key_size = 2;
	CHECK_INT(fi_mr_reg(t.domain, buf, 1, RW, 0, 0x10000, 0, &k16, NULL),
	          -FI_EKEYREJECTED);
	CHECK_INT(fi_mr_reg(t.domain, buf, 1, RW, 0, 0xffff, 0, &k16, NULL), 0);
	dom->info->domain_attr->mr_key_size = 8;
	CHECK_INT(fi_mr_reg(t.domain, buf, 1, RW, 0, FI_KEY_NOTAVAIL, 0, &big, NULL),
	          -FI_EKEYREJECTED);
	CHECK_INT(fi_mr_reg(t.domain, buf, 1, RW, 0, UINT64_MAX - 1, 0, &big, NULL), 0);
	CHECK_HEX(fi_mr_key(big), UINT64_MAX - 1);
	CHECK_INT(fi_close(&big->fid), 0);

	/* Provider keys in a 1-byte key space: 256 of them, then no more. */
	dom->mr_mode = FI_MR_PROV_KEY;
	dom->info->domain_attr->mr_key_size = 1;
	for (n = 0; n < 257; n++) {
		ret = fi_mr_reg(t.domain, buf, 1, RW, 0, 0, 0, &small[n], NULL);
		if (ret)
			break;
	}
	/* Keys 7 and 42 are taken by the registrations above. */
	CHECK_INT(n, 254);
	CHECK_INT(ret, -FI_ENOSPC);
	for (int i = 0; i < n; i++) {
		if (fi_mr_key(small[i]) > 0xff || fi_mr_key(small[i]) == 7 ||
		    fi_mr_key(small[i]) == 42)
			dups++;
	}
	CHECK_INT(dups, 0);
	for (int i = 0; i < n; i++)
		fi_close(&small[i]->fid);
	dom->info->domain_attr->mr_key_size = 8;

	CHECK_INT(fi_close(&k16->fid), 0);
	CHECK_INT(fi_close(&off->fid), 0);
	CHECK_INT(fi_close(&mr->fid), 0);
	testdom_close(&t);
}

/* One region over three separate buffers (and an empty iov): a peer sees
 * 350 contiguous bytes. */
static void test_iov_regions(void)
{
	static char a[100], b[50], c[200];
	struct iovec iov[4] = {{a, 100}, {NULL, 0}, {b, 50}, {c, 200}}, five[5], out[4];
	struct lm_domain *dom;
	struct fid_mr *mr, *bad = SENTINEL;
	struct testdom t;
	uint64_t key, base = addr_of(a);
	size_t n;

	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	dom = dom_of(&t);
	CHECK_INT(fi_mr_regv(t.domain, iov, 4, RW, 0, 0, 0, &mr, NULL), 0);
	key = fi_mr_key(mr);

	n = 4;
	CHECK_INT(lm_mr_verify_iov(dom, key, base + 90, 70, FI_REMOTE_WRITE, out, &n), 0);
	CHECK_INT(n, 3);
	CHECK(out[0].iov_base == a + 90 && out[0].iov_len == 10);
	CHECK(out[1].iov_base == b && out[1].iov_len == 50);
	CHECK(out[2].iov_base == c && out[2].iov_len == 10);
	n = 4;
	CHECK_INT(lm_mr_verify_iov(dom, key, base, 350, FI_REMOTE_READ, out, &n), 0);
	CHECK_INT(n, 3);
	CHECK(out[0].iov_base == a && out[0].iov_len == 100 && out[2].iov_len == 200);
	n = 4;
	CHECK_INT(lm_mr_verify_iov(dom, key, base + 349, 1, FI_REMOTE_READ, out, &n), 0);
	CHECK_INT(n, 1);
	CHECK(out[0].iov_base == c + 199 && out[0].iov_len == 1);
	n = 4;
	CHECK_INT(lm_mr_verify_iov(dom, key, base + 120, 0, FI_REMOTE_READ, out, &n), 0);
	CHECK_INT(n, 0);

	/* Too small an output array leaves it and the count alone. */
	memset(out, 0, sizeof(out));
	n = 2;
	CHECK_INT(lm_mr_verify_iov(dom, key, base + 90, 70, FI_REMOTE_WRITE, out, &n),
	          -FI_ETOOSMALL);
	CHECK_INT(n, 2);
	CHECK(out[0].iov_base == NULL);
	n = 4;
	CHECK_INT(lm_mr_verify_iov(dom, key, base + 349, 2, FI_REMOTE_READ, out, &n),
	          -FI_EACCES);
	CHECK_INT(lm_mr_verify_iov(dom, key, base + 350, 0, FI_REMOTE_READ, out, &n),
	          -FI_EACCES);
	CHECK_INT(lm_mr_verify_iov(dom, key, base + 1000, 1, FI_REMOTE_READ, out, &n),
	          -FI_EACCES);
	CHECK_INT(lm_mr_verify_iov(dom, key, base - 1, 2, FI_REMOTE_READ, out, &n),
	          -FI_EACCES);
	CHECK_INT(lm_mr_verify_iov(dom, key + 1, base, 2, FI_REMOTE_READ, out, &n),
	          -FI_EKEYREJECTED);
	CHECK_INT(lm_mr_verify_iov(dom, key, base, 2, FI_REMOTE_READ, out, NULL),
	          -FI_EINVAL);
	CHECK_INT(n, 4);

	/* Contiguous check: fine inside one buffer, refused across two. */
	CHECK_INT(verify(dom, key, base + 10, 20, FI_REMOTE_WRITE, a + 10), 0);
	CHECK_INT(verify(dom, key, base + 100, 50, FI_REMOTE_WRITE, b), 0);
	CHECK_INT(verify(dom, key, base + 150, 200, FI_REMOTE_WRITE, c), 0);
	CHECK_INT(verify(dom, key, base + 99, 2, FI_REMOTE_WRITE, NULL), -FI_EACCES);
	CHECK_INT(verify(dom, key, base + 90, 70, FI_REMOTE_WRITE, NULL), -FI_EACCES);

	/* iov_count limits (the domain's mr_iov_limit is 4). */
	for (int i = 0; i < 5; i++)
		five[i] = (struct iovec){a + i, 1};
	CHECK_INT(fi_mr_regv(t.domain, five, 5, RW, 0, 0, 0, &bad, NULL), -FI_EINVAL);
	CHECK_INT(fi_mr_regv(t.domain, five, 0, RW, 0, 0, 0, &bad, NULL), -FI_EINVAL);
	CHECK_INT(fi_mr_regv(t.domain, NULL, 1, RW, 0, 0, 0, &bad, NULL), -FI_EINVAL);
	CHECK(bad == SENTINEL);
	CHECK_INT(fi_close(&mr->fid), 0);
	testdom_close(&t);
}

static void test_bad_registrations(void)
{
	static char buf[64];
	struct iovec iov = {buf, sizeof(buf)};
	struct fi_mr_attr attr;
	struct lm_domain *dom;
	struct fid_mr *mr = SENTINEL, *empty;
	struct testdom t;

	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	dom = dom_of(&t);
	CHECK_INT(fi_mr_reg(t.domain, buf, 64, FI_MSG, 0, 0, 0, &mr, NULL), -FI_EINVAL);
	CHECK_INT(fi_mr_reg(t.domain, buf, 64, RW | FI_TAGGED, 0, 0, 0, &mr, NULL),
	          -FI_EINVAL);
	CHECK_INT(fi_mr_reg(t.domain, buf, 64, RW, 0, 0, FI_INJECT, &mr, NULL),
	          -FI_EBADFLAGS);
	CHECK_INT(fi_mr_reg(t.domain, buf, 64, RW, 0, 0, FI_HMEM_DEVICE_ONLY, &mr, NULL),
	          -FI_EINVAL);
	CHECK_INT(fi_mr_reg(t.domain, NULL, 64, RW, 0, 0, 0, &mr, NULL), -FI_EINVAL);
	CHECK_INT(
	    fi_mr_reg(t.domain, (void *)(UINTPTR_MAX - 5), 10, RW, 0, 0, 0, &mr, NULL),
	    -FI_EINVAL);
	CHECK_INT(fi_mr_reg(t.domain, buf, 64, RW, 0, 0, 0, NULL, NULL), -FI_EINVAL);
	CHECK_INT(fi_mr_regattr(t.domain, NULL, 0, &mr), -FI_EINVAL);
	CHECK(mr == SENTINEL);

	memset(&attr, 0, sizeof(attr));
	attr.mr_iov = &iov;
	attr.iov_count = 1;
	attr.access = RW;
	attr.auth_key_size = 4; /* per-region auth keys are not supported */
	CHECK_INT(fi_mr_regattr(t.domain, &attr, 0, &mr), -FI_ENOSYS);
	attr.auth_key_size = 0;
	/* iface matters only once the application asked for FI_HMEM. */
	attr.iface = FI_HMEM_CUDA;
	CHECK_INT(fi_mr_regattr(t.domain, &attr, 0, &mr), 0);
	CHECK(mr != SENTINEL);
	if (mr != SENTINEL)
		CHECK_INT(fi_close(&mr->fid), 0);
	mr = SENTINEL;
	dom->info->caps |= FI_HMEM;
	CHECK_INT(fi_mr_regattr(t.domain, &attr, 0, &mr), -FI_ENOSYS);
	attr.iface = FI_HMEM_SYSTEM;
	CHECK_INT(fi_mr_regattr(t.domain, &attr, FI_HMEM_HOST_ALLOC | FI_RMA_PMEM, &mr),
	          0);
	CHECK(mr != SENTINEL);
	if (mr != SENTINEL)
		CHECK_INT(fi_close(&mr->fid), 0);

	/* An empty region registers (MPI windows of size 0 do this) and
	 * grants nothing. */
	CHECK_INT(fi_mr_reg(t.domain, buf, 0, RW, 0, 0, 0, &empty, NULL), 0);
	CHECK_INT(verify(dom, fi_mr_key(empty), addr_of(buf), 0, FI_REMOTE_READ, NULL),
	          -FI_EACCES);
	CHECK_INT(fi_close(&empty->fid), 0);

	/* Nothing registered on a fresh domain. */
	CHECK_INT(verify(dom, 0, addr_of(buf), 1, FI_REMOTE_READ, NULL),
	          -FI_EKEYREJECTED);
	CHECK_INT(verify(NULL, 0, addr_of(buf), 1, FI_REMOTE_READ, NULL),
	          -FI_EKEYREJECTED);
	testdom_close(&t);
}

static void test_enable_and_bind(void)
{
	static char buf[256];
	struct fi_cntr_attr cattr = {.events = FI_CNTR_EVENTS_COMP,
	                             .wait_obj = FI_WAIT_NONE};
	struct fid fake_ep = {.fclass = FI_CLASS_EP};
	struct fid_mr *mr, *plain, *ev;
	struct fid_cntr *cntr, *cntr2;
	struct lm_domain *dom;
	struct lm_mr *lmr;
	struct testdom t;
	uint64_t base = addr_of(buf);

	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	dom = dom_of(&t);
	CHECK_INT(fi_cntr_open(t.domain, &cattr, &cntr, NULL), 0);
	CHECK_INT(fi_cntr_open(t.domain, &cattr, &cntr2, NULL), 0);

	/* FI_MR_ENDPOINT: disabled until bound to an endpoint and enabled. */
	dom->mr_mode |= FI_MR_ENDPOINT;
	CHECK_INT(fi_mr_reg(t.domain, buf, sizeof(buf), RW, 0, 0, 0, &mr, NULL), 0);
	CHECK_INT(verify(dom, fi_mr_key(mr), base, 1, FI_REMOTE_READ, NULL),
	          -FI_EKEYREJECTED);
	CHECK_INT(fi_mr_enable(mr), -FI_EINVAL);
	CHECK_INT(fi_mr_bind(mr, &fake_ep, FI_REMOTE_WRITE), -FI_EBADFLAGS);
	CHECK_INT(fi_mr_bind(mr, NULL, 0), -FI_EINVAL);
	CHECK_INT(fi_mr_bind(mr, &t.domain->fid, 0), -FI_EINVAL);
	CHECK_INT(fi_mr_bind(mr, &fake_ep, 0), 0);
	CHECK_INT(verify(dom, fi_mr_key(mr), base, 1, FI_REMOTE_READ, NULL),
	          -FI_EKEYREJECTED);
	CHECK_INT(fi_mr_enable(mr), 0);
	CHECK_INT(verify(dom, fi_mr_key(mr), base, 1, FI_REMOTE_READ, buf), 0);
	CHECK_INT(fi_mr_enable(mr), 0);
	CHECK_INT(fi_mr_bind(mr, &fake_ep, 0), -FI_EINVAL); /* fixed once enabled */
	CHECK_INT(fi_close(&mr->fid), 0);
	dom->mr_mode &= ~FI_MR_ENDPOINT;

	/* Plain mode: enabled at once; a counter may be bound any time. */
	CHECK_INT(fi_mr_reg(t.domain, buf, sizeof(buf), RW, 0, 0, 0, &plain, NULL), 0);
	CHECK_INT(verify(dom, fi_mr_key(plain), base, 1, FI_REMOTE_WRITE, buf), 0);
	CHECK_INT(fi_mr_bind(plain, &cntr->fid, FI_REMOTE_READ), -FI_EBADFLAGS);
	CHECK_INT(fi_mr_bind(plain, &cntr->fid, FI_REMOTE_WRITE), 0);
	CHECK_INT(fi_mr_bind(plain, &cntr2->fid, FI_REMOTE_WRITE), 0);
	lmr = fi_mr_desc(plain);
	CHECK(lmr->cntr == lm_container_of(cntr2, struct lm_cntr, cntr_fid));
	CHECK_HEX(lmr->cntr_flags, FI_REMOTE_WRITE);
	/* The binding pins the counter; the first one was released. */
	CHECK_INT(fi_close(&cntr2->fid), -FI_EBUSY);
	CHECK_INT(fi_mr_enable(plain), 0);
	CHECK_INT(fi_mr_refresh(plain, NULL, 0, 0), 0);
	CHECK_INT(fi_control(&plain->fid, FI_GETWAIT, NULL), -FI_ENOSYS);

	/* FI_MR_RMA_EVENT: counters only on regions registered with
	 * FI_RMA_EVENT, which start disabled. */
	dom->mr_mode |= FI_MR_RMA_EVENT;
	CHECK_INT(fi_mr_bind(plain, &cntr->fid, FI_REMOTE_WRITE), -FI_EINVAL);
	CHECK_INT(
	    fi_mr_reg(t.domain, buf, sizeof(buf), RW, 0, 0, FI_RMA_EVENT, &ev, NULL), 0);
	CHECK_INT(verify(dom, fi_mr_key(ev), base, 1, FI_REMOTE_WRITE, NULL),
	          -FI_EKEYREJECTED);
	CHECK_INT(fi_mr_bind(ev, &cntr->fid, FI_REMOTE_WRITE), 0);
	CHECK_INT(fi_mr_enable(ev), 0);
	CHECK_INT(verify(dom, fi_mr_key(ev), base + 255, 1, FI_REMOTE_WRITE, buf + 255),
	          0);
	CHECK_INT(fi_mr_bind(ev, &cntr->fid, FI_REMOTE_WRITE), -FI_EINVAL);
	dom->mr_mode &= ~FI_MR_RMA_EVENT;

	CHECK_INT(fi_close(&ev->fid), 0);
	CHECK_INT(fi_close(&plain->fid), 0);
	CHECK_INT(fi_close(&cntr2->fid), 0);
	CHECK_INT(fi_close(&cntr->fid), 0);
	testdom_close(&t);
}

/* Until the domain's own fi_control forwards the raw-key commands, the
 * test puts lm_mr_domain_control in the domain's fid ops. */
static struct fi_ops raw_dom_ops;

static void test_raw_keys(void)
{
	static char buf[128];
	uint8_t raw[16], want[8];
	struct fid_mr *mr;
	struct lm_domain *dom;
	struct testdom t;
	uint64_t base = 0, mapped = 0, key;
	size_t size;

	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	dom = dom_of(&t);
	raw_dom_ops = *t.domain->fid.ops;
	raw_dom_ops.control = lm_mr_domain_control;
	t.domain->fid.ops = &raw_dom_ops;
	dom->mr_mode |= FI_MR_RAW;

	CHECK_INT(fi_mr_reg(t.domain, buf, sizeof(buf), RW, 0, 0, 0, &mr, NULL), 0);
	CHECK_HEX(fi_mr_key(mr), FI_KEY_NOTAVAIL);
	key = ((struct lm_mr *)fi_mr_desc(mr))->key;

	size = 4;
	CHECK_INT(fi_mr_raw_attr(mr, &base, raw, &size, 0), -FI_ETOOSMALL);
	CHECK_INT(size, 8);
	CHECK_INT(fi_mr_raw_attr(mr, &base, raw, &size, 1), -FI_EBADFLAGS);
	size = sizeof(raw);
	CHECK_INT(fi_mr_raw_attr(mr, &base, raw, &size, 0), 0);
	CHECK_INT(size, 8);
	CHECK_HEX(base, addr_of(buf));
	for (int i = 0; i < 8; i++)
		want[i] = (uint8_t)(key >> (8 * i));
	CHECK(memcmp(raw, want, 8) == 0);

	CHECK_INT(fi_mr_map_raw(t.domain, base, raw, 8, &mapped, 0), 0);
	CHECK_HEX(mapped, key);
	CHECK_INT(verify(dom, mapped, base + 127, 1, FI_REMOTE_WRITE, buf + 127), 0);
	CHECK_INT(fi_mr_map_raw(t.domain, base, raw, 4, &mapped, 0), -FI_EINVAL);
	CHECK_INT(fi_mr_map_raw(t.domain, base, raw, 8, &mapped, 2), -FI_EBADFLAGS);
	CHECK_INT(fi_mr_map_raw(t.domain, base, raw, 8, NULL, 0), -FI_EINVAL);
	CHECK_INT(fi_mr_unmap_key(t.domain, mapped), 0);
	CHECK_INT(fi_control(&t.domain->fid, FI_GETWAIT, NULL), -FI_ENOSYS);

	CHECK_INT(fi_close(&mr->fid), 0);
	testdom_close(&t);
}

static void test_async_registration(void)
{
	static char buf[64];
	struct fi_eq_attr eattr = {.size = 8, .wait_obj = FI_WAIT_NONE};
	struct fi_eq_entry entry;
	struct fid_mr *mr = NULL;
	struct fid_eq *eq;
	struct testdom t;
	uint32_t event = 0;
	int ctx;

	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	CHECK_INT(fi_eq_open(t.fabric, &eattr, &eq, NULL), 0);
	CHECK_INT(fi_domain_bind(t.domain, &eq->fid, LM_REG_MR), 0);
	CHECK_INT(fi_mr_reg(t.domain, buf, sizeof(buf), RW, 0, 0, 0, &mr, &ctx), 0);
	CHECK(mr != NULL);
	memset(&entry, 0, sizeof(entry));
	CHECK_INT(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), sizeof(entry));
	CHECK_INT(event, FI_MR_COMPLETE);
	CHECK(mr && entry.fid == &mr->fid);
	CHECK(entry.context == &ctx);
	CHECK_INT(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);
	if (mr)
		CHECK_INT(fi_close(&mr->fid), 0);
	CHECK_INT(fi_close(&t.domain->fid), 0);
	t.domain = NULL;
	CHECK_INT(fi_close(&eq->fid), 0);
	testdom_close(&t);
}

/* FI_MR_BASIC means virtual addresses and provider keys; FI_MR_SCALABLE
 * means offsets and the application's keys. */
static void test_compat_modes(void)
{
	static char buf[64];
	struct fid_mr *mr;
	struct lm_domain *dom;
	struct testdom t;

	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	dom = dom_of(&t);
	dom->mr_mode = LM_MR_BASIC;
	CHECK_INT(fi_mr_reg(t.domain, buf, sizeof(buf), RW, 0, 5, 0, &mr, NULL), 0);
	CHECK_INT(
	    verify(dom, fi_mr_key(mr), addr_of(buf) + 63, 1, FI_REMOTE_READ, buf + 63),
	    0);
	CHECK_INT(verify(dom, fi_mr_key(mr), 0, 1, FI_REMOTE_READ, NULL), -FI_EACCES);
	CHECK_INT(fi_close(&mr->fid), 0);

	dom->mr_mode = LM_MR_SCALABLE;
	CHECK_INT(fi_mr_reg(t.domain, buf, sizeof(buf), RW, 0, 5, 0, &mr, NULL), 0);
	CHECK_HEX(fi_mr_key(mr), 5);
	CHECK_INT(verify(dom, 5, 63, 1, FI_REMOTE_READ, buf + 63), 0);
	CHECK_INT(verify(dom, 5, addr_of(buf), 1, FI_REMOTE_READ, NULL), -FI_EACCES);
	CHECK_INT(fi_close(&mr->fid), 0);
	testdom_close(&t);
}

/* Registration, checks and close from several threads on one
 * FI_THREAD_SAFE domain. */
#define NTHREADS 4
#define NREGS    2000

struct worker {
	struct testdom *t;
	char buf[64];
	int errors;
};

static void *reg_worker(void *arg)
{
	struct worker *w = arg;
	struct lm_domain *dom = dom_of(w->t);

	for (int i = 0; i < NREGS; i++) {
		struct fid_mr *mr;
		void *p = NULL;

		if (fi_mr_reg(w->t->domain, w->buf, sizeof(w->buf), RW, 0, 0, 0, &mr,
		              NULL)) {
			w->errors++;
			continue;
		}
		if (lm_mr_verify(dom, fi_mr_key(mr), addr_of(w->buf) + i % 64, 1,
		                 FI_REMOTE_WRITE, &p) ||
		    p != w->buf + i % 64)
			w->errors++;
		if (fi_close(&mr->fid))
			w->errors++;
	}
	return NULL;
}

static void test_threads(void)
{
	static struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	struct testdom t;

	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	for (int i = 0; i < NTHREADS; i++) {
		w[i].t = &t;
		CHECK_INT(pthread_create(&th[i], NULL, reg_worker, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK_INT(w[i].errors, 0);
	}
	CHECK_INT(atomic_load(&dom_of(&t)->ref), 0);
	testdom_close(&t);

	/* FI_THREAD_DOMAIN takes no lock but behaves the same. */
	CHECK_INT(testdom_open(&t, FI_THREAD_DOMAIN, NULL, NULL), 0);
	w[0].t = &t;
	w[0].errors = 0;
	reg_worker(&w[0]);
	CHECK_INT(w[0].errors, 0);
	testdom_close(&t);
}

int main(void)
{
	alarm(120); /* a hang is a failure, not a stuck test run */
	test_prov_keys_virt_addr();
	test_requested_keys_offsets();
	test_iov_regions();
	test_bad_registrations();
	test_enable_and_bind();
	test_raw_keys();
	test_async_registration();
	test_compat_modes();
	test_threads();
	return check_done();
}
