"""``python -m dsh`` is the ``dsh`` command."""

from dsh._entry import main

main()
