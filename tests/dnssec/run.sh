#!/usr/bin/env bash
# The DNSSEC comparison rig of issue 61 (see tests/dnssec/README.md): signs
# the test zones (zones.sh), serves them from an authoritative Unbound,
# puts a non-validating recursive Unbound in front, and asks a validating
# Unbound (the reference) every case of cases.tsv. With --hydradns, HydraDNS
# takes the recursive as its upstream with `option dnssec '1'` and the
# test root's anchor, and each of its verdicts is held against the case's.
# Loopback only, ports picked free, every process ours and killed on exit.
#
#   tests/dnssec/run.sh [--hydradns BIN [--force]] [--record] [--keep]
#   tests/dnssec/run.sh --serve-only FILE
#     --record   write what Unbound says into cases.tsv (review the diff)
#     --keep     keep the temporary directory (configs, zones, logs)
#     --force    compare BIN even if it warns that it does not know `dnssec`
#     --serve-only FILE  no cases: once the rig answers, write its ports and
#                the anchor's path into FILE (shell assignments) and serve
#                until FILE is removed, a signal comes, or 2 h pass
# Exit: 0 every case as recorded (and HydraDNS agreeing), 1 a difference,
# 2 usage or the rig did not start, 77 BIN has no `dnssec` option (skipped).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hydradns='' record=0 keep=0 force=0 serve=''
while [ $# -gt 0 ]; do
    case $1 in
        --hydradns) [ $# -ge 2 ] || { echo "--hydradns needs a binary" >&2; exit 2; }; hydradns=$2; shift ;;
        --record) record=1 ;;
        --keep) keep=1 ;;
        --force) force=1 ;;
        --serve-only) [ $# -ge 2 ] || { echo "--serve-only needs a file" >&2; exit 2; }; serve=$2; shift ;;
        *) sed -n '10,19s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
    esac
    shift
done
if [ -n "$hydradns" ]; then
    [ -x "$hydradns" ] || { echo "not an executable: $hydradns" >&2; exit 2; }
    hydradns=$(cd "$(dirname "$hydradns")" && pwd)/$(basename "$hydradns")
fi
for tool in unbound unbound-checkconf dig ldns-keygen ldns-signzone ldns-key2ds dnssec-keygen dnssec-signzone \
    dnssec-dsfromkey python3; do
    command -v "$tool" >/dev/null || { echo "missing $tool (unbound, dnsutils, ldnsutils, bind9-utils)" >&2; exit 2; }
done
started=$SECONDS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hydradns-dnssec.XXXXXX")
pids=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ "$keep" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$here/zones.sh" "$tmp/zones"

# Six ports free for UDP and TCP at once; Unbound binds them without
# SO_REUSEPORT (below), so one taken in between fails loudly, never shares.
read -r p_auth p_forger p_rec p_val p_hyd p_clock < <(python3 - <<'PY'
import socket
held, ports = [], []
while len(ports) < 6:
    t = socket.socket(); t.bind(("127.0.0.1", 0)); port = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", port))
    except OSError:
        t.close(); continue
    held += [t, u]; ports.append(port)
print(*ports)
PY
)

# Root hints for the authoritative server and the validator (which
# forwards everything): an address nothing listens on, so that nothing
# they ask can leave loopback. The recursive has none: its stub for '.'
# replaces the built-in ones, and a root-hints file would replace the stub.
printf '.\t3600000\tIN\tNS\tns.example.\nns.example.\t3600000\tIN\tA\t127.83.0.53\n' > "$tmp/hints.zone"

server() { # NAME PORT MODULES [HINTS]
    cat <<CONF
server:
    interface: 127.0.0.1
    port: $2
    so-reuseport: no
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "$tmp"
    pidfile: ""
    use-syslog: no
    logfile: "$tmp/$1.log"
    log-time-ascii: yes
    num-threads: 1
    do-ip6: no
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    qname-minimisation: no
    module-config: "$3"
CONF
    [ -z "${4:-}" ] || printf '    root-hints: "%s"\n' "$4"
}

# The authoritative server: every zone, answered from its file alone.
{
    server auth "$p_auth" iterator "$tmp/hints.zone"
    while IFS=$'\t' read -r zone file; do
        printf 'auth-zone:\n    name: "%s"\n    zonefile: "%s"\n' "$zone" "$tmp/zones/$file"
        printf '    for-downstream: yes\n    for-upstream: no\n    fallback-enabled: no\n'
    done < "$tmp/zones/zones.list"
} > "$tmp/auth.conf"

