/* env_fuzz.c - fuzz target for the parameters loom reads from the
 * environment (fi_info -e): each input sets FI_* variables to garbage,
 * negative, huge, empty or plausible values, then, on shm and on tcp,
 * asks fi_getinfo, opens a fabric, domain, AV, CQ and RDM endpoint, and
 * sends a message to itself.  Each step either works or fails with an
 * fi_errno, never crashes or hangs; a message sent arrives intact; all is
 * freed.  A value loom cannot read is warned about and the default used.
 *
 * FI_LOG_* and FI_PROVIDER_PATH are read once per process (at the first
 * call): one input in eight also sets them in a child process (its
 * stderr, where the log goes, to /dev/null), which does the same and must
 * exit normally.  FI_PROVIDER_PATH never names a real directory: loading
 * another library's providers is not loom's to answer for. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "reader.h"
#include "target.h"

static unsigned long runs, opened, delivered;

static const char *const vars[] = {
    "FI_PROVIDER",           "FI_SHM_DISABLE_CMA", "FI_SHM_EAGER_SIZE",
    "FI_TCP_CONN_TIMEOUT",   "FI_TCP_IFACE",       "FI_TCP_PORT_HIGH_RANGE",
    "FI_TCP_PORT_LOW_RANGE", "FI_TCP_SOCKBUF",     "FI_UDP_IFACE",
    "FI_SHM_SAR_THRESHOLD",  "FI_UNIVERSE_SIZE",   "FI_HOOK",
    "FI_TCP_MAX_INJECT",     "FI_OFI_RXM_USE_SRX",
};
#define NVARS (sizeof(vars) / sizeof(*vars))

static const char *const values[] = {
    "",
    "0",
    "-1",
    "1",
    "2",
    "yes",
    "no",
    "true",
    "off",
    "abc",
    "99999999999999999999",
    "-99999999999999999999",
    "0x7fffffff",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967295",
    "18446744073709551615",
    "9223372036854775807",
    "1e9",
    " 5",
    "5 ",
    "0x",
    "010",
    "65535",
    "65536",
    "4096",
    "64",
    "lo",
    "no-such-interface",
    "shm",
    "tcp",
    "^shm",
    "^tcp",
    "shm,tcp",
    "tcp;ofi_rxm",
    "udp",
};
#define NVALUES (sizeof(values) / sizeof(*values))

static const char *const once_vars[] = {"FI_LOG_LEVEL", "FI_LOG_PROV", "FI_LOG_SUBSYS",
                                        "FI_LOG_INTERVAL", "FI_PROVIDER_PATH"};
static const char *const once_values[] = {"",
                                          "warn",
                                          "info",
                                          "debug",
                                          "trace",
                                          "WARN",
                                          "none",
                                          "x",
                                          "-1",
                                          "0",
                                          "99999999999999999999",
                                          "core,av",
                                          "^shm",
                                          "shm,tcp",
                                          "ep_data,^cq",
                                          "/nonexistent",
                                          ":",
                                          "::::/nonexistent:",
                                          "1000000",
                                          "2147483648"};

struct world {
	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

static void world_close(struct world *w)
{
	if (w->ep)
		FZ_CHECK(fi_close(&w->ep->fid) == 0, "closing the endpoint");
	if (w->av)
		FZ_CHECK(fi_close(&w->av->fid) == 0, "closing the AV");
	if (w->cq)
		FZ_CHECK(fi_close(&w->cq->fid) == 0, "closing the CQ");
	if (w->dom)
		FZ_CHECK(fi_close(&w->dom->fid) == 0, "closing the domain");
	if (w->fab)
		FZ_CHECK(fi_close(&w->fab->fid) == 0, "closing the fabric");
	fi_freeinfo(w->info);
	memset(w, 0, sizeof(*w));
}

/* Open an RDM endpoint of prov and send len bytes to itself. */
static void try_prov(const char *prov, size_t len)
{
	static char out[1 << 17], in[1 << 17];
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .size = 16};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct world w = {0};
	char name[256];
	size_t nlen = sizeof(name);
	fi_addr_t self;
	int got = 0;

	FZ_CHECK(hints, "fi_allocinfo");
	hints->fabric_attr->prov_name = strdup(prov);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	if (FZ_CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &w.info)))
		goto out;
	if (FZ_CALL(fi_fabric(w.info->fabric_attr, &w.fab, NULL)) ||
	    FZ_CALL(fi_domain(w.fab, w.info, &w.dom, NULL)) ||
	    FZ_CALL(fi_av_open(w.dom, &ava, &w.av, NULL)) ||
	    FZ_CALL(fi_cq_open(w.dom, &cqa, &w.cq, NULL)) ||
	    FZ_CALL(fi_endpoint(w.dom, w.info, &w.ep, NULL)) ||
	    FZ_CALL(fi_ep_bind(w.ep, &w.av->fid, 0)) ||
	    FZ_CALL(fi_ep_bind(w.ep, &w.cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    FZ_CALL(fi_enable(w.ep)) || FZ_CALL(fi_getname(&w.ep->fid, name, &nlen)) ||
	    FZ_CALL(fi_av_insert(w.av, name, 1, &self, 0, NULL)) != 1)
		goto out;
	opened++;
	if (len > w.info->ep_attr->max_msg_size)
		len = w.info->ep_attr->max_msg_size;
	for (size_t i = 0; i < len; i++)
		out[i] = (char)(i * 7 + len);
	memset(in, 0, len);
	if (FZ_CALL(fi_recv(w.ep, in, len, NULL, FI_ADDR_UNSPEC, in)))
		goto out;
	if (FZ_CALL(fi_send(w.ep, out, len, NULL, self, out)))
		goto out;
	/* A message to oneself needs nothing but progress: both completions
	 * come within a generous bound, whatever the settings. */
	for (int spin = 0; got < 2 && spin < 2000000; spin++) {
		struct fi_cq_entry e;
		ssize_t n = fi_cq_read(w.cq, &e, 1);

		if (n == 1) {
			got++;
		} else if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};

			FZ_CHECK(fi_cq_readerr(w.cq, &ee, 0) == 1, "fi_cq_readerr");
			FZ_CHECK(0, "%s: a message to itself failed: %s", prov,
			         fi_strerror(ee.err));
		} else {
			FZ_CHECK(n == -FI_EAGAIN, "fi_cq_read = %zd", n);
		}
	}
	FZ_CHECK(got == 2, "%s: a message to itself did not complete (%d of 2)", prov,
	         got);
	FZ_CHECK(!memcmp(in, out, len), "%s: a message to itself arrived changed", prov);
	delivered++;
