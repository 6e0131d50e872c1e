"""KEEP_ANSWER: the product's JSON as the API sent it, and its digest.

An answer by id is kept as its body's text (a BOM removed); a listed product,
which has no body of its own, as its object written back as compact JSON. The
digest (SHA-256, hex) is what storage compares: the answer is written only
when it differs from the stored one. An answer over KEEP_ANSWER_MAX_BYTES
keeps its digest alone.
"""

from __future__ import annotations

import codecs
import hashlib
from typing import TYPE_CHECKING

from productcrawler.answer.declared import json_text

if TYPE_CHECKING:
    from productcrawler.items import ProductItem


def keep_answer(item: ProductItem, answer: bytes | object, max_bytes: int) -> bool:
    """Set ``item``'s answer and digest; False if the answer is over ``max_bytes`` (its digest alone kept)."""
    if isinstance(answer, bytes):
        data = answer[len(codecs.BOM_UTF8):] if answer.startswith(codecs.BOM_UTF8) else answer
    else:
        data = json_text(answer).encode()
    item.answer_digest = hashlib.sha256(data).hexdigest()
    if len(data) > max_bytes:
        item.answer = None
        return False
    item.answer = data.decode()
    return True
