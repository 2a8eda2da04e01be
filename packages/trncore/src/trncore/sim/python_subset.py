"""The Python subset the NKI compiler takes, checked in the kernel's source and its helpers'.

The emulator runs a kernel's Python as Python, as AWS's simulator does: its guide (NKI 0.3.0 and
0.6.0, ``nki/guides/nki_simulator.rst``, "NKI Meta-Programming Support") says the simulator
"accepts any valid Python in the kernel body" while "the NKI compiler ... only supports a
restricted subset of Python", so such a kernel fails only when compiled for the device. This
module reads the source of the kernel function and of every helper function its trace ran
through (the functions :func:`trncore.sim.context.user_site` found on the stack under an
instruction or allocation, :data:`trncore.sim.context.helper_sink`) and reports, at its line,
each construct the compiler refuses. Each code object is parsed once per process; a function
without source (``exec``'d text, a notebook cell gone) or in the standard library is skipped.

Three kinds of evidence, three treatments:

- an AWS page says the compiler refuses the construct (``is`` / ``is not`` other than with
  ``None``: NKI 0.3.0 update guide and release notes): a :class:`PythonSubsetWarning` naming
  the page, the rule's :class:`LanguageError` in strict mode, as other forms AWS's simulator
  runs and its compiler refuses (``errors.warn_unless_strict``);
- only AWS's NKI front end KLR refuses it (github leanprover/KLR at 7ccd18c, 2026-03-25:
  ``interop/klr/gather.c``, the parser from Python's syntax tree; ``KLR/NKI/Simplify.lean``),
  some also quoted by public kernels' fixing commits: a :class:`PythonSubsetWarning` naming
  KLR, never an error (KLR's HEAD predates NKI 0.3.0 by two weeks); an inner ``def`` only under
  NKI 0.3.0-0.5.0, since NKI 0.6.0's pages write ``fori_loop`` / ``while_loop`` bodies so;
- AWS's NKI Library uses it in kernel code (``x is None``, ``in`` / ``not in``, ``f(*args)``):
  nothing, whatever KLR says, since the library compiles.

Not checked: decorators and class bases (KLR takes ``nki.jit``, ``staticmethod``,
``dataclass`` and the bases ``NKIObject``, ``Enum``, ``NamedTuple``; the emulator's classes are
checked by :mod:`trncore.sim.nki_object`), ``**kwargs`` parameters (KLR accepts them while
empty), and helpers that returned before any instruction of their own or of the functions they
called (they are not on the stack when the emulator looks).
"""

from __future__ import annotations

import ast
import inspect
import sysconfig
import textwrap
import threading
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from trncore.sim import versions
from trncore.sim.errors import LanguageError, warn_at

__all__ = [
    "Finding",
    "PythonSubsetWarning",
    "check_helpers",
    "check_kernel",
    "findings",
    "forget",
    "unchecked",
]

_UPDATE_GUIDE = (
    "the NKI 0.3.0 compiler does not support it (NKI 0.3.0 update guide, 'Replace is / is not "
    "with == / !=', and the 0.3.0 release notes, Breaking Changes)"
)
_KLR = "AWS's NKI front end KLR refuses it (interop/klr/gather.c)"
_KLR_SIMPLIFY = "AWS's NKI front end KLR refuses it (KLR/NKI/Simplify.lean)"


class PythonSubsetWarning(UserWarning):
    """A construct AWS's NKI compiler refuses, in a kernel or a helper it calls (the emulator
    runs it as Python, as AWS's simulator does)."""


@dataclass(frozen=True)
class Finding:
    """One construct at ``line`` of ``filename``: ``rule``, ``what`` was written, where the
    refusal is documented (``evidence``), what to write ``instead``, and ``page``: whether an
    AWS page documents it (else KLR alone, or KLR and a public compiler message)."""

    rule: str
    filename: str
    line: int
    what: str
    evidence: str
    instead: str
    page: bool

    def message(self, function: str) -> str:
        """The report's text (the site is added by :func:`trncore.sim.errors.warn_at`)."""
        return (
            f"{self.what} in {function}() [{self.rule}]: {self.evidence}; the emulator runs it "
            f"as Python. Write {self.instead}"
        )


