#!/usr/bin/env bash
# Mutation testing of the reference solutions (solutions/*.py) against the public tests, with
# cosmic-ray 8.7.0, one session per module; then the grader on every survivor.
#
#   bash tests/mutation/run.sh [MODULE ...] # default: every CPU module (capture.py is GPU-only: left out)
#
# Run from the repository root; needs its folder tests/mutation/ (forkserver.py, skip_annotations.py,
# grade_survivors.py) beside this script. Environment:
#   PY=path/to/python  a Python with the repo installed (pip install -e ".[dev]") and
#                      cosmic-ray==8.7.0 (default: .venv/bin/python, else python3)
#   OUT=folder         where sessions and reports go (default: mutation-out)
#   LANES=N            parallel lanes (default 2), each in its own scratch copy of the working tree
#                      (cosmic-ray mutates files in place; engine.py imports buckets.py and
#                      dispatch.py, so two lanes never share a tree)
#   GRADE=0            skip the grader pass over the survivors
#
# How a mutant is judged. The mutants are made in a copy of solutions/ named mutant/ and tested
# with `--impl mutant`: the public check tests (test_checks.py) and the grader compare an
# implementation's answers with the reference's, computed from solutions/, so solutions/ itself
# must stay unmutated (mutating it in place would compare each mutant with itself). Each mutant of
# M.py runs that exercise's public tests only, under the 'sweep' hypothesis profile (40 examples,
# derandomized):  pytest exercises --impl mutant -m exN -x -q
# through a fork server (tests/mutation/forkserver.py: torch/pytest/hypothesis imported once per lane,
# one forked pytest session per mutant; ~1 s a mutant instead of ~2.5 s).
#
# Mutants left out (marked SKIPPED in the session, counted in summary.txt):
#   * cosmic-ray's replacements of an arithmetic operator by a bitwise or shift one
#     (core/ReplaceBinaryOperator_*_{BitAnd,BitOr,BitXor,LShift,RShift}): one third of all mutants,
#     a TypeError on any float; the other replacements of the same operator stay;
#   * mutants inside type annotations (never evaluated: `from __future__ import annotations`);
#   * GPU-only blocks (line filter): launch_tax.py's CUDA-event branch of time_ms and
#     measure_launch_tax after its no-CUDA check; fusion.py's torch.compile branch and
#     count_kernels after its no-CUDA check. GPU-only expressions elsewhere are triaged by hand.
#
# Then the grader on every survivor (tests/mutation/grade_survivors.py): a folder per survivor = copy of
# solutions/ with the mutant re-applied, all of a module's folders graded in one
# `python -m grader grade-all DIR --practice --jobs 1 --only exN` (= `grade FOLDER --only exN --json`
# per folder, the reference's answers computed once); a test scoring less than the unmutated copy =
# the grader catches it. Official mode for chosen survivors: GRADER_SECRET=secret-file
# ONLY_JOBS=file-of-job-ids python tests/mutation/grade_survivors.py $OUT.
#
# Outputs in $OUT per module M: M.toml, M.sqlite (session), M.log, M.report.txt (cr-report of the
# survivors with diffs), M.dump.jsonl (every mutant and its outcome), M.grader.jsonl and
# M.grader.gradebook.csv (the grader on the survivors); summary.txt. The survivors of the last
# run are triaged by hand in tests/mutation/triage.md: each a gap (closed by a public test, a check
# and a corpus mutant) or an equivalent mutant, with the reason.
#
# LINES below are line ranges of launch_tax.py and fusion.py (their CPU parts): check them against
# solutions/ before a run, they move when the reference changes.
set -euo pipefail

ROOT=$(pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ -f coursekit/course.py && -d solutions ]] || { echo "run from the repository root" >&2; exit 2; }
[[ -f $HERE/forkserver.py ]] || { echo "missing $HERE/forkserver.py" >&2; exit 2; }
PY=${PY:-$( [[ -x .venv/bin/python ]] && echo "$ROOT/.venv/bin/python" || command -v python3 )}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
BIN=$(dirname "$PY")
OUT=$(mkdir -p "${OUT:-mutation-out}" && cd "${OUT:-mutation-out}" && pwd)
LANES=${LANES:-2}
"$PY" -c "import cosmic_ray" 2>/dev/null || { echo "$PY has no cosmic-ray: pip install cosmic-ray==8.7.0" >&2; exit 2; }

