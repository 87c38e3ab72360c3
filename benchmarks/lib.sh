# Shared by the recording scripts (record_clients.sh, record_steady.sh, record_whatif.sh): source it after setting
# BUDGET (seconds for the whole script), OUT and LOG.
#
#   run LABEL SECONDS COMMAND...
#
# runs COMMAND under `timeout`, at most SECONDS and never past what is left of BUDGET (less RUN_MARGIN seconds,
# default 10, kept for the end of the script); skipped when fewer than RUN_MIN seconds (default 15) are left.
# Its output goes to $LOG. With RUN_SHOW set (a grep -E pattern), the start line and the output lines matching it
# are printed too, and the output's USDT probe lines are dropped.

run() {
    local label=$1 limit=$2
    shift 2
    local left=$((BUDGET - SECONDS - ${RUN_MARGIN:-10}))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt "${RUN_MIN:-15}" ]; then
        echo "=== $label: skipped, budget spent" | tee -a "$LOG"
        return
    fi
    local t0=$SECONDS rc
    if [ -z "${RUN_SHOW:-}" ]; then
        echo "=== $label: start $(date -u +%T): $*" >>"$LOG"
        timeout "$limit" "$@" >>"$LOG" 2>&1
        rc=$?
    else
        echo "=== $label: start $(date -u +%T): $*" | tee -a "$LOG"
        timeout "$limit" "$@" >"$OUT/.$label.log" 2>&1
        rc=$?
        grep -v '^USDT:' "$OUT/.$label.log" >>"$LOG"
        grep -v '^USDT:' "$OUT/.$label.log" | grep -E "$RUN_SHOW" || true
        rm -f "$OUT/.$label.log"
    fi
    echo "=== $label: rc=$rc in $((SECONDS - t0)) s" | tee -a "$LOG"
}
