#!/usr/bin/env bash
# What security costs: peer_bench's producer-1, tail-1 and batch-cycle-8 against a
# plaintext conduit-standalone and a secured one (mTLS + a static bearer token + an ACL file), in
# one run; prints one table: workload, plaintext rate, secure rate, overhead (target <= 15%).
#
#   scripts/bench-security.sh [--seconds=3] [--reps=3] [--durability=interval]
#                             [--secure=tls,token,acl] [--workloads=producer-1,tail-1,batch-cycle-8]
#   (make bench-security; binaries from $CONDUIT_BIN_DIR, default build/bin)
#
# Both servers run side by side on 127.0.0.1 (port 0, --port-file) with temporary data dirs and
# the options bench-peers.sh gives conduit-standalone; the secured one adds only what --secure
# names: `tls` --tls-cert/--tls-key/--tls-client-ca --tls-client-auth=require (certificates of
# scripts/make-certs.sh; peer_bench presents worker.pem), `token` --auth-token-file (one token,
# User:bench; peer_bench --token-file), `acl` --acl-file: exactly the grants the three workloads
# need, prefixed, for the caller's principal (User:bench with a token, else the certificate's,
# else User:ANONYMOUS; never a superuser, who would skip the scan), after 50 entries for other
# principals. --secure=tls, =token or =acl alone splits the overhead between them; --secure=none
# (the second server as plain as the first) shows what the method itself reports as "overhead".
#
# Each workload is measured --reps times on each server, strictly alternating (plaintext, secured,
# plaintext, ...) so that drift hits both sides alike and every run follows one on the other
# server: a run right after one on the same server was faster here (tail-1 by 10-40%), so
# swapping the order per round (ABBA) would favour whichever side comes first more often. The
# table shows the medians. tail-1 reads what producer-1 wrote before it on the same server
# (from offset 0 until caught up); without producer-1 ahead of it, one unmeasured producer-1
# fills both.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${CONDUIT_BIN_DIR:-build/bin}
SECONDS_PER=3
REPS=3
DURABILITY=interval
SECURE=tls,token,acl
WORKLOADS=producer-1,tail-1,batch-cycle-8
for arg in "$@"; do
  case "$arg" in
    --seconds=*) SECONDS_PER=${arg#*=} ;;
    --reps=*) REPS=${arg#*=} ;;
    --durability=*) DURABILITY=${arg#*=} ;;
    --secure=*) SECURE=${arg#*=} ;;
    --workloads=*) WORKLOADS=${arg#*=} ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-security.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
has() { [[ ",$SECURE," == *",$1,"* ]]; }
for part in ${SECURE//,/ }; do
  case "$part" in
    tls|token|acl|none) ;;
    *) echo "bench-security.sh: --secure takes tls,token,acl or none" >&2; exit 2 ;;
  esac
done
[ -x "$BIN/peer_bench" ] && [ -x "$BIN/conduit-standalone" ] || {
  echo "build first: cmake --build build --target peer_bench conduit-standalone" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/conduit-security.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# TLS material, the token (the token file holds its SHA-256 only), and the ACL file.
scripts/make-certs.sh "$work/certs" >/dev/null
certs=$work/certs
(umask 077; openssl rand -hex 32 >"$work/bench.token")
{
  echo "$(tr -d '\n' <"$work/bench.token" | sha256sum | cut -d' ' -f1) User:bench"
  for i in 1 2 3; do
    echo "$(openssl rand -hex 32 | tr -d '\n' | sha256sum | cut -d' ' -f1) User:svc-$i"
  done
} >"$work/tokens"
principal=User:ANONYMOUS
has tls && principal=User:spiffe://conduit.dev/worker  # worker.pem's URI SAN
has token && principal=User:bench
{
  echo "# 50 entries for other principals, scanned on every check"
  for i in $(seq -w 1 50); do
    case $((10#$i % 5)) in
      0) echo "allow User:team-$i topic prefixed team-$i. Write,Read" ;;
      1) echo "allow User:team-$i queue prefixed jobs-$i. Read,Write" ;;
      2) echo "allow User:team-$i group prefixed team-$i. Read" ;;
      3) echo "deny User:team-$i topic literal audit-$i Write" ;;
      4) echo "allow User:svc-$i topic literal orders-$i Read,Describe" ;;
    esac
  done
  echo "# what peer_bench's producer-1, tail-1 and batch-cycle-8 need: CreateTopic, Produce, Tail"
  echo "# with record values; InitProducer (the idempotent Producer); CreateQueue, Enqueue,"
  echo "# Lease and AckBatch, DeleteQueue"
  echo "allow $principal topic prefixed peer- Create,Write,Read,ViewPayload"
  echo "allow $principal cluster literal conduit Write"
  echo "allow $principal queue prefixed peer-q Create,Write,Read,Delete"
} >"$work/acls"