# The recursive: no validation; a stub per zone, so that every query goes
# to the authoritative server and a DS query to the parent's side of the cut.
{
    server recursive "$p_rec" iterator
    while IFS=$'\t' read -r zone _; do
        port=$p_auth
        [ "$zone" != n3wrong.example. ] || port=$p_forger
        printf 'stub-zone:\n    name: "%s"\n    stub-addr: 127.0.0.1@%s\n' "$zone" "$port"
    done < "$tmp/zones/zones.list"
} > "$tmp/recursive.conf"

# The reference: Unbound's validator behind the same recursive, as
# HydraDNS will be. ede: RFC 8914's codes; val-log-level 2: why, in its log.
{
    server validator "$p_val" "validator iterator" "$tmp/hints.zone"
    cat <<CONF
    trust-anchor-file: "$tmp/zones/root.anchor"
    val-log-level: 2
    ede: yes
forward-zone:
    name: "."
    forward-addr: 127.0.0.1@$p_rec
CONF
} > "$tmp/validator.conf"

for conf in auth recursive validator; do
    unbound-checkconf "$tmp/$conf.conf" >/dev/null
done

start() { # LOG COMMAND…
    local log=$1
    shift
    "$@" > "$log" 2>&1 &
    pids+=($!)
}
# Answers a query within 10 s, or the rig stops here.
wait_dns() { # NAME PORT QNAME
    local n
    for n in $(seq 100); do
        dig @127.0.0.1 -p "$2" +time=1 +tries=1 +norec "$3" SOA > /dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "$1 on port $2 did not answer; its log:" >&2
    cat "$tmp/$1.log" "$tmp/$1.out" >&2 2>/dev/null || true
    exit 2
}
start "$tmp/auth.out" unbound -c "$tmp/auth.conf"
start "$tmp/forger.out" python3 "$here/forger.py" "$p_forger" "$p_auth" n3wrong.example alg13.example
start "$tmp/recursive.out" unbound -c "$tmp/recursive.conf"
start "$tmp/validator.out" unbound -c "$tmp/validator.conf"
wait_dns auth "$p_auth" example
wait_dns forger "$p_forger" n3wrong.example
wait_dns recursive "$p_rec" example
wait_dns validator "$p_val" example
ready=$SECONDS

# The rig itself, before any verdict: the recursive answers a DS query from
# the parent's side of the cut (signed by example.), passes the RRSIGs on
# to a DO query, and sets no AD (it validates nothing).
rig_fail() { echo "rig check failed: $1" >&2; exit 2; }
out=$(dig @127.0.0.1 -p "$p_rec" +time=3 +tries=1 +dnssec DS alg8.example)
awk '$4 == "RRSIG" && $5 == "DS" && $12 == "example." { found = 1 } END { exit !found }' <<< "$out" ||
    rig_fail "DS alg8.example is not answered from example.: $out"
out=$(dig @127.0.0.1 -p "$p_rec" +time=3 +tries=1 +dnssec www.alg8.example A)
awk '$4 == "RRSIG" && $5 == "A" && $12 == "alg8.example." { found = 1 } END { exit !found }' <<< "$out" ||
    rig_fail "the recursive passes no RRSIG: $out"
! grep -q '^;; flags:[a-z ]* ad[ ;]' <<< "$out" || rig_fail "the recursive sets AD: $out"

# For a benchmark (bench/dnssec.py): the rig, checked, without the cases.
# Written to a temporary name first, so the reader never sees half of it.
if [ -n "$serve" ]; then
    printf 'recursive=127.0.0.1:%s\nvalidator=127.0.0.1:%s\nanchor=%s\ndir=%s\n' \
        "$p_rec" "$p_val" "$tmp/zones/root.anchor" "$tmp" > "$serve.new"
    mv "$serve.new" "$serve"
    until [ ! -e "$serve" ] || [ "$SECONDS" -ge $((started + 7200)) ]; do sleep 1; done
    exit 0
fi

# verdict PORT QNAME QTYPE [DIG OPTIONS…]: "RCODE AD EDE MS" (AD 1 or 0,
# EDE the codes joined by ',' or '-', MS dig's query time, shown, never
# judged); a query that times out is "TIMEOUT 0 - -".
verdict() {
    local out rcode ad ede ms
    out=$(dig @127.0.0.1 -p "$1" +time=5 +tries=1 +dnssec "${@:4}" "$2" "$3" 2>&1) || true
    rcode=$(sed -n 's/.*status: \([A-Z]*\),.*/\1/p' <<< "$out" | head -1)
    ad=0
    grep -q '^;; flags:[a-z ]* ad[ ;]' <<< "$out" && ad=1
    ede=$(sed -n 's/^; EDE: \([0-9]*\).*/\1/p' <<< "$out" | paste -sd, -)
    ms=$(sed -n 's/^;; Query time: \([0-9]*\) msec/\1/p' <<< "$out")
    echo "${rcode:-TIMEOUT} $ad ${ede:--} ${ms:--}"
}

