"""The value rules every column shares, the article's and the declared ones: numbers and plain text.

A number is a JSON number (decoded as a Decimal, never a binary float) or a
string that writes one as JSON does, give or take a "+" or leading zeros; a
bool is not a number. Text is plain: markup removed, entities replaced, control
characters and stray angle brackets made spaces, runs of spaces made one.
"""

from __future__ import annotations

import re
from decimal import Decimal

from w3lib.html import remove_tags, replace_entities

# Each digit run can only end one way, so a long non-number fails in linear time.
PLAIN_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# Angle brackets left once markup is gone (an escaped "&lt;script&gt;"),
# control characters, and unpaired surrogates (a JSON "\ud800" escape decodes
# to one, and utf8mb4 cannot store it). Each becomes a space.
_UNWANTED_CHARS = re.compile("[<>\x00-\x08\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def read_number(value: object) -> Decimal | None:
    """A finite JSON number or plain numeric string as a Decimal; None for anything else."""
    if type(value) is Decimal:
        number = value
    elif type(value) is int:  # not bool, a subclass of int
        number = Decimal(value)
    elif type(value) is float:  # not from a decoded answer; read from its text, not its binary value
        number = Decimal(repr(value))
    elif type(value) is str and PLAIN_NUMBER.fullmatch(value.strip()):
        number = Decimal(value.strip())
    else:
        return None
    return number if number.is_finite() else None


def plain_text(text: str, max_length: int) -> str:
    """``text`` as plain text, cut to ``max_length`` characters ("" if nothing is left)."""
    if "<" in text:
        text = remove_tags(text)
    if "&" in text:
        text = replace_entities(text)
    text = " ".join(_UNWANTED_CHARS.sub(" ", text).split())
    return text[:max_length].rstrip()
