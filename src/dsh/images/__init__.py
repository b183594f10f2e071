"""dsh.images: image input for vision models (which models take images, checking an image by its bytes, the
content block a model gets, its description and token estimate).

Standard library only (the daemon's ``initialize`` fast path uses :func:`takes_images`); the config file's
``images`` section is :mod:`dsh.images.config`. See ``README.md`` in this package and ``rfcs/0022-images.md``."""

from dsh.images._blocks import (
    DEFAULT_MAX_PER_PROMPT,
    MAX_IMAGE_BYTES,
    TYPICAL_IMAGE_TOKENS,
    ImageError,
    check_image,
    decode_base64,
    describe_image,
    image_block,
    image_tokens,
)
from dsh.images._sniff import FORMATS, ImageInfo, sniff
from dsh.images._vision import BUILTIN_VISION, builtin_vision, takes_images

__all__ = [
    "BUILTIN_VISION",
    "DEFAULT_MAX_PER_PROMPT",
    "FORMATS",
    "MAX_IMAGE_BYTES",
    "TYPICAL_IMAGE_TOKENS",
    "ImageError",
    "ImageInfo",
    "builtin_vision",
    "check_image",
    "decode_base64",
    "describe_image",
    "image_block",
    "image_tokens",
    "sniff",
    "takes_images",
]