#: rule -> (where the refusal is documented, what to write instead)
_RULES: dict[str, tuple[str, str]] = {
    "python-is": (_UPDATE_GUIDE, "== / != (x is None stays: AWS's NKI Library compiles it)"),
    "python-raise": (
        _KLR + ", run or not; a public RoPE kernel's fixing commit quotes the compiler's same "
        "message (docs/third-party-kernels.md, 29th batch)",
        "'assert condition, message' (AWS's NKI Library's kernel_assert) or if/else",
    ),
    "python-try": (_KLR, "if/else on the condition"),
    "python-del": (_KLR, "nothing: let the name go out of scope"),
    "python-global": (_KLR, "a value passed in and returned (or a dict argument) instead"),
    "python-nonlocal": (_KLR, "a value passed in and returned instead"),
    "python-import": (_KLR, "the import at module level"),
    "python-match": (_KLR, "if/elif"),
    "python-async": (_KLR, "plain (synchronous) code"),
    "python-nested-def": (
        _KLR + "; a public FFT's comment says 'NKI 0.3.0 forbids inner defs'",
        "the function at module level, passing it what it used from the enclosing one",
    ),
    "python-nested-class": (_KLR, "the class at module level"),
    "python-lambda": (_KLR, "a function defined at module level"),
    "python-comprehension": (
        _KLR + "; a public RNG's fixing commit: 'unroll list comprehensions' (docs/third-party-kernels.md)",
        "a for loop that appends to a list (or fills a dict)",
    ),
    "python-set": (_KLR, "a tuple or a list"),
    "python-walrus": (_KLR, "a separate assignment"),
    "python-generator": (_KLR, "a function that returns a list"),
    "python-varargs": (_KLR_SIMPLIFY, "a tuple parameter"),
    "python-loop-else": (_KLR_SIMPLIFY, "a flag set before 'break'"),
    "python-with": (_KLR_SIMPLIFY, "one context per 'with', without 'as'"),
    "python-matmul-operator": (_KLR_SIMPLIFY, "nisa.nc_matmul or nl.matmul"),
    "python-kwargs-call": (_KLR_SIMPLIFY, "the keyword arguments by name"),
    "python-starred": (_KLR_SIMPLIFY, "the elements by index"),
    "python-format-spec": (_KLR, "the value without ':spec'"),
}

#: syntax node -> (rule, what it is), for the nodes refused whatever they contain.
_NODES: dict[type, tuple[str, str]] = {
    ast.Raise: ("python-raise", "a 'raise' statement"),
    ast.Try: ("python-try", "a 'try' statement"),
    ast.Delete: ("python-del", "a 'del' statement"),
    ast.Global: ("python-global", "a 'global' statement"),
    ast.Nonlocal: ("python-nonlocal", "a 'nonlocal' statement"),
    ast.Import: ("python-import", "an 'import' inside a function"),
    ast.ImportFrom: ("python-import", "an 'import' inside a function"),
    ast.Match: ("python-match", "a 'match' statement"),
    ast.AsyncFor: ("python-async", "'async for'"),
    ast.AsyncWith: ("python-async", "'async with'"),
    ast.Await: ("python-async", "'await'"),
    ast.FunctionDef: ("python-nested-def", "a function defined inside a function"),
    ast.AsyncFunctionDef: ("python-nested-def", "a function defined inside a function"),
    ast.ClassDef: ("python-nested-class", "a class defined inside a function"),
    ast.Lambda: ("python-lambda", "a lambda"),
    ast.ListComp: ("python-comprehension", "a list comprehension"),
    ast.SetComp: ("python-comprehension", "a set comprehension"),
    ast.DictComp: ("python-comprehension", "a dict comprehension"),
    ast.GeneratorExp: ("python-comprehension", "a generator expression"),
    ast.Set: ("python-set", "a set display"),
    ast.NamedExpr: ("python-walrus", "an assignment expression ':='"),
    ast.Yield: ("python-generator", "'yield'"),
    ast.YieldFrom: ("python-generator", "'yield from'"),
}

#: rule -> the NKI release from which an AWS page writes the construct in kernel code: NKI 0.6.0's
#: ``nki.language.fori_loop`` / ``while_loop`` pages and migration guide ("Pattern 1", "Pattern 2")
#: define the loop body as a ``def body(i):`` inside the kernel.
_ACCEPTED_FROM: dict[str, str] = {"python-nested-def": "0.6.0"}

#: Nodes whose inside is another function's code (checked on its own if the trace runs it).
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

_findings: dict[types.CodeType, tuple[Finding, ...]] = {}
#: The kernels whose helpers a trace has checked since the program cache was last cleared.
_checked: set[types.CodeType] = set()
_lock = threading.Lock()
_PATHS = sysconfig.get_paths()
_STDLIB = tuple({_PATHS[k].rstrip("/") + "/" for k in ("stdlib", "platstdlib") if _PATHS.get(k)})


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes under ``node``, not entering nested functions, classes and lambdas."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, _SCOPES):
            yield from _walk(child)


