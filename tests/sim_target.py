"""The H200 as the sim's model sees it (the peaks of core/data/peaks, rounded), for tests that
price counts directly with core/harness/sim/model.py."""

from core.harness.sim.model import Target

H200 = Target(
    key="h200",
    units=132,
    bf16_tflops=788.0,
    fp8_tflops=1576.0,
    fp32_tflops=60.0,
    hbm_tbps=4.25,
    l2_tbps=10.0,
)
