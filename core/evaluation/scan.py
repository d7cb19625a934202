"""The static scan: patterns in a candidate's source that deserve a human look.

Every hit is a review note (`scan:<rule>: ...`): it changes no score, because each pattern has
honest uses (a CUDA wrapper reads its .cu file, a kernel may use a side stream it joins) and
because a determined cheat obfuscates past any regex. The proven defenses live in the harness
(docs/integrity.md); this scan points a reviewer at the candidates worth reading.

The Python source is read two ways: its AST (imports, assignments into modules, `setattr`,
calls to `exec`/`eval`, classes derived from torch.Tensor) and regular expressions over the
text with comments and docstrings removed but string literals kept, so that
`getattr(sys, "_getframe")` is still seen. Sibling native sources (.cu, .hip, .cuh, .cpp) get
the regular expressions only.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.harness.pysource import parse_module
from core.model.candidate import native_siblings

MAX_LINES_SHOWN = 3
# Modules whose attributes a candidate has no business assigning.
GUARDED_MODULES = (
    "torch",
    "time",
    "triton",
    "numpy",
    "builtins",
    "sys",
    "os",
    "core",
    "gc",
    "inspect",
    "random",
    "math",
    "ctypes",
)


@dataclass(frozen=True)
class Rule:
    name: str
    what: str
    patterns: tuple[str, ...]

    def regex(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p})" for p in self.patterns))


RULES = (
    Rule(
        "streams",
        "launches work on a stream other than the timed one",
        (
            r"\bStream\s*\(",
            r"cuda\.stream\s*\(",
            r"\bset_stream\b",
            r"\bExternalStream\b",
            r"\bwait_stream\b",
            r"\b(?:cuda|hip)Stream(?:Create|CreateWithFlags|CreateWithPriority)\b",
            r"\bstreams?\s*=",
        ),
    ),
    Rule(
        "threads",
        "starts threads, which can finish work after run() returns",
        (
            r"\bthreading\b",
            r"\b_thread\b",
            r"\bconcurrent\.futures\b",
            r"\bThreadPool",
            r"\bstd::thread\b",
            r"\bpthread_create\b",
            r"\basyncio\b",
            r"\bstd::async\b",
        ),
    ),
    Rule(
        "processes",
        "starts or signals processes, or leaves its process group",
        (
            r"\bsubprocess\b",
            r"\bos\.(?:system|popen|fork|forkpty|spawn\w*|exec\w*|setsid|setpgid|setpgrp|daemon|kill|killpg|abort|_exit)\b",
            r"\bmultiprocessing\b",
            r"\bpty\b",
            r"\bsetsid\b",
            r"\bfork\s*\(",
        ),
    ),
    Rule(
        "native_calls",
        "calls native code outside torch's extension loader",
        (
            r"\bctypes\b",
            r"\bcffi\b",
            r"\bdlopen\b",
            r"\bCDLL\b",
        ),
    ),
    Rule(
        "introspection",
        "inspects frames, the garbage collector or the interpreter's state",
        (
            r"\b_getframe\b",
            r"\binspect\.(?!signature\b)\w+",
            r"\bfrom\s+inspect\s+import\b(?!\s+signature\s*$)",
            r"\bgc\.",
            r"\bimport\s+gc\b",
            r"\bf_(?:back|locals|globals|code)\b",
            r"\btb_frame\b",
            r"\bset(?:trace|profile)\b",
            r"\bget_(?:referrers|referents|objects)\b",
            r"\bcurrentframe\b",
            r"\bsys\.modules\b",
            r"\b__(?:globals|code|closure|defaults|kwdefaults|builtins|subclasses)__\b",
            r"\bstring_at\b",
        ),
    ),
    Rule(
        "environment",
        "reads or changes environment variables",
        (r"\bos\.environ\b", r"\bgetenv\b", r"\bputenv\b", r"\benviron\b"),
    ),
    Rule(
        "file_access",
        "reads, writes or lists files",
        (
            r"(?<![\w.])open\s*\(",
            r"\bio\.open\b",
            r"\bos\.open\b",
            r"\.(?:read|write)_(?:text|bytes)\s*\(",
            r"\bos\.(?:listdir|scandir|walk|remove|unlink|rename|replace)\b",
            r"\bglob\b",
            r"/proc/",
            r"/dev/shm",
            r"\bshutil\b",
            r"\bfopen\s*\(",
            r"\btempfile\b",
            r"\bnp\.load\b",
            r"\btorch\.load\b",
        ),
    ),
    Rule(
        "task_files",
        "names the task's reference, baseline or job files, or imports by name at run time",
        (
            r"\breference(?:\.py)?\b",
            r"\bbaseline(?:\.py)?\b",
            r"\btask\.yaml\b",
            r"\bjob\.json\b",
            r"\barena_(?:reference|baseline|task_inputs)\b",
            r"\bimportlib\b",
            r"\b__import__\b",
            r"\brunpy\b",
            r"\bcore\.(?:tasks|harness|evaluate)\b",
            r"\bspec_from_file_location\b",
        ),
    ),
    Rule(
        "exit_hooks",
        "runs code at exit or on signals",
        (
            r"\batexit\b",
            r"\bsignal\.(?:signal|setitimer|alarm|pthread_kill)\b",
            r"\bsys\.excepthook\b",
            r"\bdef\s+__del__\b",
            r"\bweakref\.finalize\b",
        ),
    ),
    Rule(
        "dynamic_code",
        "builds or loads code at run time, or hides text",
        (
            r"\bmarshal\b",
            r"\bpickle\b",
            r"\bbase64\b",
            r"\bcodecs\b",
            r"\bzlib\b",
            r"\bbytes\.fromhex\b",
            r"\bchr\s*\(\s*\d",
        ),
    ),
    Rule(
        "tensor_subclass",
        "makes tensor subclasses or overrides torch's dispatch",
        (
            r"\b_make_subclass\b",
            r"\b__torch_function__\b",
            r"\b__torch_dispatch__\b",
            r"\bas_subclass\b",
            r"\b_neg_view\b",
            r"\b_conj\b",
        ),
    ),
    Rule(
        "output_cache",
        "keys something on tensor addresses, identities or versions (a cache of outputs?)",
        (
            r"\bdata_ptr\s*\(",
            r"\b_version\b",
            r"(?<![\w.])id\s*\(",
            r"\b_cdata\b",
            r"\blru_cache\b",
            r"\bfunctools\.cache\b",
            r"@cache\b",
            r"\bunsafe_(?:get|set)\b",
        ),
    ),
    Rule(
        "cuda_graphs",
        "captures CUDA graphs itself, or behaves differently while one is captured",
        (
            r"\bCUDAGraph\b",
            r"cuda\.graph\s*\(",
            r"\bmake_graphed_callables\b",
            r"\bcudaGraph\w*\b",
            r"\bis_current_stream_capturing\b",
            r"\bcudaStreamIsCapturing\b",
        ),
    ),
    Rule(
        "precision_settings",
        "changes torch's precision settings",
        (
            r"\ballow_tf32\b",
            r"\bset_float32_matmul_precision\b",
            r"\ballow_(?:bf16|fp16)_reduced_precision_reduction\b",
        ),
    ),
    Rule(
        "network",
        "uses the network",
        (r"\bsocket\b", r"\burllib\b", r"\brequests\b", r"\bhttp\.client\b"),
    ),
)

_LOWER = {
    "float8": (r"\bfloat8\w*\b", r"\bfp8\b", r"\be4m3\w*\b", r"\be5m2\w*\b", r"\b_scaled_mm\b"),
    "float16": (
        r"\bfloat16\b",
        r"\bfp16\b",
        r"\.half\s*\(",
        r"\btorch\.half\b",
        r"\btl\.float16\b",
    ),
    "int8": (r"\bint8\b", r"\bint4\b"),
}


# The one environment read the arena itself offers code: which GPU a sim: device stands for
# (core/harness/protocol.py SIM_GPU_ENV), so that a task's baseline.py takes the GPU's Triton
# branch there. It tells nothing `x.is_cuda` does not (a sim: device's tensors are CPU tensors),
# so reading it is not noted; any other read of the environment still is.
_OFFERED_ENV = re.compile(r"""\bos\.environ\.get\(\s*["']ARENA_SIM_GPU["']\s*\)""")


def scan_source(source: str, task_dtypes: Iterable[str] = (), native: bool = False) -> list[str]:
    """Review notes for one source text. `task_dtypes` are the dtypes the task declares: a
    lower precision it does not declare is noted."""
    text = source if native else _strip_comments_and_docstrings(source)
    lines = [_OFFERED_ENV.sub("_offered_", line) for line in text.splitlines()]
    hits: dict[str, list[tuple[int, str]]] = {}
    for rule in RULES:
        rx = rule.regex()
        for n, line in enumerate(lines, 1):
            if rx.search(line):
                hits.setdefault(rule.name, []).append((n, line.strip()))
    declared = " ".join(task_dtypes)
    for kind, patterns in _LOWER.items():
        if kind in declared:  # bfloat16 tasks skip float16: it is not a lower precision
            continue
        rx = re.compile("|".join(patterns))
        for n, line in enumerate(lines, 1):
            if rx.search(line):
                hits.setdefault(f"precision_{kind}", []).append((n, line.strip()))
    if not native:
        for name, n, shown in _ast_hits(source):
            hits.setdefault(name, []).append((n, shown))
    what = {r.name: r.what for r in RULES}
    what.update(
        {
            f"precision_{k}": f"computes in {k}, a precision the task does not declare"
            for k in _LOWER
        }
    )
    what.update(
        {
            "monkeypatch": "assigns attributes of torch, time, triton, sys, os or the harness",
            "dynamic_exec": "calls exec, eval or compile on text",
        }
    )
    notes = []
    for name, found in hits.items():
        found = sorted(set(found))
        shown = "; ".join(f"line {n}: `{s[:80]}`" for n, s in found[:MAX_LINES_SHOWN])
        more = f"; {len(found) - MAX_LINES_SHOWN} more" if len(found) > MAX_LINES_SHOWN else ""
        notes.append(f"scan:{name}: {what.get(name, name)} ({shown}{more})")
    return sorted(notes)


def scan_candidate(path: Path, task_dtypes: Iterable[str] = ()) -> list[str]:
    """Notes for a candidate file and the native sources beside it."""
    dtypes = list(task_dtypes)
    notes = [n for n in scan_source(path.read_text(errors="replace"), dtypes)]
    for sibling in native_siblings(path):
        if sibling.stem == path.stem:
            notes += [
                f"{n} [{sibling.name}]"
                for n in scan_source(sibling.read_text(errors="replace"), dtypes, native=True)
            ]
    return notes


def _strip_comments_and_docstrings(source: str) -> str:
    """The source with comments and docstrings blanked (line numbers kept); unchanged if it
    does not tokenize or parse (a syntax error is the harness's to report)."""
    lines = source.splitlines(keepends=True)
    try:
        tree = parse_module(source)
        for node in ast.walk(tree):
            if (
                isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and node.body
            ):
                first = node.body[0]
                if (
                    isinstance(first, ast.Expr)
                    and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)
                ):
                    for i in range(first.lineno - 1, (first.end_lineno or first.lineno)):
                        lines[i] = "\n"
        text = "".join(lines)
        out = []
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            out.append(tok if tok.type != tokenize.COMMENT else tok._replace(string=""))
        return tokenize.untokenize(out)
    except (SyntaxError, tokenize.TokenError, IndentationError, ValueError):
        return source


def _ast_hits(source: str) -> list[tuple[str, int, str]]:
    try:
        tree = parse_module(source)
    except SyntaxError:
        return []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def root_module(expr: ast.expr) -> str | None:
        while isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        if isinstance(expr, ast.Name):
            full = aliases.get(expr.id, expr.id if expr.id in ("builtins",) else None)
            if full and full.split(".")[0] in GUARDED_MODULES:
                return full
        return None

    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)) and root_module(t):
                found.append(("monkeypatch", node.lineno, ast.unparse(t)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("setattr", "delattr") and node.args:
                found.append(("monkeypatch", node.lineno, ast.unparse(node)[:80]))
            if node.func.id in ("exec", "eval", "compile") and aliases.get(node.func.id) is None:
                found.append(("dynamic_exec", node.lineno, ast.unparse(node)[:80]))
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                text = ast.unparse(base)
                if text.endswith("Tensor") or "TensorBase" in text:
                    found.append(("tensor_subclass", node.lineno, f"class {node.name}({text})"))
    return found
