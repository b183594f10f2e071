"""dsh: an ACP agent harness built on a plugin kernel.

Importing ``dsh`` is deliberately cheap: it imports nothing but this module. Subpackages (``dsh.kernel``,
``dsh.services``, ``dsh.loop``, ``dsh.providers``) are imported by whoever uses them.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
