"""GPU decode workloads and microbenchmarks: traces for the GPU memory-hierarchy simulator.

:mod:`coaccel.models.gpu.microbench` generates the microbenchmark traces (streaming reads,
pointer chases, host copies, zero-copy reads, decode-attention traffic) the simulator is
validated with.
"""
