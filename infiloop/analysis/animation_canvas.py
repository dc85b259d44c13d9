"""Pixel-exact frames for the animations of notebook 07 (``animation.py``): a board drawn cell by cell at fixed
pixels, glyphs rendered once, frames blitted over a background drawn once, and matplotlib's writers fed the
frames unscaled (GIF always, MP4 where ffmpeg exists), each file moved into place only when complete."""

from __future__ import annotations

import shutil
import time
from contextlib import ExitStack
from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.animation import FFMpegWriter, PillowWriter
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

from ..io import atomic_write

DPI = 80  # pixels per inch of every frame; figure sizes are whole multiples of 1/DPI inch
WRONG_INK = "#A00000"  # the symbol of a wrong cell: dark red on its wrong-coloured fill
NO_SYMBOL = "?"  # drawn in a wrong cell whose prediction has no symbol (animation.shown_texts)


def figure(width_px: int, height_px: int) -> Figure:
    fig = Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI, facecolor="white")
    FigureCanvasAgg(fig)
    fig.set_layout_engine(None)  # fixed positions: a cell is at the same pixel in every frame
    return fig


def rgb(color) -> np.ndarray:
    return np.round(np.array(to_rgb(color)) * 255).astype(np.uint8)


def glyph(text: str, px: int) -> np.ndarray:
    """Coverage [px, px] in [0, 1] of ``text`` drawn black and centred in a px x px square (rendered once)."""
    fig = figure(px, px)
    fig.text(0.5, 0.5, text, ha="center", va="center_baseline", fontsize=0.55 * px * 72 / DPI,
             fontweight="bold" if text.isdigit() else "normal")
    fig.canvas.draw()
    return 1 - np.asarray(fig.canvas.buffer_rgba())[..., 0].astype(np.float32) / 255


class Board(Artist):
    """A board drawn pixel for pixel in the middle of an axes (which keeps only its title and texts): each
    cell a block of ``cell`` x ``cell`` pixels filled with its colour, its text as a glyph rendered once,
    white lines between cells, black lines between boxes, wrong cells outlined in red on demand. Every cell
    is at the same pixels in every frame, and ``samples`` says where to read it back."""

    def __init__(self, ax, shape: tuple[int, int], colors, box=None, texts=()):
        super().__init__()
        self.shape, self.palette, self.box = shape, np.stack([rgb(c) for c in colors]), box
        ax.set_axis_off()
        fig = ax.get_figure()
        h, w = shape
        x0, y0, bw, bh = (ax.get_position().bounds * np.array([fig.bbox.width, fig.bbox.height] * 2))
        self.cell = max(3, int(min(bw / w, bh / h)))
        self.left = int(x0 + (bw - self.cell * w) / 2)
        self.bottom = int(y0 + (bh - self.cell * h) / 2)
        self.top = int(round(fig.bbox.height)) - self.bottom - self.cell * h  # in frame rows (y down)
        ax.set_position((self.left / fig.bbox.width, self.bottom / fig.bbox.height, self.cell * w / fig.bbox.width,
                         self.cell * h / fig.bbox.height))  # the axes' title and texts frame the board
        self.glyphs = {t: glyph(t, self.cell) for t in sorted(set(texts) - {""})} if self.cell >= 10 else {}
        self.rgba = None
        fig.add_artist(self)

    def set(self, index: np.ndarray, texts: np.ndarray | None = None, wrong: np.ndarray | None = None,
            wrong_ink: np.ndarray | None = None) -> None:
        """Show palette indices ``index``, the text of each cell (``texts``: black, or :data:`WRONG_INK` where
        ``wrong_ink`` is set) and outline ``wrong`` cells."""
        h, w, c = *self.shape, self.cell
        img = np.repeat(np.repeat(self.palette[np.asarray(index).reshape(h, w)], c, 0), c, 1).astype(np.float32)
        if texts is not None and self.glyphs:
            red = np.zeros(h * w, bool) if wrong_ink is None else np.asarray(wrong_ink, bool).ravel()
            for k, t in enumerate(np.asarray(texts).ravel()):
                if t in self.glyphs:
                    r, q = divmod(k, w)
                    cover, block = self.glyphs[t][..., None], img[r * c:(r + 1) * c, q * c:(q + 1) * c]
                    block[:] = block * (1 - cover) + (rgb(WRONG_INK) if red[k] else 0) * cover
        img[::c, :] = img[:, ::c] = 255  # white lines between cells
        if wrong is not None:
            t = max(1, c // 10)
            for r, q in zip(*np.nonzero(np.asarray(wrong).reshape(h, w))):
                block = img[r * c + 1:(r + 1) * c - 1, q * c + 1:(q + 1) * c - 1]
                block[:t], block[-t:], block[:, :t], block[:, -t:] = (rgb("#C00000"),) * 4
        if self.box:
            for k in range(0, h + 1, self.box[0]):
                img[max(0, k * c - 1):k * c + 1, :] = 0
            for k in range(0, w + 1, self.box[1]):
                img[:, max(0, k * c - 1):k * c + 1] = 0
        rgba = np.empty((h * c, w * c, 4), np.uint8)
        rgba[..., :3], rgba[..., 3] = img.astype(np.uint8), 255
        self.rgba = rgba

    def draw(self, renderer) -> None:
        if self.rgba is not None:
            gc = renderer.new_gc()
            renderer.draw_image(gc, self.left, self.bottom, self.rgba[::-1])  # renderer rows run bottom-up
            gc.restore()

    def samples(self, where: float) -> np.ndarray:
        """Pixel (x, y) in a frame (y down) of each cell's point at fraction ``where`` of the cell from its
        top-left corner (0.5: the centre); row-major over the board."""
        h, w = self.shape
        rr, cc = np.divmod(np.arange(h * w), w)
        off = int(where * self.cell)
        return np.stack([self.left + cc * self.cell + off, self.top + rr * self.cell + off], 1)


def log_axis(ax, last: int) -> None:
    """A log x axis from 1 to ``last`` with fixed, plainly labelled ticks (cheap to draw at every frame)."""
    ax.set_xscale("log")
    ax.set_xlim(1, max(2, last))
    ticks = [m * 10**k for k in range(len(str(last))) for m in (1, 2, 5) if m * 10**k <= last]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FixedFormatter([f"{t:,}" for t in ticks]))
    ax.xaxis.set_minor_locator(NullLocator())


