"""Parsing einsum subscripts into integer labels, with torch.einsum's rules.

Letters are the labels (``A``–``Z`` then ``a``–``z``, the order an implicit output is sorted in);
an ellipsis stands for the leading broadcast dimensions, which get labels of their own (52, 53, …)
aligned from the right across operands, as in NumPy broadcasting.
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ParsedSubscripts", "label_name", "parse_subscripts", "sublist_to_subscripts"]

_LETTERS = string.ascii_uppercase + string.ascii_lowercase
_LETTER_ID = {c: i for i, c in enumerate(_LETTERS)}
_ELLIPSIS_BASE = len(_LETTERS)


def label_name(label: int) -> str:
    """A readable name for an integer label: its letter, or ``…k`` for the k-th broadcast dim."""
    if label < _ELLIPSIS_BASE:
        return _LETTERS[label]
    return f"…{label - _ELLIPSIS_BASE}"


@dataclass(frozen=True)
class ParsedSubscripts:
    """Subscripts with ellipses expanded: one label per dimension of each operand and of the output.

    Attributes
    ----------
    inputs : tuple of tuple of int
        The labels of each operand's dimensions, in order (a repeated label is a diagonal).
    output : tuple of int
        The labels of the result's dimensions, in order.
    """

    inputs: tuple[tuple[int, ...], ...]
    output: tuple[int, ...]


def _split_term(term: str, where: str) -> tuple[list[int], list[int], bool]:
    """Labels before and after the ellipsis of one term, and whether it has one."""
    if term.count("...") > 1:
        raise ValueError(f"einsum: {where} {term!r} has more than one ellipsis")
    head, has_ellipsis, tail = term.partition("...")
    parts = []
    for part in (head, tail):
        labels = []
        for c in part:
            if c not in _LETTER_ID:
                raise ValueError(
                    f"einsum: invalid character {c!r} in {where} {term!r}; subscripts are letters "
                    "a-z, A-Z and one optional '...' per term"
                )
            labels.append(_LETTER_ID[c])
        parts.append(labels)
    return parts[0], parts[1], bool(has_ellipsis)


def parse_subscripts(subscripts: str, ranks: Sequence[int]) -> ParsedSubscripts:
    """Parse ``subscripts`` for operands of the given ranks (torch.einsum's grammar).

    Raises ValueError for a malformed expression or one that does not fit the operands' ranks.
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a str, got {type(subscripts).__name__}")
    text = "".join(subscripts.split())
    lhs, arrow, rhs = text.partition("->")
    if "->" in rhs:
        raise ValueError(f"einsum: subscripts {subscripts!r} contain more than one '->'")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(
            f"einsum: subscripts {subscripts!r} name {len(terms)} operand(s) but {len(ranks)} were given"
        )
    split = [_split_term(t, f"operand {i} subscripts") for i, t in enumerate(terms)]
    ellipsis_ranks = []
    for i, ((head, tail, has_ellipsis), rank) in enumerate(zip(split, ranks)):
        named = len(head) + len(tail)
        if has_ellipsis:
            if named > rank:
                raise ValueError(
                    f"einsum: operand {i} has {rank} dimension(s) but its subscripts {terms[i]!r} "
                    f"name {named}"
                )
            ellipsis_ranks.append(rank - named)
        else:
            if named != rank:
                raise ValueError(
                    f"einsum: operand {i} has {rank} dimension(s) but its subscripts {terms[i]!r} "
                    f"name {named} and no ellipsis was given"
                )
            ellipsis_ranks.append(0)
    broadcast_rank = max(ellipsis_ranks, default=0)
    ellipsis_labels = list(range(_ELLIPSIS_BASE, _ELLIPSIS_BASE + broadcast_rank))
    inputs = []
    for (head, tail, _), r in zip(split, ellipsis_ranks):
        inputs.append(tuple(head + ellipsis_labels[broadcast_rank - r :] + tail))
    counts = Counter(label for (head, tail, _) in split for label in head + tail)

    if arrow:
        head, tail, has_ellipsis = _split_term(rhs, "output subscripts")
        out_labels = head + tail
        repeated = sorted({label_name(x) for x in out_labels if out_labels.count(x) > 1})
        if repeated:
            raise ValueError(f"einsum: output subscripts {rhs!r} repeat {', '.join(repeated)}")
        missing = [label_name(x) for x in out_labels if x not in counts]
        if missing:
            raise ValueError(
                f"einsum: output subscript(s) {', '.join(missing)} in {subscripts!r} appear in no operand"
            )
        # An ellipsis missing from an explicit output sums the broadcast dimensions away.
        output = tuple(head + (ellipsis_labels if has_ellipsis else []) + tail)
    else:
        # Implicit output: broadcast dims first, then labels seen once, in alphabetical order.
        once = sorted(label for label, n in counts.items() if n == 1)
        output = tuple(ellipsis_labels + once)
    return ParsedSubscripts(inputs=tuple(inputs), output=output)


def sublist_to_subscripts(args: Sequence[object]) -> tuple[str, list[object]]:
    """Convert torch.einsum's sublist form ``(op0, [0, 1], op1, [1, 2], [0, 2])`` to subscripts.

    Returns the subscripts string and the operands. Labels are ints in ``[0, 52)`` or ``...``.
    """

    def term(sublist: object, where: str) -> str:
        if not isinstance(sublist, (list, tuple)):
            raise TypeError(
                f"einsum: {where} must be a list of ints or Ellipsis, got {type(sublist).__name__}"
            )
        out = []
        for x in sublist:
            if x is Ellipsis:
                out.append("...")
            elif isinstance(x, int) and not isinstance(x, bool) and 0 <= x < _ELLIPSIS_BASE:
                out.append(_LETTERS[x])  # torch's order: 0-25 are A-Z, 26-51 are a-z
            else:
                raise ValueError(f"einsum: {where} holds {x!r}; sublist labels are ints in [0, 52) or ...")
        return "".join(out)

    operands = list(args[0::2])
    sublists = list(args[1::2])
    explicit = None
    if len(operands) > len(sublists):  # odd count: the last item is the output sublist
        explicit = operands.pop()
    terms = [term(s, f"sublist {i}") for i, s in enumerate(sublists)]
    text = ",".join(terms)
    if explicit is not None:
        text += "->" + term(explicit, "output sublist")
    return text, operands
