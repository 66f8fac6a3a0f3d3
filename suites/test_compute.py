"""The per-GPU loads: sustained GEMM (throughput, against the machine's best GPU, correctness), HBM
copy and triad bandwidth, and a memory pattern test over most of each GPU's free memory.

Each test loads its own GPU only (`facts_with_gpu_loads`), so under `pytest -n N` the GPUs are
loaded by N workers at once; the comparison with the best GPU waits for every GPU's GEMM."""

from gpuaccept.checks import compute


def test_gemm_throughput(gpu, profile, facts_with_gpu_loads, verdict):
    verdict(compute.gemm_throughput(profile, facts_with_gpu_loads, gpu))


def test_gemm_within_best(gpu, profile, facts_with_compute, verdict):
    verdict(compute.gemm_within_best(profile, facts_with_compute, gpu))


def test_gemm_correct(gpu, profile, facts_with_gpu_loads, verdict):
    verdict(compute.gemm_correct(profile, facts_with_gpu_loads, gpu))


def test_hbm_copy(gpu, profile, facts_with_gpu_loads, verdict):
    verdict(compute.hbm_copy(profile, facts_with_gpu_loads, gpu))


def test_hbm_triad(gpu, profile, facts_with_gpu_loads, verdict):
    verdict(compute.hbm_triad(profile, facts_with_gpu_loads, gpu))


def test_memtest(gpu, profile, facts_with_gpu_loads, verdict):
    verdict(compute.memtest(profile, facts_with_gpu_loads, gpu))
