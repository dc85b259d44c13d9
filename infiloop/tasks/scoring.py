"""Exact accuracy and wrong-cell counts (SPEC §5 "exact accuracy", §8 diagnostics).

A row is *exactly right* when every scored position matches its label; positions whose label is
``IGNORE_LABEL_ID`` (0) are never scored. Works on numpy arrays and on torch tensors (converted).
"""

from __future__ import annotations

import numpy as np

from .base import IGNORE_LABEL_ID


def _np(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _check(pred, labels):
    pred, labels = _np(pred), _np(labels)
    if pred.shape != labels.shape:
        raise ValueError(f"predictions {pred.shape} and labels {labels.shape} differ in shape")
    if pred.ndim == 1:
        pred, labels = pred[None], labels[None]
    return pred.reshape(len(pred), -1), labels.reshape(len(labels), -1)


def scored_mask(labels, mask=None, ignore_label_id: int = IGNORE_LABEL_ID) -> np.ndarray:
    """Positions that count: label not ignored, and inside ``mask`` when one is given."""
    labels = _np(labels).reshape(len(_np(labels)), -1)
    m = labels != ignore_label_id
    if mask is not None:
        m &= _np(mask).reshape(m.shape).astype(bool)
    return m


def wrong_cells(pred_tokens, labels, mask=None, ignore_label_id: int = IGNORE_LABEL_ID) -> np.ndarray:
    """Per row, the number of scored positions predicted wrong (``[N]`` int64).

    ``mask`` restricts the count, e.g. ``inputs == 1`` for the initially blank Sudoku cells.
    """
    pred, labels = _check(pred_tokens, labels)
    return ((pred != labels) & scored_mask(labels, mask, ignore_label_id)).sum(axis=1).astype(np.int64)


def exact_accuracy(pred_tokens, labels, ignore_label_id: int = IGNORE_LABEL_ID) -> np.ndarray:
    """Per row, whether the whole grid is right (``[N]`` bool); ``.mean()`` gives the accuracy."""
    return wrong_cells(pred_tokens, labels, None, ignore_label_id) == 0