out:
	world_close(&w);
	fi_freeinfo(hints);
}

/* The read-once parameters, in a child that starts loom afresh. */
static void in_child(struct fz_reader *r, size_t len)
{
	unsigned n = 1 + fz_below(r, 3);
	const char *set[3][2];
	int status = 0, ret;
	pid_t pid;

	for (unsigned k = 0; k < n; k++) {
		static char bufs[3][300];

		set[k][0] =
		    once_vars[fz_below(r, sizeof(once_vars) / sizeof(*once_vars))];
		set[k][1] = fz_str(r, bufs[k], sizeof(bufs[k]), once_values,
		                   sizeof(once_values) / sizeof(*once_values));
		/* Directories only from the list (none exists). */
		if (!strcmp(set[k][0], "FI_PROVIDER_PATH") && set[k][1] == bufs[k])
			set[k][1] = "/nonexistent";
	}
	pid = fork();
	FZ_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, STDERR_FILENO);
		for (unsigned k = 0; k < n; k++)
			setenv(set[k][0], set[k][1], 1);
		try_prov("shm", len);
		try_prov("tcp", len);
		_exit(0);
	}
	while ((ret = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		; /* libFuzzer's timer */
	FZ_CHECK(ret == pid, "waitpid");
	FZ_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	         "a child with %s=\"%s\" ended with status 0x%x", set[0][0], set[0][1],
	         status);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_reader r = {data, size};
	bool set[NVARS] = {false};
	unsigned nset = 1 + fz_below(&r, 4);
	static const size_t lens[] = {0, 1, 64, 4096, 65536, 1 << 17};
	size_t len = lens[fz_below(&r, 6)];

	for (unsigned k = 0; k < nset; k++) {
		unsigned v = fz_below(&r, NVARS);
		char buf[300];
		const char *val = fz_str(&r, buf, sizeof(buf), values, NVALUES);

		/* Only loopback: an empty or real interface name other than
		 * lo would put tcp on the machine's other addresses. */
		if (v == 4 && (!*val || (if_nametoindex(val) && strcmp(val, "lo"))))
			val = "lo";
		setenv(vars[v], val, 1);
		set[v] = true;
	}
	/* The interface the CI's network tests use, unless varied. */
	if (!set[4])
		setenv("FI_TCP_IFACE", "lo", 1);
	runs++;
	if (fz_below(&r, 8) == 0)
		in_child(&r, len);
	else
		try_prov("shm", len), try_prov("tcp", len);
	for (unsigned v = 0; v < NVARS; v++)
		unsetenv(vars[v]);
	return 0;
}

size_t fz_generate(uint64_t *rng, uint8_t *buf, size_t cap)
{
	size_t n = 4 + (size_t)(fz_rand(rng) % 60);

	if (n > cap)
		n = cap;
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)fz_rand(rng);
	return n;
}

int fz_write_seeds(const char *dir)
{
	/* Each variable once with a garbage value (the values list's "abc",
	 * index 9: byte 36), and with a huge one (index 10: byte 40). */
	for (unsigned v = 0; v < NVARS; v++) {
		for (unsigned k = 0; k < 2; k++) {
			uint8_t s[4] = {0, 2, (uint8_t)v, (uint8_t)(k ? 40 : 36)};
			char name[64];

			snprintf(name, sizeof(name), "seed-%s-%u", vars[v], k);
			if (fz_save(dir, name, s, sizeof(s)))
				return -1;
		}
	}
	return 0;
}

void fz_final_check(void)
{
	unsigned long before = delivered;

	/* With every variable unset again, both providers work. */
	setenv("FI_TCP_IFACE", "lo", 1);
	try_prov("shm", 4096);
	try_prov("tcp", 4096);
	unsetenv("FI_TCP_IFACE");
	FZ_CHECK(delivered == before + 2, "shm and tcp after the run");
}

void fz_report(void)
{
	fprintf(stderr, "env: %lu inputs, %lu endpoints opened, %lu messages delivered\n",
	        runs, opened, delivered);
}
