"""Display names: the name a contributor shows beside their contributor number.

A display name is what people read as the author of a note, so it must not be able to
pass for something else: it is trimmed, its inner runs of whitespace become one space, it
holds no control or format characters (no newlines, no bidirectional overrides, no
zero-width characters that would make two names look alike), it is unique ignoring case
(migration 0006's index), and it cannot be one of the names that read as the system
(cograph_api.limits.RESERVED_PRINCIPALS) or as another contributor's number
("contributor 7", "#7"), which is how an author without a name is shown.
"""

from __future__ import annotations

import re
import unicodedata

from cograph_api import limits as L
from svckit.errors import InvalidArgument

# The REST error code (gRPC ALREADY_EXISTS reason) when another contributor has the name.
DISPLAY_NAME_TAKEN = "display_name_taken"
# "contributor 7", "Contributor #7", "#7", "7": how authors without a name are shown.
_LOOKS_LIKE_A_NUMBER = re.compile(r"(contributor\s*)?#?\s*\d+", re.IGNORECASE)


def _refused_character(text: str) -> str | None:
    """The first character a name may not hold: control, format, surrogate, private-use or
    unassigned (Unicode category C*), or a line or paragraph separator."""
    for char in text:
        category = unicodedata.category(char)
        if category[0] == "C" or category in ("Zl", "Zp"):
            return char
    return None


def validate_display_name(raw: str, max_chars: int = L.DISPLAY_NAME_MAX_CHARS) -> str | None:
    """The name to store, or None to clear it (an empty or blank name)."""
    text = unicodedata.normalize("NFC", raw)
    bad = _refused_character(text)
    if bad is not None:
        raise InvalidArgument(
            f"display_name: must not contain control or format characters (U+{ord(bad):04X})"
        )
    name = " ".join(text.split())
    if not name:
        return None
    if len(name) > max_chars:
        raise InvalidArgument(
            f"display_name: must be at most {max_chars} characters (got {len(name)})"
        )
    if name.casefold() in L.RESERVED_PRINCIPALS or _LOOKS_LIKE_A_NUMBER.fullmatch(name):
        raise InvalidArgument(
            f"display_name: {name!r} is reserved (it reads as the system or a contributor number)"
        )
    return name
