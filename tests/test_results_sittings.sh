#!/usr/bin/env bash
# An experiment run in sittings (results/README.md, "Sittings": scripts/results.py run NAME
# --minutes M, again and again on a kept data directory) is the experiment run at once: a tiny
# two-arm, two-replicate experiment is run once whole and once in sittings of no minutes (each ends
# as soon as a run has trained a step in it, cancelling what still trains: its checkpoint is kept),
# and every run's seed, config and metric points must come out the same, with more than one sitting,
# a run left mid-way by one sitting and continued by the next, every sitting in provenance.json
# (wall times summed), the probe answered, the kept directory removed at the end; mid-way, a request
# changed in what it trains or a server on another kernel path refused, a request changed in what
# is read after training (its probe) taken, and `status` telling where it stands. Prints PASS/FAIL.
set -u
cd "$(dirname "$0")/.."
ATTNLABD=${ATTNLABD:-build/release/attnlabd}
[ -x "$ATTNLABD" ] || { echo "FAIL results sittings: $ATTNLABD is missing (make build)"; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/results-sittings.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
mkdir -p "$dir/whole" "$dir/sat"
request() { # [eval_every] [the probe's largest k]
  python3 - "${1:-50}" "${2:-4}" <<'EOF'
import json, sys
print(json.dumps({
    "server": ["--train-workers", "1", "--compute-threads", "1"],
    "corpora": [{"name": "moby-bytes", "encoding": "bytes", "file": "corpora/small/text.txt"}],
    "experiment": {"name": "sittings", "replicates": 2,
                   "base": {"corpus": "moby-bytes", "steps": 400, "n_layer": 1, "n_head": 2, "d_model": 32,
                            "seq_len": 32, "batch": 4, "eval_every": int(sys.argv[1]), "seed": 11},
                   "variants": [{"name": "rope", "config": {"attention": "rope"}},
                                {"name": "cosine_rope", "config": {"attention": "cosine_rope"}}]},
    "bundle": {"keys": "loss,val_loss,tau.*", "max_points": 0},
    "probes": [{"kind": "sparse_attention", "variant": "cosine_rope", "replicate": 1,
                "params": {"window": 0, "windows": 2, "max_tokens": 33, "ks": [1, int(sys.argv[2])]}}]}))
EOF
}
request >"$dir/whole/request.json"
request >"$dir/sat/request.json"
run() { python3 scripts/results.py run "$@" --attnlabd "$ATTNLABD" --results-dir "$dir" >>"$dir/log" 2>&1; }
ok=1
run whole || { echo "FAIL results sittings: the whole experiment did not run"; ok=0; }
n=0
until [ -f "$dir/sat/bundle.json.gz" ] || [ "$ok" = 0 ]; do
  n=$((n + 1))
  [ "$n" -le 1000 ] || { echo "FAIL results sittings: 1000 sittings and still not done"; ok=0; break; }
  run sat --minutes 0 --work-dir "$dir/work" || { echo "FAIL results sittings: sitting $n failed"; ok=0; }
  if [ "$n" = 1 ] && [ "$ok" = 1 ] && [ -d "$dir/work" ]; then
    # `status` tells where it stands: one sitting, the 4 x 400 steps planned
    st=$(python3 scripts/results.py status sat --results-dir "$dir" --work-dir "$dir/work" 2>&1)
    case "$st" in
      "sat: 1 sitting, "*" of 1,600 steps, "*" of 4 runs ended"*) ;;
      *) echo "FAIL results sittings: status after one sitting says: $st"; ok=0 ;;
    esac
    # mid-way, a changed request is refused
    request 25 >"$dir/sat/request.json"
    if run sat --minutes 0 --work-dir "$dir/work"; then
      echo "FAIL results sittings: a sitting ran with a request changed since the first"
      ok=0
    fi
    grep -q "request.json changed since the first sitting" "$dir/log" ||
      { echo "FAIL results sittings: the changed request was not named"; ok=0; }
    # but what is read only after training (here the probes) may change: the last sitting uses it
    request 50 2 >"$dir/sat/request.json"
    # and a server on another kernel path is refused than the first sitting's (not bit-identical)
    alt=$(python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["sittings"][0]["kernel"]["path"]
print("fp32" if p == "bf16_portable" else "bf16_portable")' "$dir/work/sittings.json")
    if ATTNLAB_KERNEL_PATH=$alt run sat --minutes 0 --work-dir "$dir/work"; then
      echo "FAIL results sittings: a sitting ran on kernel path $alt, not the first sitting's"
      ok=0
    fi
    grep -q "this server's is $alt" "$dir/log" || { echo "FAIL results sittings: the other kernel path was not named"; ok=0; }
  fi
done
[ ! -e "$dir/work" ] || { echo "FAIL results sittings: the kept directory is still there at the end"; ok=0; }
[ "$ok" = 1 ] || { tail -n 30 "$dir/log"; exit 0; }
python3 - "$dir" <<'EOF'
import json, os, sys
sys.path.insert(0, "tests/support")
from same_runs import load, same_runs
d = sys.argv[1]
_, _, fails = same_runs(load(d, "whole", "bundle.json.gz"), load(d, "sat", "bundle.json.gz"), 4)
prov = json.load(open(os.path.join(d, "sat", "provenance.json")))
sits = prov.get("sittings", [])
mid = [st["left_at"] for st in sits if st.get("left_at")]
if len(sits) < 2:
    fails.append(f"{len(sits)} sitting(s): the experiment was not split")
elif not any(0 < step < 400 for m in mid for step in m.values()):
    fails.append("no sitting left a run mid-way to be continued by the next")
if prov.get("runs") != 4 or abs(prov["experiment_wall_s"] - sum(st["experiment_wall_s"] for st in sits)) > 0.2:
    fails.append(f"provenance: runs {prov.get('runs')}, wall {prov.get('experiment_wall_s')} for {len(sits)} sittings")
top = {k: prov.get(k) for k in ("date", "cpu", "kernel", "load_before")}
if sits and (top != {k: sits[0].get(k) for k in top} or prov.get("load_after") != sits[-1].get("load_after")
             or not prov.get("commit") or {"steps", "runs_ended", "left_at"} & set(prov)):
    fails.append(f"provenance: {sorted(prov)} at the top, not the first sitting's record with the last one's load")
if sum(st["steps"] for st in sits) < 1600:
    fails.append(f"the sittings trained {sum(st['steps'] for st in sits)} steps in all, not 4 x 400")
probes = load(d, "sat", "probes.json.gz")
if len(probes) != 1 or "probe" not in probes[0]["answer"] or probes[0]["request"]["params"]["ks"] != [1, 2]:
    fails.append(f"probes: {[p['request'] for p in probes]}, want the request changed after the first sitting")
for f in fails:
    print("FAIL results sittings:", f)
if not fails:
    print(f"PASS results sittings: {len(sits)} sittings ({len(mid)} left a run mid-way) give the whole"
          " experiment's 4 runs point for point")
EOF