# probe PORT QNAME QTYPE [DIG OPTIONS…]: "RCODE AD RRSIGS EDE", RRSIGS the
# number in the answer section.
probe() {
    local out rcode ad sigs ede
    out=$(dig @127.0.0.1 -p "$1" +time=5 +tries=1 "${@:4}" "$2" "$3" 2>&1) || true
    rcode=$(sed -n 's/.*status: \([A-Z]*\),.*/\1/p' <<< "$out" | head -1)
    ad=0
    grep -q '^;; flags:[a-z ]* ad[ ;]' <<< "$out" && ad=1
    sigs=$(awk '/^;; ANSWER SECTION:/ { a = 1; next } /^$/ { a = 0 } a && $4 == "RRSIG" { n++ } END { print n + 0 }' <<< "$out")
    ede=$(sed -n 's/^; EDE: \([0-9]*\).*/\1/p' <<< "$out" | paste -sd, -)
    echo "${rcode:-TIMEOUT} $ad $sigs ${ede:--}"
}

# The client's flags (issue 61, RFC 4035 3.2 and RFC 6840 5.7-5.9), asked
# of one resolver in this order: the CD=1 answer comes first, then the same
# name without CD; a name asked without DO is asked again with it. Each
# row: what is asked, the options, and "RCODE AD RRSIGS" expected ('*' any,
# '+' at least one). Prints a table; returns 1 if a row is not as expected.
flags() { # PORT
    local bad=0 what qname qtype opts want got g w ok i
    printf '%-46s %-24s | %-8s %-2s %-6s %-5s\n' "client flags" name rcode AD RRSIGs EDE
    while IFS='|' read -r what qname qtype opts want; do
        # shellcheck disable=SC2086  # opts: several dig options
        got=$(probe "$1" "$qname" "$qtype" $opts)
        read -ra g <<< "$got"
        read -ra w <<< "$want"
        ok=ok
        for i in 0 1 2; do
            case ${w[$i]} in
                '*') ;;
                +) [ "${g[$i]}" -gt 0 ] 2>/dev/null || ok="not as expected: $want" ;;
                *) [ "${g[$i]}" = "${w[$i]}" ] || ok="not as expected: $want" ;;
            esac
        done
        [ "$ok" = ok ] || bad=1
        printf '%-46s %-24s | %-8s %-2s %-6s %-5s %s\n' "$what" "$qname" "${g[0]}" "${g[1]}" "${g[2]}" "${g[3]}" "$ok"
    done <<'ROWS'
neither DO nor AD: no AD, no RRSIG|www.alg8.example|A|+nodnssec +noadflag|NOERROR 0 0
AD=1 without DO: AD, no RRSIG|www.alg8.example|A|+nodnssec +adflag|NOERROR 1 0
DO: AD and the RRSIGs|www.alg8.example|A|+dnssec|NOERROR 1 +
CD=1 on a bogus name: the data, no AD|mail.nodnskey.example|A|+dnssec +cd|NOERROR 0 *
then the same without CD: SERVFAIL|mail.nodnskey.example|A|+dnssec|SERVFAIL 0 0
a secure name asked first without DO|mail.alg13.example|A|+nodnssec +noadflag|NOERROR 0 0
then with DO: the RRSIGs and AD|mail.alg13.example|A|+dnssec|NOERROR 1 +
ROWS
    return "$bad"
}

# What a verdict means, in the issue's words.
state() { # RCODE AD
    case $1 in
        SERVFAIL) echo bogus ;;
        NOERROR | NXDOMAIN) if [ "$2" = 1 ]; then echo secure; else echo insecure; fi ;;
        *) echo "$1" ;;
    esac
}

