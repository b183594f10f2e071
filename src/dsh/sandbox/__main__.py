"""``python -m dsh.sandbox``: see :mod:`dsh.sandbox._exec`."""

from dsh.sandbox._exec import main

main()
