"""Files dsh reads on its own (command files, ``AGENTS.md``, sub-agent files): contained, capped reads and a
front matter loader that cannot be turned against the daemon.

* :func:`read_inside` reads a regular file whose real path lies inside one of the given roots, at most a given
  number of bytes; anything else (a symlink out of the project, ``/proc/self/environ``, a FIFO, a device) raises
  :class:`FileRefused` without the file being read.
* :func:`split_front_matter` / :func:`load_front_matter` parse a leading ``---`` YAML block with a loader that
  refuses aliases and anchors, nesting deeper than :data:`MAX_DEPTH` and text larger than
  :data:`MAX_FRONT_MATTER_BYTES`; every failure is a :class:`FrontMatterError` (a ``ValueError``).

Importing this package is cheap: PyYAML loads on the first front matter parsed.
"""

from dsh.ownfiles._dirs import markdown_files, project_dirs, user_config_dir
from dsh.ownfiles._frontmatter import FrontMatterError, load_front_matter, split_front_matter
from dsh.ownfiles._read import FileRefused, read_inside

__all__ = [
    "FileRefused",
    "FrontMatterError",
    "load_front_matter",
    "markdown_files",
    "project_dirs",
    "read_inside",
    "split_front_matter",
    "user_config_dir",
]
