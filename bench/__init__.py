"""Switchboard's benchmarks: fixed workloads, printed figures, JSON under `bench/results/`.

Run `make bench` for all of them or `python -m bench <workload>` for one; see
docs/performance.md for what each workload measures and the latest figures.
"""
