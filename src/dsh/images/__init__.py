"""dsh.images: image input for vision models (which models take images, checking an image by its bytes, the
content block a model gets, its description and token estimate).

Standard library only. The daemon's ``initialize`` fast path calls :func:`takes_images` before the application
exists, so importing this package loads only :mod:`._vision`; the other names are loaded on first use (PEP 562).
The config file's ``images`` section is :mod:`dsh.images.config`. See ``README.md`` in this package and
``rfcs/0022-images.md``."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from dsh.images._vision import takes_images

if TYPE_CHECKING:
    from dsh.images._blocks import (
        DEFAULT_MAX_PER_PROMPT,
        MAX_IMAGE_BYTES,
        ImageError,
        canonical_bytes,
        check_image,
        decode_base64,
        describe_image,
        image_block,
        image_tokens,
    )
    from dsh.images._notes import without_images

__all__ = [
    "DEFAULT_MAX_PER_PROMPT",
    "MAX_IMAGE_BYTES",
    "ImageError",
    "canonical_bytes",
    "check_image",
    "decode_base64",
    "describe_image",
    "image_block",
    "image_tokens",
    "takes_images",
    "without_images",
]

_LAZY = {
    "without_images": "dsh.images._notes",
    **dict.fromkeys(
        (
            "DEFAULT_MAX_PER_PROMPT",
            "MAX_IMAGE_BYTES",
            "ImageError",
            "canonical_bytes",
            "check_image",
            "decode_base64",
            "describe_image",
            "image_block",
            "image_tokens",
        ),
        "dsh.images._blocks",
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dsh.images' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
