#!/usr/bin/env bash
# Seed corpus for the fuzz targets from real checkpoints: every index and the 64-byte header of
# every data file under <checkpoint root>, every series step log, plus fuzz/corpus/options/*.yaml and
# fuzz/corpus/step_log/* (inputs that found defects) and fuzz/corpus/index{,_v2}/* (incremental forms).
# fuzz_index_v2 gets the same indexes (version 1: it splits them into version-2 objects itself).
#   fuzz/make_corpus.sh build/test-tmp build-fuzz/corpus
set -euo pipefail
src=${1:?checkpoint root} out=${2:?output dir}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/index" "$out/index_v2" "$out/data_header" "$out/options" "$out/step_log"
n=0
while IFS= read -r -d '' f; do
  n=$((n + 1)); cp "$f" "$out/index/index.$n"; cp "$f" "$out/index_v2/index.$n"
  for d in "$(dirname "$f")"/*; do
    # Regular files only: the adversarial tests leave FIFOs named data.N and index (opening one blocks).
    [[ -f $d && ! -L $d ]] || continue
    case "$(basename "$d")" in index) ;; *) head -c 64 "$d" > "$out/data_header/$(basename "$d").$n" ;; esac
  done
done < <(find "$src" -name index -type f -size -1000k -print0 2>/dev/null | head -z -n 200)
m=0
while IFS= read -r -d '' f; do
  m=$((m + 1)); cp "$f" "$out/step_log/steps.$m"
done < <(find "$src" -path '*/series.*' -name steps -type f -size -1000k -print0 2>/dev/null | head -z -n 100)
cp "$here"/corpus/options/*.yaml "$out/options/"
cp "$here"/corpus/step_log/* "$out/step_log/"  # inputs that found defects, kept as seeds
# Incremental references, which no test checkpoint on disk holds in these forms: an index in the transfer
# encoding (pieces and REFs, as ranks send it) and sub-index bodies with pieces (fuzz_index_v2 mode 2).
cp "$here"/corpus/index/* "$out/index/"
cp "$here"/corpus/index_v2/* "$out/index_v2/"
echo "seed corpus: $(ls "$out/index" | wc -l) indexes, $(ls "$out/data_header" | wc -l) data headers, $(ls "$out/step_log" | wc -l) step logs, $(ls "$out/options" | wc -l) option files in $out"