def frames(fig: Figure, live: list, draw, n_frames: int):
    """Each frame as an RGBA array: everything but the ``live`` artists is drawn once, then per frame the
    live ones are updated (``draw(i)``) and drawn over that background, in the order given (blitting)."""
    for a in live:
        a.set_animated(True)
    canvas = fig.canvas
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    renderer = canvas.get_renderer()
    for i in range(n_frames):
        draw(i)
        canvas.restore_region(background)
        for a in live:
            a.draw(renderer)
        yield np.asarray(canvas.buffer_rgba())


class Pixels(Artist):
    """An artist that puts an RGBA frame [height, width, 4] on the canvas pixel for pixel (no resampling)."""

    rgba: np.ndarray | None = None

    def draw(self, renderer) -> None:
        if self.rgba is not None:
            gc = renderer.new_gc()
            renderer.draw_image(gc, 0, 0, self.rgba[::-1])  # the renderer's rows run bottom to top
            gc.restore()


def write_frames(fig: Figure, live: list, draw, n_frames: int, path: Path, fps: float,
           video: bool | None) -> tuple[float, Path | None]:
    """Write the frames (``frames``) with matplotlib's writers: the GIF with ``PillowWriter`` and, where
    ffmpeg exists and ``video`` is not False, an MP4 beside it with ``FFMpegWriter``. Each frame reaches the
    writers through a figure of the same pixel size holding it as an unscaled image, so the files hold the
    drawn pixels exactly; files move into place only when complete. Returns (seconds, the MP4 or None)."""
    t0 = time.time()
    width, height = (int(round(v)) for v in fig.bbox.size)
    carrier = figure(width, height)
    image = carrier.add_artist(Pixels())
    outputs = [(PillowWriter, path)]
    if video is not False and ffmpeg_available():
        outputs.append((FFMpegWriter, path.with_suffix(".mp4")))

    def write(tmps: list) -> None:
        writers = [kind(fps=fps) for kind, _ in outputs]
        with mpl.rc_context({"savefig.bbox": None}), ExitStack() as stack:
            for writer, tmp in zip(writers, tmps):
                stack.enter_context(writer.saving(carrier, tmp, DPI))
            for frame in frames(fig, live, draw, n_frames):
                image.rgba = frame
                for writer in writers:
                    writer.grab_frame()

    into_place([p for _, p in outputs], write)
    return time.time() - t0, (outputs[1][1] if len(outputs) > 1 else None)


def into_place(paths: list[Path], write, tmps: tuple = ()) -> None:
    """``write(temporary paths)``, then every file moves into place (``atomic_write``, nested)."""
    if not paths:
        write(list(tmps))
        return
    atomic_write(paths[0], lambda tmp: into_place(paths[1:], write, (*tmps, tmp)), suffix=paths[0].suffix)


def ffmpeg_available() -> bool:
    """Whether matplotlib can find ffmpeg (for the optional MP4 / HTML5 video)."""
    return bool(shutil.which(mpl.rcParams["animation.ffmpeg_path"]))


def footer(fig: Figure, note: str, profile: str, extra: str = "") -> None:
    style = {"fontsize": 7.5, "color": "#666666", "va": "bottom"}
    fig.text(0.01, 0.008, note, ha="left", **style)
    fig.text(0.99, 0.008, f"profile: {profile}" + (f" · {extra}" if extra else ""), ha="right", **style)


def spread(values: list[float], gap: float) -> np.ndarray:
    """Label heights near ``values``, in the same order, at least ``gap`` apart (so that tips never overlap)."""
    order = np.argsort(values, kind="stable")
    pos = np.asarray(values, float)[order]
    for k in range(1, len(pos)):
        pos[k] = max(pos[k], pos[k - 1] + gap)
    out = np.empty_like(pos)
    out[order] = pos
    return out


def crop(*grids: np.ndarray) -> tuple[slice, slice]:
    """Rows and columns holding any non-pad token of the given canvases."""
    nz = np.zeros_like(grids[0], bool)
    for g in grids:
        nz |= g != 0
    r, c = np.nonzero(nz)
    if not len(r):
        return slice(0, nz.shape[0]), slice(0, nz.shape[1])
    return slice(int(r.min()), int(r.max()) + 1), slice(int(c.min()), int(c.max()) + 1)

