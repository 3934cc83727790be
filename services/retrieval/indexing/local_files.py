"""Reading a file of a plain directory so that what is read is what was checked.

A plain directory (no git) can change while a job reads it: a file checked when the tree
was listed can be a symlink to the service's secrets by the time it is read. So a file is
opened one path component at a time from a descriptor of the source's root, each with
O_NOFOLLOW (a symlink anywhere on the way is refused, not followed), the last one as a
regular file checked with fstat on the descriptor that is then read; the bytes read once
are the ones hashed and stored. A file with more than one hard link is refused too: a link
to a file outside the tree is the same attack without a symlink.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class NotRegular(OSError):
    """The path is (or passes through) a symlink, or is no regular file, or is linked
    from elsewhere: it is skipped as `not_regular`."""


class TooLarge(OSError):
    """The file grew past the size limit since it was listed."""


@dataclass(frozen=True, slots=True)
class LocalFile:
    data: bytes
    modified: datetime


def read_regular(root: Path, relative: str, *, max_bytes: int) -> LocalFile:
    """The bytes and mtime of `root/relative`, read as the module docstring says.

    `relative` is '/'-separated, from a listing of `root`; `..` and empty parts are refused.
    """
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise NotRegular(f"{relative!r} is not a path inside the source")
    opened: list[int] = []
    try:
        opened.append(os.open(root, _DIR_FLAGS))
        for part in parts[:-1]:
            try:
                opened.append(os.open(part, _DIR_FLAGS, dir_fd=opened[-1]))
            except OSError as err:
                raise NotRegular(f"{relative}: {part} is not a directory") from err
        try:
            # O_NONBLOCK: a FIFO swapped in would otherwise block the open forever.
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=opened[-1])
        except OSError as err:
            raise NotRegular(f"{relative} is not a regular file") from err
        opened.append(fd)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(f"{relative} is not a regular file")
        if info.st_nlink > 1:
            raise NotRegular(f"{relative} has other hard links")
        if info.st_size > max_bytes:
            raise TooLarge(f"{relative} is over {max_bytes} bytes")
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 16):
            total += len(chunk)
            if total > max_bytes:
                raise TooLarge(f"{relative} grew over {max_bytes} bytes")
            chunks.append(chunk)
        return LocalFile(b"".join(chunks), datetime.fromtimestamp(info.st_mtime, tz=UTC))
    finally:
        for descriptor in reversed(opened):
            os.close(descriptor)
