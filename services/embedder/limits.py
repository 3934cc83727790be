"""Request limits for Embed, checked before any work is queued."""

from __future__ import annotations

from dataclasses import dataclass

from svckit.errors import InvalidArgument


@dataclass(frozen=True)
class EmbedLimits:
    max_batch_texts: int
    max_text_chars: int

    def check(self, texts: list[str]) -> None:
        if not texts:
            raise InvalidArgument("texts must not be empty")
        if len(texts) > self.max_batch_texts:
            raise InvalidArgument(
                f"too many texts: {len(texts)} > max_batch_texts {self.max_batch_texts}"
            )
        for index, text in enumerate(texts):
            if len(text) > self.max_text_chars:
                raise InvalidArgument(
                    f"texts[{index}] has {len(text)} characters > max_text_chars "
                    f"{self.max_text_chars}"
                )
