"""Candidate sources for the axpy fixture task (y = 2 * x + b), named by what they do, for the
tests that submit source text (the RL arena, `arena serve`, the trainer adapters, Ray). The
file candidates live in tests/fixtures/candidates/."""

from __future__ import annotations

# Correct: the baseline's own torch call.
AXPY = "import torch\n\ndef run(x, b):\n    return torch.add(b, x, alpha=2)\n"
# Fails correctness: forgets the 2.
WRONG = "import torch\n\ndef run(x, b):\n    return x + b\n"
# Does not compile (no colon).
COMPILE_ERROR = "import torch\n\ndef run(x, b) return 2 * x + b\n"


def sleeping(seconds: float) -> str:
    """Correct, after sleeping `seconds` in every call: a slow evaluation on demand."""
    return f"import time, torch\n\ndef run(x, b):\n    time.sleep({seconds})\n    return torch.add(b, x, alpha=2)\n"
