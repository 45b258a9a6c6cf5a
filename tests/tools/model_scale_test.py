#!/usr/bin/env python3
"""`perf/model.py --scale CSV` fits perf/scale's bytes as a + b*P per index format and projects them: on
a fixed CSV whose bytes are exactly linear in P, the fit and the projection must be the formula's
(rank 0 per commit, restart per rank - the index bytes a rank read, where the CSV has them - the time per
commit with the stated hop, ingest and decode rates).

  model_scale_test.py ROOT     ROOT: the source tree (perf/model.py)
"""
import math
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True

HEADER = ("ranks,locals,globals,index_bytes,commit_root_bytes,commit_other_bytes,commit_collectives,commit_ms,"
          "nn_root_bytes,nn_other_bytes,nn_collectives,nn_ms,nm_ranks,nm_root_bytes,nm_other_bytes,nm_collectives,"
          "nm_ms,index_format,catalog_bytes")


def main():
    root = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        csv = os.path.join(d, "scale.csv")
        with open(csv, "w") as f:
            f.write(HEADER + "\n")
            for p in (4, 16, 64):
                f.write(f"{p},100,0,0,{10240 + 10240 * p},0,4,1,0,{2048 * p},6,1,{p // 2},0,0,6,1,1,0\n")
                f.write(f"{p},100,0,0,{8192 + 88 * p},0,6,1,0,{2048 * p},6,1,{p // 2},0,0,6,1,2,0\n")
        out = subprocess.run([sys.executable, os.path.join(root, "perf", "model.py"), "--scale", csv, "--ranks", "1024",
                              "--hop-us", "2", "--ingest-gbps", "10", "--decode-gbps", "1", "--step-s", "1"],
                             capture_output=True, text=True, check=True).stdout
        fails = []

        def want(text):
            if text not in out:
                fails.append(text)

        want("| 1 | 100, 0 | 10.0, 10.000 | 0.0, 2.000 | 4 |")
        want("| 2 | 100, 0 | 8.0, 0.086 | 0.0, 2.000 | 6 |")
        for fmt, a, b, coll in ((1, 10240, 10240, 4), (2, 8192, 88, 6)):
            r0 = a + b * 1024
            t = coll * math.ceil(math.log2(1024)) * 2e-6 + r0 / 10e9 + r0 / 1e9
            want(f"| {fmt} | 100, 0 | 1024 | {r0 / 2**20:.2f} | {t * 1e3:.2f} | {100 * t:.2f} % | 2.00 |")
        # With the index bytes a rank read at restart (perf/scale's nn_index_* columns) the restart fit is
        # theirs: the two-level index's is flat in P (the root and the rank's own sub-index).
        csv2 = os.path.join(d, "scale2.csv")
        with open(csv2, "w") as f:
            f.write(HEADER + ",nn_index_root_bytes,nn_index_other_bytes,nm_index_root_bytes,nm_index_other_bytes\n")
            for p in (4, 16, 64):
                f.write(f"{p},100,0,0,{10240 + 10240 * p},0,4,1,0,{2048 * p},6,1,{p // 2},0,0,6,1,1,0,"
                        f"{2048 * p},{2048 * p},0,0\n")
                f.write(f"{p},100,0,0,{8192 + 88 * p},0,6,1,0,{2048 * p},6,1,{p // 2},0,0,6,1,2,0,19456,19000,0,0\n")
        out2 = subprocess.run([sys.executable, os.path.join(root, "perf", "model.py"), "--scale", csv2, "--ranks",
                               "1024"], capture_output=True, text=True, check=True).stdout
        for text in ("| 1 | 100, 0 | 10.0, 10.000 | 0.0, 2.000 | 4 |", "| 2 | 100, 0 | 8.0, 0.086 | 19.0, 0.000 | 6 |"):
            if text not in out2:
                fails.append(text + " (with the index columns)")
        out += "\n" + out2
        if fails:
            print("model.py --scale printed:\n" + out)
            for f in fails:
                print("missing: " + f)
            return 1
    print("model.py --scale: fits and projections as the formula gives")
    return 0


if __name__ == "__main__":
    sys.exit(main())
