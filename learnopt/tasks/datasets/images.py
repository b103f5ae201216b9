"""Image arrays as the batches hold them: pixels in ``[0, 1]``, resized, channels set.

Pixels are ``uint8 / 255``; :func:`resize_images` is a bilinear resize (antialiased when
downsampling, the same as ``jax.image.resize(..., "linear")``; the identity at the native
size), in numpy, in chunks, so a whole split is resized once when it is loaded. Native
size ``uint8`` images stay ``uint8`` in memory (4x less) and are scaled per batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["resize_images"]

#: ``(images [N, H, W, C], labels [N])`` of one split.
Arrays = tuple[np.ndarray, np.ndarray]


def _resize_weights(in_size: int, out_size: int, antialias: bool) -> np.ndarray:
    """``[out_size, in_size]`` bilinear (triangle-kernel) interpolation weights."""
    inv_scale = in_size / out_size
    kernel_scale = max(inv_scale, 1.0) if antialias else 1.0
    centers = (np.arange(out_size) + 0.5) * inv_scale - 0.5
    dist = np.abs(centers[:, None] - np.arange(in_size)[None, :]) / kernel_scale
    weights = np.maximum(0.0, 1.0 - dist)
    total = weights.sum(axis=1, keepdims=True)
    return np.where(total > 0, weights / np.where(total > 0, total, 1.0), 0.0)


def _to_unit_float(images: np.ndarray) -> np.ndarray:
    if images.dtype == np.uint8:
        return np.divide(images, np.float32(255.0), dtype=np.float32)
    return images.astype(np.float32, copy=False)


def resize_images(
    images: np.ndarray, image_size: Sequence[int], *, antialias: bool = True
) -> np.ndarray:
    """Bilinear resize of ``[N, H, W, C]`` images to ``float32 [N, h, w, C]``.

    ``uint8`` input is first mapped to ``[0, 1]`` (``/ 255``); float input is used as
    is. Matches ``jax.image.resize(x, shape, "linear", antialias=antialias)``; at the
    native size it is the identity.

    Each output pixel is a weighted sum of input pixels with the triangle (tent) kernel
    ``max(0, 1 - |x - c| / s)`` around its centre ``c`` in input coordinates, weights
    normalized to sum to 1, ``s = max(H / h, 1)`` when antialiasing (wider when
    downsampling) else ``1``; rows and columns are resized separately.

    Args:
      images: ``[N, H, W, C]``, ``uint8`` pixels or floats.
      image_size: ``(h, w)``, the output's height and width.
      antialias: widen the kernel when downsampling (as ``jax.image.resize`` does).

    Returns:
      ``float32 [N, h, w, C]`` (clipped to ``[0, 1]`` for ``uint8`` input).
    """
    h, w = (int(s) for s in image_size)
    n, in_h, in_w, c = images.shape
    if (h, w) == (in_h, in_w):
        return _to_unit_float(images)
    wh = _resize_weights(in_h, h, antialias).astype(np.float32)
    ww = _resize_weights(in_w, w, antialias).astype(np.float32)
    out = np.empty((n, h, w, c), np.float32)
    chunk = max(1, (1 << 22) // (in_h * in_w * c))
    for start in range(0, n, chunk):
        x = _to_unit_float(images[start : start + chunk])
        m = len(x)
        y = np.matmul(wh, x.reshape(m, in_h, in_w * c)).reshape(m * h, in_w, c)
        out[start : start + m] = np.matmul(ww, y).reshape(m, h, w, c)
    if images.dtype == np.uint8:
        np.clip(out, 0.0, 1.0, out=out)
    return out


def _process(
    images: np.ndarray,
    labels: np.ndarray,
    image_size: tuple[int, int],
    stack_channels: int,
    antialias: bool,
    black_and_white: bool = False,
) -> Arrays:
    """One split's images as the iterators keep them: resized, then grayscale, then
    channels repeated ``stack_channels`` times; labels as ``int32``."""
    if tuple(images.shape[1:3]) != image_size:
        images = resize_images(images, image_size, antialias=antialias)
    elif images.dtype != np.uint8:
        images = images.astype(np.float32, copy=False)
    # Native-size uint8 images stay uint8 (4x less memory) and are scaled per batch.
    if black_and_white:  # the mean of the channels, in [0, 1]
        images = np.mean(_to_unit_float(images), axis=-1, keepdims=True, dtype=np.float32)
    if stack_channels > 1:
        images = np.repeat(images, stack_channels, axis=-1)
    return images, np.asarray(labels, np.int32)