cases=$here/cases.tsv
new=$tmp/cases.tsv
failed=0
echo "reference: Unbound $(unbound -V | sed -n "s/^Version //p") (cases.tsv was recorded with 1.17.1)"
printf '%-22s %-28s %-6s | %-8s %-2s %-5s %-8s %5s | %-13s %s\n' case name type rcode AD EDE "CD=1" ms issue ""
while IFS=$'\t' read -r id qname qtype issue rcode ad ede cd note; do
    if [ -z "$id" ] || [ "${id:0:1}" = '#' ]; then
        printf '%s\n' "$id${qname:+	$qname	$qtype	$issue	$rcode	$ad	$ede	$cd	$note}" >> "$new"
        continue
    fi
    read -r got_rcode got_ad got_ede got_ms < <(verdict "$p_val" "$qname" "$qtype")
    read -r cd_rcode _ _ _ < <(verdict "$p_val" "$qname" "$qtype" +cd)
    mark=''
    if [ "$got_rcode $got_ad $got_ede $cd_rcode" != "$rcode $ad $ede $cd" ]; then
        mark="differs from cases.tsv ($rcode $ad $ede $cd)"
        [ "$record" = 1 ] || failed=1
    fi
    # Where Unbound's state is not the issue's, the note says why.
    [ "$(state "$got_rcode" "$got_ad")" = "${issue%%:*}" ] || mark="${mark:+$mark; }unbound: $(state "$got_rcode" "$got_ad")"
    printf '%-22s %-28s %-6s | %-8s %-2s %-5s %-8s %5s | %-13s %s\n' "$id" "$qname" "$qtype" \
        "$got_rcode" "$got_ad" "$got_ede" "$cd_rcode" "$got_ms" "$issue" "$mark"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$qname" "$qtype" "$issue" \
        "$got_rcode" "$got_ad" "$got_ede" "$cd_rcode" "$note" >> "$new"
done < "$cases"
echo
flags "$p_val" || failed=1
echo "reference: $((SECONDS - ready)) s for the cases, $((SECONDS - started)) s in all so far"
if [ "$record" = 1 ]; then
    cp "$new" "$cases"
    echo "recorded Unbound's verdicts into $cases"
fi
if [ "$failed" = 1 ]; then
    echo "Unbound's verdicts differ from cases.tsv or the flags' rows: the zones or the rig changed (val-log-level 2: $tmp/validator.log)"
    keep=1
    exit 1
fi
[ -n "$hydradns" ] || exit 0

# HydraDNS behind the same recursive. time_check 0: signature dates are
# enforced from the start (issue 61), the expired and future cases need it.
mkdir -p "$tmp/hydradns"
cat > "$tmp/hydradns.conf" <<CONF
config hydradns 'main'
	list listen '127.0.0.1:$p_hyd'
	list upstream '127.0.0.1:$p_rec'
	option dnssec '1'
	option trust_anchor_file '$tmp/zones/root.anchor'
	option time_check '0'
	option upstream_timeout '4s'
	option control_socket '$tmp/hydradns/control.sock'
config record
	option name 'nas.lan'
	list ip '192.168.1.10'
config querylog 'querylog'
	option path '$tmp/hydradns/live/queries.db'
	option flash_path '$tmp/hydradns/flash/queries.db'
CONF
checked=$("$hydradns" check-config -c "$tmp/hydradns.conf" 2>&1) || true
if [ "$force" = 0 ] && grep -q "unknown option '\(dnssec\|trust_anchor_file\)'" <<< "$checked"; then
    echo "SKIP: $hydradns does not know option dnssec or trust_anchor_file (issue 61 is not in this build):"
    grep "unknown option" <<< "$checked" | sed 's/^/  /'
    exit 77
fi
user=()
[ "$(id -u)" != 0 ] || user=(--user root)
start "$tmp/hydradns.log" "$hydradns" run "${user[@]}" --log stderr -c "$tmp/hydradns.conf"
for n in $(seq 200); do
    grep -q 'ready with ' "$tmp/hydradns.log" && break
    [ "$n" -lt 200 ] || { echo "hydradns did not start:" >&2; cat "$tmp/hydradns.log" >&2; exit 2; }
    sleep 0.1
done

