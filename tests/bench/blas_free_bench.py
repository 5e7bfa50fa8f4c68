"""blas_free_bench.py -- a training epoch on the engine's own products (make BLAS=none) against
the same engine on OpenBLAS, one machine, one run.

Each pair is two builds of build/tests/bench/tool_train_csv that differ only in BLAS: the
default (OpenBLAS) and BLAS=none (engine/gemm.c). Both train the 10,000 AG News titles
($ATTNEXT_DATA) for --epochs epochs with one thread, under the lesson's recipe and the default
one, alternating (the order swapped every round, so neither always runs first), --rounds times;
the figure is the best round's mean CPU seconds per epoch (training and validation, no
preparation; with one thread, CPU time is what the products cost, and another process on the
machine moves it less than wall time). A third field of a pair, an OpenBLAS core type
(OPENBLAS_CORETYPE), makes OpenBLAS run the kernels it would pick on that CPU: Haswell for an
AVX2 machine, where the x86-64-v3 build runs.

    /usr/bin/python3 tests/bench/blas_free_bench.py \\
        --pair x86-64-v4=build/tests/bench/tool_train_csv,build/blas-none/tests/bench/tool_train_csv \
        --pair x86-64-v3=build/bench-v3/tests/bench/tool_train_csv,build/bench-v3-none/tests/bench/tool_train_csv,Haswell

Build a pair at one CPU level with, e.g. for AVX2:
    make BUILD=build/bench-v3 ARCH=-march=x86-64-v3 CPU_LEVELS= CPU_DEFS= \\
        build/bench-v3/tests/bench/tool_train_csv   (and the same with BLAS=none)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

RECIPES = (("lesson", {"recipe": "lesson"}), ("default", {}))


def epoch_seconds(tool, train, test, options, coretype):
    env = dict(os.environ)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    out = subprocess.run([tool, train, test, json.dumps(options)], capture_output=True,
                         text=True, check=True, env=env).stdout
    secs = [json.loads(line)["cpu_seconds"] for line in out.splitlines() if '"epoch"' in line]
    return sum(secs) / len(secs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pair", action="append", required=True,
                    help="NAME=OPENBLAS_TOOL,BLAS_NONE_TOOL[,OPENBLAS_CORETYPE] (several allowed)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    data = os.environ.get("ATTNEXT_DATA", "data/ag_news")
    train = os.path.join(data, "ag_news_train_10k.csv")
    if not os.path.exists(train):
        sys.exit("%s not found (set ATTNEXT_DATA)" % train)
    with tempfile.TemporaryDirectory() as tmp:
        test = os.path.join(tmp, "test.csv")
        with open(os.path.join(data, "ag_news_test.csv")) as f, open(test, "w") as o:
            for i, line in enumerate(f):
                if i > 500:
                    break
                o.write(line)
        results = []
        print("%-10s %-8s %12s %12s %7s" % ("level", "recipe", "OpenBLAS", "BLAS=none", "ratio"))
        for pair in args.pair:
            name, tools = pair.split("=", 1)
            blas, none, *core = tools.split(",")
            coretype = core[0] if core else None
            for recipe, opts in RECIPES:
                options = dict(opts, epochs=args.epochs, threads=1)
                best = {"openblas": float("inf"), "none": float("inf")}
                for r in range(args.rounds):
                    order = (("openblas", blas), ("none", none))
                    for kind, tool in (order if r % 2 == 0 else order[::-1]):
                        best[kind] = min(best[kind], epoch_seconds(tool, train, test, options,
                                                                     coretype))
                ratio = best["none"] / best["openblas"]
                print("%-10s %-8s %12.3f %12.3f %6.2fx" % (name, recipe, best["openblas"],
                                                          best["none"], ratio), flush=True)
                results.append({"level": name, "recipe": recipe, "openblas_coretype": coretype,
                                "openblas_cpu_s": best["openblas"],
                                "blas_none_cpu_s": best["none"], "ratio": ratio})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
