#!/usr/bin/env bash
# The wheel as users get it: build it, install it (not editable, dependencies from the
# package index) into a fresh venv, and run .ci/wheel_smoke.py from outside the checkout,
# so only the installed package can be imported.
#
#   .ci/wheel_smoke.sh            # uses python3 (or $PYTHON) to build and to make the venv
#   KEEP=1 .ci/wheel_smoke.sh     # keep the temporary folder (its path is printed)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/learnopt-wheel.XXXXXX")"
if [[ -z "${KEEP:-}" ]]; then trap 'rm -rf "$work"' EXIT; else echo "wheel_smoke: keeping $work"; fi
start=$SECONDS

# Build from a copy of the tracked (and new, not ignored) files: an in-tree build would
# leave build/ and *.egg-info in the checkout, and a stale build/lib can leak removed
# files into the wheel.
src="$work/src"
mkdir -p "$src"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$root" && git ls-files -z --cached --others --exclude-standard \
    | xargs -0 -I{} sh -c 'test -e "$1" && printf "%s\0" "$1"' _ {} \
    | tar --null -T - -cf -) | tar -xf - -C "$src"
else
  tar -C "$root" --exclude=.venv --exclude=build --exclude=dist --exclude='*.egg-info' -cf - . \
    | tar -xf - -C "$src"
fi
"$python" -m pip wheel --no-deps -q -w "$work/dist" "$src"
wheels=("$work"/dist/learnopt-*.whl)
[[ ${#wheels[@]} -eq 1 && -f "${wheels[0]}" ]] || { echo "wheel_smoke: no single wheel in $work/dist" >&2; exit 1; }
echo "wheel_smoke: built $(basename "${wheels[0]}") ($((SECONDS - start)) s)"

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "${wheels[0]}"
echo "wheel_smoke: installed into a fresh venv ($((SECONDS - start)) s)"

# -I: neither the current folder, the script's folder nor PYTHONPATH is on sys.path.
cd "$work"
"$work/venv/bin/python" -I "$root/.ci/wheel_smoke.py" --source "$root" --script "$work/venv/bin/learnopt"
echo "wheel_smoke: passed ($((SECONDS - start)) s)"
