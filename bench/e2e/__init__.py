"""Side-by-side benchmark on a real API server: kube-scheduler, Volcano's vc-scheduler, policydsl and a raw binder.

    bash bench/e2e/build.sh            # vc-scheduler (once, ~10 min) and the load tools
    python -m bench.e2e --markdown docs/benchmarks.md --json bench-e2e.json

See bench/e2e/run.py for the options and docs/benchmarks.md for the method and figures.
"""
