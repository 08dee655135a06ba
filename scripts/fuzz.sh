#!/usr/bin/env bash
# Runs every fuzz target of the module, one at a time, each for a set time.
#
#   scripts/fuzz.sh            # 30s per target
#   scripts/fuzz.sh 2m         # or FUZZTIME=2m scripts/fuzz.sh (the argument wins)
#
# Targets are discovered with `go test -list`, so a new Fuzz* function is
# picked up without editing this file. A failing input that Go finds is
# written to <package>/testdata/fuzz/<Target>/ (Go's default) and stays
# there: from then on it is a seed that plain `go test` runs, so commit it
# with the fix. Exits non-zero if any target failed.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime="${1:-${FUZZTIME:-30s}}"

echo "== discovering fuzz targets"
# -short: the integration package's TestMain builds and checks a Caddy
# binary unless -short; it holds no fuzz targets, so listing skips that.
if ! listing=$(go test -short -run '^$' -list '^Fuzz' ./... 2>&1); then
	echo "$listing"
	echo "fuzz.sh: listing the fuzz targets failed" >&2
	exit 1
fi

# The listing prints a package's target names, then "ok  <package>  <time>".
targets=()
names=()
while IFS= read -r line; do
	case "$line" in
	Fuzz*) names+=("$line") ;;
	ok*)
		pkg=$(awk '{print $2}' <<<"$line")
		for n in "${names[@]+"${names[@]}"}"; do targets+=("$pkg $n"); done
		names=()
		;;
	esac
done <<<"$listing"

if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi
echo "${#targets[@]} targets, $fuzztime each"

# Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" at the end of -fuzztime, writing no failing input
# (go.dev/issue/75804, fixed in Go 1.27). A real finding always writes one
# (a hang too: "fuzzing process hung"), so a run that ends that way with no
# new file under testdata/fuzz/<Target> is retried, twice at most. Three in
# a row is no longer luck (a starved machine, a target that stalls its
# workers), so it fails.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
corpus_files() { if [ -d "$1" ]; then find "$1" -type f | sort; fi; }

failed=()
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	dir="$(go list -f '{{.Dir}}' "$pkg")/testdata/fuzz/$name"
	for try in 1 2 3; do
		label=""
		if [ "$try" -gt 1 ]; then label=" (retry $((try - 1)), after the coordinator's deadline race)"; fi
		echo "== $pkg $name$label"
		before=$(corpus_files "$dir")
		if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg" 2>&1 | tee "$log"; then
			break
		fi
		if [ "$(corpus_files "$dir")" != "$before" ] || ! grep -q 'context deadline exceeded' "$log"; then
			failed+=("$pkg $name")
			break
		fi
		if [ "$try" -eq 3 ]; then
			failed+=("$pkg $name (three deadline races, no failing input written)")
		fi
	done
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "== FAILED (the failing inputs are under each package's testdata/fuzz/):"
	printf '  %s\n' "${failed[@]}"
	exit 1
fi
echo "== all ${#targets[@]} fuzz targets passed"
