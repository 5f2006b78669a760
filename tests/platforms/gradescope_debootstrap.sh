#!/usr/bin/env bash
# Staff check, not run by CI: the Gradescope autograder bundle on a real Debian system.
#
# What it checks. It builds the bundle (`python -m grader gradescope`) with a fresh grading
# secret, makes a Debian bookworm root with debootstrap and lays the bundle out in it as
# Gradescope's specification says (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
# the zip extracted into /autograder/source/, its run_autograder copied to /autograder/run_autograder.
# It then runs setup.sh in that root for real (chroot, as root, from /autograder/source: its
# apt-get steps included; pip from a folder of wheels, LAUNCH_TAX_PIP_SOURCE=/wheels) and grades
# four submissions through the real /autograder/run_autograder (chroot, as root, working
# directory /autograder, results in /autograder/results/results.json), each worker as an
# unprivileged user of its own (LAUNCH_TAX_SANDBOX=user: Gradescope's containers cannot make
# namespaces; in a chroot they cannot either, as / is not a mount point):
#   reference   solutions/[a-z]*.py in submission/                  -> every CPU point (79)
#   stubs       exercises/[a-z]*.py in submission/                  -> 0
#   zip         one zip of the reference files, alone in submission/ -> every CPU point
#   repository  launch-tax-main/{exercises/*.py (the reference), coursekit/}
#                                                                    -> every CPU point, and a note
#                                                                       saying where the files were
# For each: the score, official mode, extra_data (isolation "separate user only", the namespace
# protections listed as off, grader/commit/bundle matching the bundle's BUILD.json), and that no
# output in results.json names a path under /autograder/source. It prints setup.sh's wall time
# and each run's score and wall time, and exits non-zero if anything is not as expected.
#
# How to run (from anywhere; the repository's .venv must exist):
#   sudo tests/platforms/gradescope_debootstrap.sh
# Needs: root (debootstrap, chroot, mounts), debootstrap and unzip (apt-get install ...), network to
# Debian's mirror (debootstrap, and setup.sh's apt-get) and to PyPI (pip download of numpy,
# hypothesis and torch's dependencies), about 2 GB free under $GSROOT_WORK.
# Torch's CPU wheel: from a folder holding torch-<version>*.whl (TORCH_WHEELS=DIR; /opt/wheels
# if it has one), else from https://download.pytorch.org/whl/cpu.
# Run it while no other judge grades on this machine (the test suite included): judges that share
# a kernel but not /run share worker uids and kill each other's workers; it refuses to start
# while processes of worker uids (61000-62023) exist.
# Time: about 2 to 4 minutes (debootstrap ~30 s, pip download, setup.sh ~30 s, grading
# runs a few seconds each on two cores); less with a cached base root.
#
# Settings (environment):
#   GSROOT_WORK   where everything goes (default /tmp/gsroot-check); the root is $GSROOT_WORK/root
#   GSROOT_BASE   a cached debootstrap root: used if it exists, else debootstrapped there and kept
#                 (default: a fresh debootstrap into $GSROOT_WORK/base on every run)
#   DEBIAN_MIRROR (default http://deb.debian.org/debian), DEBIAN_SUITE (default bookworm)
#   TORCH_WHEELS  a folder holding torch's CPU wheel for Python 3.11
#   PYTHON        the Python that builds the bundle (default <repo>/.venv/bin/python)
#   KEEP_ROOT=1   leave the root in place afterwards (it is always unmounted)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=${PYTHON:-$repo/.venv/bin/python}
work=${GSROOT_WORK:-/tmp/gsroot-check}
root=$work/root
base=${GSROOT_BASE:-$work/base}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${DEBIAN_SUITE:-bookworm}
chroot_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf '%s\n' "$*"; }
die() { printf 'gradescope_debootstrap: %s\n' "$*" >&2; exit 1; }
now() { printf '%s' "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts): run it with sudo"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
command -v unzip >/dev/null || die "unzip is missing: apt-get install unzip"
[ -x "$py" ] || die "no Python at $py (make the repository's .venv, or set PYTHON)"
case "$work" in /|/tmp|"$repo"|"$repo"/*) die "GSROOT_WORK=$work: choose a folder of its own, outside the repository";; esac

# Worker uids are WORKER_UID_BASE + slot (61000..62023), leased under /run, which the root does not
# share with the host: a judge grading on the host at the same time (the test suite...) would kill
# this root's workers and remove their files (it kills and cleans by uid, walking every
# world-writable folder, this root's /tmp included). Refuse rather than report its damage.
host_workers() { ps -e -o ruid=,euid=,pid=,args= | awk '($1 >= 61000 && $1 < 62024) || ($2 >= 61000 && $2 < 62024)'; }
busy=$(host_workers)
if [ -n "$busy" ]; then
  printf '%s\n' "$busy" | head -5 >&2
  die "processes of worker uids (61000-62023) are running on this machine: another judge is grading (the test suite?); run this when it is done"
fi

mounted_under() { awk -v r="$1" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts; }
unmount_root() {
  local m
  # deepest first; a lazy unmount where a plain one is refused
  for m in $(mounted_under "$root" | sort -r); do umount "$m" 2>/dev/null || umount -l "$m"; done
}
cleanup() {
  unmount_root
  if [ -z "${KEEP_ROOT:-}" ] && [ -z "$(mounted_under "$root")" ]; then
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT

mkdir -p "$work"
chmod 755 "$work"
unmount_root
[ -z "$(mounted_under "$root")" ] || die "something is still mounted under $root; refusing to remove it"
rm -rf --one-file-system "$root"

# --- the bundle --------------------------------------------------------------------------------
secret=$work/grading-secret
bundle=$work/autograder.zip
rm -f "$secret" "$bundle"
(cd "$repo" && "$py" -m grader secret new "$secret" >/dev/null)
(cd "$repo" && "$py" -m grader gradescope "$bundle" --secret-file "$secret" >/dev/null)
cpu_points=$(cd "$repo" && "$py" -c 'from grader.judge import cpu_points; print(f"{cpu_points():g}")')
read -r build_commit build_bundle < <("$py" - "$bundle" <<'EOF'
import json, sys, zipfile
info = json.loads(zipfile.ZipFile(sys.argv[1]).read("grader/BUILD.json"))
print(info.get("commit", "unknown"), info.get("bundle", "none"))
EOF
)
say "bundle: $bundle (commit $build_commit, bundle $build_bundle); every CPU point: $cpu_points"

# --- the Debian root ---------------------------------------------------------------------------
t0=$(now)
if [ ! -x "$base/bin/bash" ] || [ -z "${GSROOT_BASE:-}" ]; then
  [ -z "$(mounted_under "$base")" ] || die "something is mounted under $base"
  rm -rf --one-file-system "$base"
  debootstrap --variant=minbase "$suite" "$base" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed (log: $work/debootstrap.log)"; }
  say "debootstrap $suite: $(elapsed "$t0" "$(now)") s"
else
  say "debootstrap: reusing $base"
fi
cp -a "$base" "$root"

# The bundle, laid out as the specification says.
# (unzip keeps the members' modes: setup.sh and run_autograder stay executable)
mkdir -p "$root/autograder/source"
unzip -q "$bundle" -d "$root/autograder/source"
cp -p "$root/autograder/source/run_autograder" "$root/autograder/run_autograder"
cmp -s "$root/autograder/source/run_autograder" "$root/autograder/run_autograder" \
  || die "run_autograder was not copied to /autograder/run_autograder"
[ -f "$root/autograder/source/setup.sh" ] || die "no setup.sh at the top of the bundle"

# The wheels setup.sh installs (its own pins), and their dependencies, for Python 3.11.
pins=$(grep -o '"[A-Za-z0-9_.-]*==[^"]*"' "$root/autograder/source/setup.sh" | tr -d '"' | tr '\n' ' ')
torch_pin=$(printf '%s\n' $pins | grep '^torch==') || die "setup.sh pins no torch"
say "setup.sh pins: $pins"
torch_version=${torch_pin#torch==}
torch_wheels=${TORCH_WHEELS:-/opt/wheels}
torch_from=(--extra-index-url https://download.pytorch.org/whl/cpu)
if compgen -G "$torch_wheels/torch-$torch_version*cp311*.whl" >/dev/null; then
  torch_from=(--find-links "$torch_wheels")
fi
mkdir -p "$root/wheels"
"$py" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
  --python-version 3.11 --implementation cp --abi cp311 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  "${torch_from[@]}" -d "$root/wheels" $pins >"$work/pip-download.log" 2>&1 \
  || { tail -20 "$work/pip-download.log" >&2; die "pip download failed (log: $work/pip-download.log)"; }
say "wheels: $(ls "$root/wheels" | wc -l) in /wheels"

# What a container has: /sys and /dev (with /dev/pts) here; its own PID and IPC namespaces, /proc
# and /dev/shm for each command (in_root). Its own PID namespace matters: without it the judge in
# the root (kill(-1) as a worker uid, processes killed by uid) would reach the host's processes.
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"

in_root() {  # in_root DIR VAR=VALUE... -- COMMAND...: as root in the chroot, a clean environment
  local dir=$1; shift
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  env -i PATH="$chroot_path" HOME=/root LANG=C.UTF-8 ${vars[@]+"${vars[@]}"} \
    unshare --mount --pid --ipc --uts --fork --kill-child --mount-proc="$root/proc" \
    /bin/sh -c 'mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$0/dev/shm" && exec chroot "$0" "$@"' "$root" \
    /bin/bash -c 'cd "$0" && exec "$@"' "$dir" "$@" </dev/null
}

# --- setup.sh ----------------------------------------------------------------------------------
t0=$(now)
if ! in_root /autograder/source LAUNCH_TAX_PIP_SOURCE=/wheels -- bash ./setup.sh >"$work/setup.log" 2>&1; then
  say "setup.sh FAILED after $(elapsed "$t0" "$(now)") s; its last lines:"
  tail -30 "$work/setup.log"
  die "setup.sh failed (log: $work/setup.log)"
fi
setup_s=$(elapsed "$t0" "$(now)")
say "setup.sh: ok, $setup_s s ($(tail -1 "$work/setup.log"))"

# --- grading -----------------------------------------------------------------------------------
submission=$root/autograder/submission
failed=0
summary=()

grade() {  # grade LABEL EXPECTED_SCORE [NOTE_THAT_MUST_APPEAR]: submission/ is already filled
  local label=$1 expected=$2 note=${3:-} t0 took verdict
  [ -z "$(host_workers)" ] || say "warning: another judge's workers are running on this machine: $label may be disturbed"
  rm -rf "$root/autograder/results"
  t0=$(now)
  in_root /autograder LAUNCH_TAX_SANDBOX=user -- /autograder/run_autograder >"$work/run-$label.log" 2>&1 \
    || { say "run_autograder exited non-zero for $label"; failed=1; }
  took=$(elapsed "$t0" "$(now)")
  verdict=$("$py" - "$root/autograder/results/results.json" "$expected" "$build_commit" "$build_bundle" "$note" <<'EOF'
import json, sys
path, expected, commit, bundle, note = sys.argv[1:]
problems = []
try:
    text = open(path, encoding="utf-8").read()
    data = json.loads(text)
except (OSError, ValueError) as e:
    print(f"FAIL no results.json ({e})\t-")
    sys.exit()
extra = data.get("extra_data", {})
score = float(data.get("score", -1))
if score != float(expected):
    problems.append(f"score {score:g}, expected {float(expected):g}")
if extra.get("mode") != "official":
    problems.append(f"mode {extra.get('mode')!r}")
if extra.get("isolation") != "separate user only":
    problems.append(f"isolation {extra.get('isolation')!r}")
off = extra.get("protections_off", [])
if "separate unprivileged user" in off or not off:
    problems.append(f"protections_off {off!r}")
if extra.get("commit") != commit or extra.get("bundle") != bundle or bundle not in str(extra.get("grader")):
    problems.append(f"grader/commit/bundle {extra.get('grader')!r} {extra.get('commit')!r} "
                    f"{extra.get('bundle')!r}, bundle built as {commit} {bundle}")
outputs = [data.get("output", "")] + [t.get("output", "") for t in data.get("tests", [])]
if any("/autograder/source" in o for o in outputs) or "/autograder/source" in text:
    problems.append("an output names a path under /autograder/source")
if note and not any(note in o for o in outputs):
    problems.append(f"no note naming {note!r}")
detail = (f"{extra.get('mode')}, isolation {extra.get('isolation')}, {len(data.get('tests', []))} "
          f"tests, grader {extra.get('grader')}")
print(("ok  " if not problems else "FAIL " + "; ".join(problems)) + "\t" + f"{score:g}\t" + detail)
EOF
)
  local status=${verdict%%$'\t'*} rest=${verdict#*$'\t'}
  local score=${rest%%$'\t'*} detail=${rest#*$'\t'}
  say "$(printf '%-11s score %-4s (expected %s) %6s s  %s' "$label" "$score" "$expected" "$took" "$status")"
  say "            $detail"
  if [ "${status:0:2}" != "ok" ]; then
    failed=1
    say "            run_autograder's output (log: $work/run-$label.log):"
    tail -25 "$work/run-$label.log" | sed 's/^/              /'
  fi
  summary+=("$label=$score (${took}s)")
}

fill() {  # fill: empty submission/
  rm -rf "$submission"
  mkdir -p "$submission"
}

fill
cp "$repo"/solutions/[a-z]*.py "$submission/"
grade reference "$cpu_points"

fill
cp "$repo"/exercises/[a-z]*.py "$submission/"
grade stubs 0

fill
"$py" - "$submission/submission.zip" "$repo"/solutions/[a-z]*.py <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for path in sys.argv[2:]:
        z.write(path, os.path.basename(path))
EOF
grade zip "$cpu_points"

fill
mkdir -p "$submission/launch-tax-main/exercises"
for stub in "$repo"/exercises/[a-z]*.py; do
  cp "$repo/solutions/$(basename "$stub")" "$submission/launch-tax-main/exercises/"
done
cp "$repo/exercises/__init__.py" "$submission/launch-tax-main/exercises/" 2>/dev/null || true
(cd "$repo" && tar --exclude=__pycache__ -cf - coursekit) | tar -C "$submission/launch-tax-main" -xf -
grade repository "$cpu_points" "launch-tax-main/exercises/"

say "summary: setup.sh ${setup_s}s; ${summary[*]}"
if [ "$failed" -ne 0 ]; then
  die "FAILED: a score or a check was not as expected (logs in $work)"
fi
say "all as expected"
