"""``python -m dsh`` is the ``dsh`` command."""

from dsh.cli import main

main()
