"""Image paths named by a dataset's rows stay inside the dataset: its file's folder, or a root the user allows.

A JSONL or Parquet row names its images by path, relative to the dataset file's folder (or
absolute). Such a path is followed only when it resolves, symbolic links included, inside that
folder or inside one of the dataset's ``image_roots`` (``[datasets.<name>] image_roots = [...]``);
``../../etc/passwd``, an absolute path elsewhere, or a link pointing out of the folder make the
row a rejection saying so, and the file is never opened.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aerorl_ops.envs.items import ImageFileProblem, read_image_file
from aerorl_ops.error_line import error_line


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


@dataclass(frozen=True)
class ImageFolder:
    """Where a dataset's image paths are read from (``folder``) and may lead (``folder`` and ``roots``).

    >>> ImageFolder.of("/data/set", ["/data/images"]).allowed
    (PosixPath('/data/set'), PosixPath('/data/images'))
    """

    folder: Path
    roots: tuple[Path, ...] = ()

    @classmethod
    def of(cls, folder: str | Path, roots: Sequence[str | Path] = ()) -> ImageFolder:
        return cls(Path(folder), tuple(Path(root) for root in roots))

    @property
    def allowed(self) -> tuple[Path, ...]:
        """The folders an image may be in: the dataset's own, then the extra roots."""
        return (self.folder, *self.roots)

    def path(self, name: str) -> Path:
        """The file ``name`` names, or :class:`ImageFileProblem` when it resolves outside every allowed folder."""
        path = self.folder / name
        try:
            real = _real(path)
        except (OSError, ValueError) as error:  # a NUL byte, a lone surrogate: no file has such a name
            raise ImageFileProblem(f"image path {name!r:.200} is no file name ({error_line(error)})") from None
        if not any(real.is_relative_to(_real(root)) for root in self.allowed):
            roots = "".join(f" or {root}" for root in self.roots)
            raise ImageFileProblem(
                f"image path {name!r} leaves the dataset folder: it resolves to {real}, outside {self.folder}{roots}; "
                "move the image under the dataset's folder, or list its folder in the dataset's image_roots setting")
        return path

    def read(self, name: str) -> bytes:
        """The bytes of the image ``name`` names, or :class:`ImageFileProblem` saying why not."""
        return read_image_file(self.path(name))