common=(--listen=127.0.0.1:0 --metrics-listen= --log-level=warn)
secure_server=() secure_client=()
if has tls; then
  secure_server+=(--tls-cert="$certs/server.pem" --tls-key="$certs/server.key"
                  --tls-client-ca="$certs/ca.pem" --tls-client-auth=require)
  secure_client+=(--tls-ca="$certs/ca.pem" --tls-cert="$certs/worker.pem"
                  --tls-key="$certs/worker.key")
fi
if has token; then
  secure_server+=(--auth-token-file="$work/tokens")
  secure_client+=(--token-file="$work/bench.token")
fi
has acl && secure_server+=(--acl-file="$work/acls")

# start NAME [extra server flags...]: sets $port (not in a subshell: $pids must keep the pid).
start() {
  local name=$1; shift
  local dir="$work/$name"; mkdir -p "$dir/data"
  "$BIN/conduit-standalone" --data-dir="$dir/data" --port-file="$dir/port" "${common[@]}" "$@" \
    >"$dir/log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
  [ -s "$dir/port" ] || {
    echo "conduit-standalone ($name) did not start:" >&2; cat "$dir/log" >&2; exit 1; }
  port=$(cat "$dir/port")
}
start plaintext; plain_port=$port
start secure "${secure_server[@]}"; secure_port=$port
echo "plaintext server 127.0.0.1:$plain_port, secure server 127.0.0.1:$secure_port ($SECURE;" \
  "principal $principal)" >&2

# measure SIDE WORKLOAD: one peer_bench run; prints ops/s; fails on an error or a missing line.
measure() {
  local side=$1 workload=$2 port client=()
  port=$plain_port
  [ "$side" = secure ] && { port=$secure_port; client=("${secure_client[@]}"); }
  local out
  out=$("$BIN/peer_bench" --system=conduit --port="$port" --seconds="$SECONDS_PER" \
    --durability="$DURABILITY" --only="$workload" "${client[@]}" 2>"$work/peer_bench.err") || {
    echo "peer_bench ($side, $workload) failed:" >&2; cat "$work/peer_bench.err" >&2; exit 1; }
  local line
  line=$(awk -F'\t' -v w="$workload" '$1 == "RESULT" && $2 == w' <<<"$out")
  if [ -z "$line" ] || [ "$(cut -f6 <<<"$line")" != 0 ]; then
    echo "peer_bench ($side, $workload): ${line:-no RESULT line}" >&2
    cat "$work/peer_bench.err" >&2
    exit 1
  fi
  cut -f3 <<<"$line"
}

results=$work/results.tsv   # workload, side, round, ops/s
: >"$results"
produced=0
for workload in ${WORKLOADS//,/ }; do
  if [ "$workload" = tail-1 ] && [ "$produced" = 0 ]; then
    echo "== producer-1 (unmeasured: records for tail-1)" >&2
    measure plaintext producer-1 >/dev/null; measure secure producer-1 >/dev/null
  fi
  [ "$workload" = producer-1 ] && produced=1
  for round in $(seq "$REPS"); do
    for side in plaintext secure; do
      rate=$(measure "$side" "$workload")
      echo "== $workload round $round $side: $rate/s" >&2
      printf '%s\t%s\t%s\t%s\n' "$workload" "$side" "$round" "$rate" >>"$results"
    done
  done
done

python3 - "$results" "$SECONDS_PER" "$REPS" "$DURABILITY" "$SECURE" <<'EOF'
import statistics, sys
path, seconds, reps, durability, secure = sys.argv[1:]
rates = {}
for line in open(path):
    workload, side, _, rate = line.rstrip("\n").split("\t")
    rates.setdefault(workload, {}).setdefault(side, []).append(float(rate))
print(f"conduit-standalone, plaintext vs {secure.replace(',', ' + ')}: peer_bench {seconds} s per "
      f"run, median of {reps} interleaved runs each, --durability={durability}")
print(f"{'workload':<15} {'plaintext ops/s':>16} {'secure ops/s':>14} {'overhead':>9}  "
      "target <= 15%")
for workload, sides in rates.items():
    plain = statistics.median(sides["plaintext"])
    secure_rate = statistics.median(sides["secure"])
    overhead = (plain - secure_rate) / plain * 100
    verdict = "met" if overhead <= 15 else "NOT met"
    print(f"{workload:<15} {plain:>16,.0f} {secure_rate:>14,.0f} {overhead:>8.1f}%  {verdict}")
EOF
