"""fp8 outputs judged after dequantization, not bit for bit: the rule this task shares with
every per-128-group fp8 quantization task, in core/harness/fp8_check.py."""

from core.harness.fp8_check import check_group_quant as check  # noqa: F401