# A case agrees when HydraDNS's state is the issue's, its rcode Unbound's
# (unless both fail), and, failing, its EDE one the issue names.
echo
echo "hydradns $hydradns:"
printf '%-22s %-28s %-6s | %-8s %-2s %-5s %5s | %-13s %s\n' case name type rcode AD EDE ms issue ""
agree=0 total=0
while IFS=$'\t' read -r id qname qtype issue rcode _ _ _ _; do
    if [ -z "$id" ] || [ "${id:0:1}" = '#' ]; then continue; fi
    read -r h_rcode h_ad h_ede h_ms < <(verdict "$p_hyd" "$qname" "$qtype")
    want=${issue%%:*} codes=${issue#*:}
    [ "$codes" != "$issue" ] || codes=''
    got=$(state "$h_rcode" "$h_ad")
    why=''
    if [ "$got" != "$want" ]; then
        why="state $got, not $want"
    elif [ "$got" != bogus ] && [ "$h_rcode" != "$rcode" ]; then
        why="rcode $h_rcode, Unbound $rcode"
    elif [ "$got" = bogus ] && [ -n "$codes" ] && ! grep -qE "(^|,)(${codes//,/|})(,|$)" <<< "$h_ede"; then
        why="EDE $h_ede, not one of $codes"
    fi
    total=$((total + 1))
    if [ -z "$why" ]; then agree=$((agree + 1)); else failed=1; fi
    printf '%-22s %-28s %-6s | %-8s %-2s %-5s %5s | %-13s %s\n' "$id" "$qname" "$qtype" \
        "$h_rcode" "$h_ad" "$h_ede" "$h_ms" "$issue" "${why:-ok}"
done < "$cases"
echo "hydradns agrees on $agree of $total cases"
echo
flags "$p_hyd" || failed=1
row() { # WHAT OK(0/1)
    printf '%-62s %s\n' "$1" "$([ "$2" = 0 ] && echo ok || echo 'not as issue 61 says')"
    [ "$2" = 0 ] || failed=1
}
# Local records are answered as before validation: no SERVFAIL, no AD.
read -r l_rcode l_ad _ _ < <(probe "$p_hyd" nas.lan A +dnssec)
row "a local record (nas.lan): answered, no AD ($l_rcode, AD $l_ad)" "$([ "$l_rcode $l_ad" = "NOERROR 0" ]; echo $?)"

# The clock (issue 61): a second gateway with time_check 1 and no
# time_synced_file yet gives an answer whose only fault is its dates, and
# its status says signature times wait for the clock; once the file
# exists, within 10 s and without a restart, the same name (cached by
# now) is bogus with EDE 7 and the status line is gone.
mkdir -p "$tmp/clock"
sed -e "s|127.0.0.1:$p_hyd|127.0.0.1:$p_clock|" -e "s|option time_check '0'|option time_check '1'\n\toption time_synced_file '$tmp/clock/synced'|" \
    -e "s|$tmp/hydradns/|$tmp/clock/|" "$tmp/hydradns.conf" > "$tmp/clock.conf"
start "$tmp/clock.log" "$hydradns" run "${user[@]}" --log stderr -c "$tmp/clock.conf"
for n in $(seq 200); do
    grep -q 'ready with ' "$tmp/clock.log" && break
    [ "$n" -lt 200 ] || { echo "hydradns (clock) did not start:" >&2; cat "$tmp/clock.log" >&2; exit 2; }
    sleep 0.1
done
# The status line names the clock and DNSSEC or signatures; paths are cut
# out first, as this directory's own name holds "dnssec" and "clock".
waits() {
    "$hydradns" status -c "$tmp/clock.conf" 2>&1 | sed "s|${tmp}[^ ]*||g" | grep -i 'clock' | grep -qiE 'dnssec|signature'
}
echo
echo "the clock (time_check 1):"
read -r c_rcode _ _ _ < <(probe "$p_clock" www.expired.example A +dnssec)
row "before time_synced_file: www.expired.example answered ($c_rcode)" "$([ "$c_rcode" = NOERROR ]; echo $?)"
row "status says signature times wait for the clock" "$(waits; echo $?)"
# Asked every 0.5 s: "within 10 s" is read as by the first question after
# 10.5 s. Milliseconds from bash's EPOCHREALTIME.
ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }
touch "$tmp/clock/synced"
synced=$(ms) c_rcode='' c_ede='' took=0
while [ "$took" -le 15000 ]; do
    read -r c_rcode _ _ c_ede < <(probe "$p_clock" www.expired.example A +dnssec)
    took=$(($(ms) - synced))
    [ "$c_rcode" != SERVFAIL ] || break
    sleep 0.5
done
row "file made: bogus with EDE 7 within 10 s ($c_rcode $c_ede after $((took / 1000)).$((took % 1000 / 100)) s)" \
    "$([ "$c_rcode" = SERVFAIL ] && [ "$c_ede" = 7 ] && [ "$took" -le 10500 ]; echo $?)"
row "the status line is gone" "$(! waits; echo $?)"
echo "$((SECONDS - started)) s in all"
if [ "$failed" = 1 ]; then keep=1; fi
exit "$failed"
