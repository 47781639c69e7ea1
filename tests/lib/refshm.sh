# refshm.sh - sourced by the scripts that run programs on the reference
# libfabric: libfabric 1.17's shm provider names its regions
# /dev/shm/<pid>:<n>:<n> and leaves them behind when its process is killed
# (a timeout, a test of peer death); a later process that gets the same pid
# then fails in fi_enable with EBUSY.  Remove such files of this user whose
# process is gone before every run.  loom's own regions (loom-*) are not
# touched: loom reclaims them itself.
clean_ref_shm() {
	local f pid
	for f in /dev/shm/*:*:*; do
		[ -O "$f" ] || continue
		pid=${f#/dev/shm/}
		pid=${pid%%:*}
		case $pid in '' | *[!0-9]*) continue ;; esac
		kill -0 "$pid" 2>/dev/null || rm -f "$f"
	done
}