def _scan(fn: ast.FunctionDef | ast.AsyncFunctionDef, filename: str, first: int) -> list[Finding]:
    """The refused constructs of the function ``fn`` (parsed from its source, whose first line is
    line ``first`` of ``filename``)."""
    out: list[Finding] = []

    def add(node: Any, rule: str, what: str) -> None:
        evidence, instead = _RULES[rule]
        line = first + node.lineno - 1
        out.append(Finding(rule, filename, line, what, evidence, instead, rule == "python-is"))

    if fn.args.vararg is not None:
        add(fn, "python-varargs", f"a '*{fn.args.vararg.arg}' parameter")
    for node in (n for stmt in fn.body for n in (stmt, *_walk(stmt))):
        kind = type(node)
        if kind in _NODES:
            add(node, *_NODES[kind])
        elif isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                # `x is None` / `x is not None`: AWS's NKI Library writes it (hundreds of times)
                if isinstance(op, (ast.Is, ast.IsNot)) and not (_is_none(left) or _is_none(right)):
                    word = "is" if isinstance(op, ast.Is) else "is not"
                    add(node, "python-is", f"'{word}' between values other than None")
                left = right
        elif isinstance(node, (ast.For, ast.While)) and node.orelse:
            loop = "for" if isinstance(node, ast.For) else "while"
            add(node, "python-loop-else", f"a '{loop} ... else'")
        elif isinstance(node, ast.With) and (len(node.items) > 1 or node.items[0].optional_vars):
            add(node, "python-with", "a 'with' of several contexts or with 'as'")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            add(node, "python-matmul-operator", "the '@' operator")
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg is None:
                    add(kw, "python-kwargs-call", "a '**' argument")
        elif isinstance(node, (ast.Tuple, ast.List)) and any(isinstance(e, ast.Starred) for e in node.elts):
            # (a starred call argument, f(*args), is in AWS's NKI Library's kernel code)
            add(node, "python-starred", "a '*' unpacking outside a call")
        elif isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            add(node, "python-format-spec", "an f-string format specifier")
    return out


def findings(code: types.CodeType) -> tuple[Finding, ...]:
    """The refused constructs of the function whose code is ``code``, each at its line; empty
    when its source cannot be read or parsed. Parsed once per code object and process."""
    found = _findings.get(code)
    if found is not None:
        return found
    found = ()
    if not code.co_name.startswith("<") and not code.co_filename.startswith(_STDLIB):
        try:
            lines, first = inspect.getsourcelines(code)
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except (OSError, TypeError, SyntaxError, ValueError):
            tree = None
        if tree is not None and tree.body:
            node = tree.body[0]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
                found = tuple(_scan(node, code.co_filename, max(first, 1)))
    with _lock:
        if len(_findings) > 65536:
            _findings.clear()  # bound the memory
        _findings[code] = found
    return found


def _report(code: types.CodeType, strict: bool, release: str) -> None:
    for f in findings(code):
        since = _ACCEPTED_FROM.get(f.rule)
        if since is not None and versions.at_least(since, release):
            continue
        site = (f.filename, f.line)
        if f.page and strict:
            raise LanguageError(f.rule, f.message(code.co_name) + " (strict mode)", site)
        warn_at(f.message(code.co_name), site, PythonSubsetWarning)


def check_kernel(fn: Any, strict: bool, release: str) -> None:
    """Report the refused constructs of the kernel function ``fn`` (before its trace for the
    target NKI ``release``, e.g. ``"0.3.0"``)."""
    code = getattr(fn, "__code__", None)
    if isinstance(code, types.CodeType):
        _report(code, strict, release)


def check_helpers(fn: Any, helpers: Iterable[tuple[Any, Any]] | None, strict: bool, release: str) -> None:
    """Report the refused constructs of the helper functions a trace of ``fn`` ran through:
    ``helpers`` are the values of :data:`trncore.sim.context.helper_sink` ((code, globals))."""
    if not helpers:
        return
    own = getattr(fn, "__code__", None)
    if isinstance(own, types.CodeType):
        with _lock:
            if len(_checked) > 65536:
                _checked.clear()  # bound the memory
            _checked.add(own)
    for code, _ in helpers:
        if code is not own and isinstance(code, types.CodeType):
            _report(code, strict, release)


def unchecked(fn: Any) -> bool:
    """Whether no trace of the kernel ``fn`` has had its helpers checked since the program cache
    was cleared. A program that runs once (``trncore.sim.lending``) collects the helpers on its
    stack only then: the walk costs 5-9 % of tracing an AWS NKI Library kernel, and repeated it
    would find the same helpers unless other arguments take other branches."""
    code = getattr(fn, "__code__", None)
    return not isinstance(code, types.CodeType) or code not in _checked


def forget() -> None:
    """Forget which kernels' helpers were checked (the program cache was cleared); the parsed
    source of each function is kept."""
    with _lock:
        _checked.clear()
