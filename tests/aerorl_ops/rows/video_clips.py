"""Tiny hand-made videos for the video tests: solid-colour frames, as a video file (PyAV) or as frame files.

``PALETTE`` gives frame k its colour, far apart from every other, so the frame a decoded (lossy) image
came from is the palette colour nearest its mean.
"""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image, ImageStat

PALETTE = ((255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 0, 255), (0, 255, 255), (255, 255, 255),
           (0, 0, 0), (128, 128, 128), (255, 128, 0))
SIZE = 32


def frame_png(k: int, size: int = SIZE) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), PALETTE[k]).save(buffer, format="PNG")
    return buffer.getvalue()


def write_frames(folder: Path, count: int = len(PALETTE)) -> list[str]:
    """Frame files ``frames/f<k>.png`` under ``folder`` (frame k in ``PALETTE[k]``); their relative paths."""
    (folder / "frames").mkdir(parents=True, exist_ok=True)
    names = [f"frames/f{k}.png" for k in range(count)]
    for k, name in enumerate(names):
        (folder / name).write_bytes(frame_png(k))
    return names


def write_clip(path: Path, count: int = len(PALETTE), fps: int = 5) -> Path:
    """A ``count``-frame MPEG-4 clip at ``fps`` frames per second, frame k in ``PALETTE[k]``."""
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width = stream.height = SIZE
        stream.pix_fmt = "yuv420p"
        for k in range(count):
            frame = av.VideoFrame.from_ndarray(np.full((SIZE, SIZE, 3), PALETTE[k], np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def palette_index(encoded: bytes) -> int:
    """Which ``PALETTE`` colour the image's mean is nearest to (the frame it shows)."""
    with Image.open(io.BytesIO(encoded)) as image:
        mean = ImageStat.Stat(image.convert("RGB")).mean
    return min(range(len(PALETTE)), key=lambda k: sum((a - b) ** 2 for a, b in zip(mean, PALETTE[k], strict=True)))


def colour_error(encoded: bytes, k: int) -> float:
    """The largest channel difference between the image's mean colour and ``PALETTE[k]``."""
    with Image.open(io.BytesIO(encoded)) as image:
        mean = ImageStat.Stat(image.convert("RGB")).mean
    return max(abs(a - b) for a, b in zip(mean, PALETTE[k], strict=True))
