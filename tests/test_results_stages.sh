#!/usr/bin/env bash
# An experiment run in stages (results/README.md: "stage_replicates") is the experiment run at once:
# a tiny two-arm, three-replicate experiment is run once whole and once a replicate per sitting
# (scripts/results.py run, three times, each importing the bundle kept so far), and every run's
# seed, config and metric points must come out the same, each stage listed in provenance.json, a
# probe answered in the stage that made its replicate, and a fourth sitting refused. Prints PASS/FAIL.
set -u
cd "$(dirname "$0")/.."
ATTNLABD=${ATTNLABD:-build/release/attnlabd}
[ -x "$ATTNLABD" ] || { echo "FAIL results stages: $ATTNLABD is missing (make build)"; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/results-stages.XXXXXX")
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/whole" "$dir/staged"
request() { # stage_replicates (0: none)
  python3 - "$1" <<'EOF'
import json, sys
req = {"server": ["--train-workers", "1", "--compute-threads", "2"],
       "corpora": [{"name": "moby-bytes", "encoding": "bytes", "file": "corpora/small/text.txt"}],
       "experiment": {"name": "stages", "replicates": 3,
                      "base": {"corpus": "moby-bytes", "steps": 24, "n_layer": 1, "n_head": 2, "d_model": 32,
                               "seq_len": 32, "batch": 4, "eval_every": 8, "seed": 7},
                      "variants": [{"name": "rope", "config": {"attention": "rope"}},
                                   {"name": "cosine_rope", "config": {"attention": "cosine_rope"}}]},
       "bundle": {"keys": "loss,val_loss,tau.*", "max_points": 0},
       "probes": [{"kind": "sparse_attention", "variant": "cosine_rope", "replicate": 1,
                   "params": {"window": 0, "windows": 2, "max_tokens": 33, "ks": [1, 4]}}]}
if int(sys.argv[1]):
    req["stage_replicates"] = int(sys.argv[1])
print(json.dumps(req))
EOF
}
request 0 >"$dir/whole/request.json"
request 1 >"$dir/staged/request.json"
run() { python3 scripts/results.py run "$1" --attnlabd "$ATTNLABD" --results-dir "$dir" >>"$dir/log" 2>&1; }
ok=1
run whole || { echo "FAIL results stages: the whole experiment did not run"; ok=0; }
for i in 1 2 3; do
  run staged || { echo "FAIL results stages: sitting $i did not run"; ok=0; }
done
if run staged; then echo "FAIL results stages: a fourth sitting ran although the 3 replicates were in"; ok=0; fi
grep -q "all 3 replicates are in the bundle already" "$dir/log" ||
  { echo "FAIL results stages: the fourth sitting did not say why it stopped"; ok=0; }
[ "$ok" = 1 ] || { tail -n 30 "$dir/log"; exit 0; }
python3 - "$dir" <<'EOF'
import json, os, sys
sys.path.insert(0, "tests/support")
from same_runs import load, same_runs
d = sys.argv[1]
_, s, fails = same_runs(load(d, "whole", "bundle.json.gz"), load(d, "staged", "bundle.json.gz"), 6, {"threads"})
for k, b in sorted(s.items()):
    if b["seed"] != 7 + k[1]:
        fails.append(f"{k}: seed {b['seed']}, want {7 + k[1]}")
    if k[1] < 2 and not (b.get("provenance") or {}).get("imported_from"):
        fails.append(f"{k}: a run of an earlier sitting is not marked imported")
prov = json.load(open(os.path.join(d, "staged", "provenance.json")))
stages = prov.get("stages", [])
if [st["replicates"] for st in stages] != [[0], [1], [2]] or prov["runs"] != 6:
    fails.append(f"provenance: stages {[st.get('replicates') for st in stages]}, runs {prov.get('runs')}")
elif abs(prov["experiment_wall_s"] - sum(st["experiment_wall_s"] for st in stages)) > 0.2:
    fails.append("provenance: the wall time is not the sum of the sittings'")
probes = load(d, "staged", "probes.json.gz")
if len(probes) != 1 or probes[0]["request"].get("replicate") != 1 or "probe" not in probes[0]["answer"]:
    fails.append(f"probes: {[p['request'] for p in probes]}, want the one on replicate 1")
for f in fails:
    print("FAIL results stages:", f)
if not fails:
    print("PASS results stages: 3 sittings of one replicate give the whole experiment's 6 runs point for point")
EOF