marker() { "$PY" -c "from coursekit.course import MARKERS; print(MARKERS['$1'])"; }  # coursekit/course.py
# Lines to mutate (cosmic-ray's line filter); a module not listed is mutated whole.
declare -A LINES=(
  [launch_tax]='["13-18", "28-41", "62-73"]'   # checks, CPU timer, no-CUDA error, sweep's check
  [fusion]='["1-40", "46-52"]'                  # chain_hbm_bytes, checks, CPU path, no-CUDA error
)
MODULES=("$@")
[[ ${#MODULES[@]} -gt 0 ]] || MODULES=(launch_model engine dispatch buckets fusion launch_tax static_runner)

run_module() {  # run_module MODULE TREE SOCKET
  local m=$1 tree=$2 sock=$3 ex
  ex=$(marker "$1")
  local cfg="$OUT/$m.toml" db="$OUT/$m.sqlite"
  cat > "$cfg" <<EOF
[cosmic-ray]
module-path = "mutant/$m.py"
timeout = 120.0
excluded-modules = []
test-command = "env HYPOTHESIS_PROFILE=sweep $PY $HERE/forkserver.py run $sock exercises --impl mutant -m $ex -x -q -p no:cacheprovider"

[cosmic-ray.distributor]
name = "local"

[cosmic-ray.filters.operators-filter]
exclude-operators = ["core/ReplaceBinaryOperator_\\\\w+_(BitAnd|BitOr|BitXor|LShift|RShift)\$"]
EOF
  if [[ -n "${LINES[$m]:-}" ]]; then
    printf '\n[cosmic-ray.filters.line-filter]\nlines = { "mutant/%s.py" = %s }\n' "$m" "${LINES[$m]}" >> "$cfg"
  fi
  rm -f "$db"
  (
    cd "$tree"
    local t0=$SECONDS
    "$BIN/cosmic-ray" init "$cfg" "$db"
    "$BIN/cr-filter-operators" "$db" "$cfg"
    "$PY" "$HERE/skip_annotations.py" "$db"
    [[ -z "${LINES[$m]:-}" ]] || "$BIN/cr-filter-lines" --config "$cfg" "$db"
    "$BIN/cosmic-ray" baseline "$cfg"
    "$BIN/cosmic-ray" exec "$cfg" "$db"
    echo "wall_s=$((SECONDS - t0))"
    cmp -s "mutant/$m.py" "solutions/$m.py" || { echo "mutant/$m.py not restored" >&2; exit 1; }
  ) > "$OUT/$m.log" 2>&1
  "$BIN/cr-report" --show-diff --surviving-only "$db" > "$OUT/$m.report.txt" 2>&1
  "$BIN/cosmic-ray" dump "$db" > "$OUT/$m.dump.jsonl"
  echo "$m ($ex) done: $(grep wall_s "$OUT/$m.log")"
}

declare -a TREES PIDS
cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n $p ]] && kill "$p" 2>/dev/null || true; done
  for t in "${TREES[@]:-}"; do [[ -n $t ]] && rm -rf "$t"; done
}
trap cleanup EXIT
for ((i = 0; i < LANES; i++)); do
  TREES[i]=$(mktemp -d "${TMPDIR:-/tmp}/launch-tax-mut.XXXXXX")
  # tracked and untracked-not-ignored files, without $OUT
  git ls-files -co --exclude-standard -z | grep -zv "^$(basename "$OUT")/" | tar --null -T - -cf - | tar -xf - -C "${TREES[i]}"
  cp -r "${TREES[i]}/solutions" "${TREES[i]}/mutant"
  # one fork server per lane, started in the lane's tree (it checks that coursekit resolves there)
  (cd "${TREES[i]}" && exec "$PY" "$HERE/forkserver.py" serve "${TREES[i]}/.forkserver.sock") \
    > "$OUT/forkserver.$i.log" 2>&1 &
  PIDS[i]=$!
done
for ((i = 0; i < LANES; i++)); do
  for _ in $(seq 120); do [[ -S ${TREES[i]}/.forkserver.sock ]] && break; sleep 1; done
  [[ -S ${TREES[i]}/.forkserver.sock ]] || { cat "$OUT/forkserver.$i.log"; exit 1; }
done

T0=$SECONDS
declare -a LANEPIDS
for ((i = 0; i < LANES; i++)); do
  (
    for ((j = i; j < ${#MODULES[@]}; j += LANES)); do
      run_module "${MODULES[j]}" "${TREES[i]}" "${TREES[i]}/.forkserver.sock"
    done
  ) &
  LANEPIDS[i]=$!
done
for p in "${LANEPIDS[@]}"; do wait "$p"; done
MUT_WALL=$((SECONDS - T0))

if [[ ${GRADE:-1} != 0 ]]; then
  "$PY" "$HERE/grade_survivors.py" "$OUT" "${MODULES[@]}" > "$OUT/grader.txt" 2>&1
fi
"$PY" "$HERE/summary.py" "$OUT" "$MUT_WALL" "${MODULES[@]}" | tee "$OUT/summary.txt"
