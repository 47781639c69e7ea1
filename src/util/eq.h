/* eq.h - event queues (man fi_eq): the application's fi_eq_* calls and the
 * provider-side calls that post control, CM and error events. */
#ifndef LOOM_UTIL_EQ_H
#define LOOM_UTIL_EQ_H

/* Included from util.h, which declares lm_fabric, lm_wait, lm_lock and the
 * containers used here. */

struct lm_eq {
	struct fid_eq eq_fid;
	struct lm_fabric *fabric;
	uint64_t flags;            /* fi_eq_attr.flags (FI_WRITE) */
	enum fi_wait_obj wait_obj; /* as requested (FI_WAIT_SET, FI_WAIT_FD, ...) */
	struct lm_list events;     /* queued lm_eq_event, oldest first */
	struct lm_bufpool pool;    /* events whose payload fits inline */
	size_t count;              /* queued events */
	/* err_data handed out by fi_eq_readerr when the application gave
	 * no buffer of its own: valid until its next read call. */
	void *lent_err_data;
	struct lm_list progress; /* lm_progress hooks, run before reads */
	struct lm_lock progress_lock;
	struct lm_wait *wait;         /* NULL for FI_WAIT_NONE */
	struct lm_wait_member member; /* when wait is a wait set */
	struct lm_lock lock;
	atomic_int ref; /* objects bound to the EQ (AVs, domains, endpoints) */
};

/* fi_eq_open; fabric ops table entry eq_open. */
int lm_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
               void *context);

/* Post an event: the same contract as fi_eq_write (buf holds an
 * fi_eq_entry, an fi_eq_cm_entry plus connection data, or any user
 * event), but open to providers whatever the EQ's FI_WRITE flag.  The
 * queue grows rather than drop an event; the only failure is -FI_ENOMEM.
 * For FI_CONNREQ, FI_CONNECTED and FI_SHUTDOWN entries carrying a non-NULL
 * info, the EQ owns that info until an fi_eq_read (not a peek) hands it
 * to the application; if the EQ is closed first it is freed.  Returns
 * len. */
ssize_t lm_eq_write(struct lm_eq *eq, uint32_t event, const void *buf, size_t len,
                    uint64_t flags);
/* Post an error event; err->err_data (err_data_size bytes) is copied. */
int lm_eq_write_err(struct lm_eq *eq, const struct fi_eq_err_entry *err);

/* Hooks run by every read, sread and trywait; a hook's fd (if any) is
 * watched while a reader sleeps.  A hook must not add or remove hooks from
 * inside its run function. */
void lm_eq_add_progress(struct lm_eq *eq, struct lm_progress *p);
void lm_eq_del_progress(struct lm_eq *eq, struct lm_progress *p);

/* fi_trywait on an EQ: -FI_EAGAIN when an event is queued after
 * progressing, 0 when it is safe to sleep on the wait object. */
int lm_eq_trywait(struct fid *fid);

#endif
