# Sourced by the scripts that time a run under `memcap` against the same run uncapped
# (scripts/inference_out_of_core.sh, scripts/link_out_of_core.sh), after ROOT is set: MEMCAP
# (default ../shared/tools/memcap beside the checkout) checked, and `drop`, which empties
# the page cache before a timed run so that every run reads the store from disk (root
# only; DROP=0 skips it, for smoke runs on a shared machine).
MEMCAP=${MEMCAP:-$ROOT/../shared/tools/memcap}
[ -x "$MEMCAP" ] || { echo "memcap not found at $MEMCAP: set MEMCAP" >&2; exit 1; }
drop() { [ "${DROP:-1}" = 1 ] || return 0; sync; if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; else echo "(page cache not dropped: not root)"; fi; }
