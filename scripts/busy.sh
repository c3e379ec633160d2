# shellcheck shell=bash
# One busy loop per core while a command runs, as the other jobs of a shared
# machine or CI runner would be: a test that holds only on an idle machine
# (a bound on wall-clock time, a fixed sleep waiting for something) fails
# under it. Each loop ends with the command, and after two hours whatever
# happens. Sourced by scripts/test.sh and scripts/test-clone.sh.
busy_pids=()
stop_busy() {
    [ "${#busy_pids[@]}" -eq 0 ] || { kill "${busy_pids[@]}" 2>/dev/null || true; wait "${busy_pids[@]}" 2>/dev/null || true; }
    busy_pids=()
}
under_load() {
    local rc=0 _
    for _ in $(seq "$(nproc)"); do
        timeout 7200 sh -c 'while :; do :; done' &
        busy_pids+=($!)
    done
    printf '%d busy loops; %s\n' "${#busy_pids[@]}" "$(uptime)"
    "$@" || rc=$?
    printf 'at the end: %s\n' "$(uptime)"
    stop_busy
    return "$rc"
}

