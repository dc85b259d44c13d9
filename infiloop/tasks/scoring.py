"""Exact accuracy and wrong-cell counts (the paper's metric, exact accuracy, and the wrong-cell diagnostics).

A *wrong cell* is a scored position predicted differently from its label (:func:`wrong_mask`, the one
definition); positions whose label is ``IGNORE_LABEL_ID`` (0) are never scored. A row is *exactly right*
when it has no wrong cell. :func:`wrong_cells` and :func:`exact_accuracy` take numpy arrays or torch
tensors (converted to numpy); :func:`count_wrong` keeps torch tensors on their device (evaluation and
training count on the model's device).
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


def wrong_mask(pred, labels, ignore_label_id: int = IGNORE_LABEL_ID):
    """Wrong cells, element-wise: scored (label not ``ignore_label_id``) and predicted differently from the
    label. numpy arrays or torch tensors alike (a tensor stays on its device)."""
    return (pred != labels) & (labels != ignore_label_id)


def count_wrong(pred, labels, ignore_label_id: int = IGNORE_LABEL_ID):
    """Wrong cells per row (summed over the last axis), in the arrays' own kind: a torch tensor on its device
    for tensors (``[B]`` int64), no conversion."""
    return wrong_mask(pred, labels, ignore_label_id).sum(-1)


def wrong_cells(pred_tokens, labels, mask=None, ignore_label_id: int = IGNORE_LABEL_ID) -> np.ndarray:
    """Per row, the number of scored positions predicted wrong (``[N]`` int64, numpy).

    ``mask`` restricts the count, e.g. ``inputs == 1`` for the initially blank Sudoku cells.
    """
    pred, labels = _check(pred_tokens, labels)
    wrong = wrong_mask(pred, labels, ignore_label_id)
    if mask is not None:
        wrong &= _np(mask).reshape(wrong.shape).astype(bool)
    return wrong.sum(axis=1).astype(np.int64)


def exact_accuracy(pred_tokens, labels, ignore_label_id: int = IGNORE_LABEL_ID) -> np.ndarray:
    """Per row, whether the whole grid is right (``[N]`` bool); ``.mean()`` gives the accuracy."""
    return wrong_cells(pred_tokens, labels, None, ignore_label_id) == 0
