"""The built-in tools as the model sees them: names, kinds, descriptions and argument schemas, as plain data.

Generated from the pydantic argument models in :mod:`dsh.tools._builtin` and checked against them by a test
(``tests/tools/test_catalogue.py``): the plugin registers the tools from this table at start-up, and the tool
bodies, pydantic models included, are imported on the first call. An editor spawning ``dsh acp`` does not pay
for them before ``initialize`` is answered.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["ASKS", "CATALOGUE", "CONCURRENT", "ToolSpec"]

ASKS = frozenset({"fetch_url"})
"""Tools a gate asks about like a command (``meta["asks"]``): a fetch reaches the network."""

CONCURRENT = frozenset({"read_file", "list_files", "glob", "grep"})
"""The tools that only read local files and never ask: the loop runs consecutive calls of them at once (the
same set as :data:`dsh.tools._builtin.CONCURRENT`, checked by a test)."""


class ToolSpec(NamedTuple):
    name: str
    kind: str
    description: str
    parameters: dict[str, Any]


CATALOGUE: tuple[ToolSpec, ...] = (
    ToolSpec(
        "read_file",
        "read",
        (
            "Read a text file. Lines come numbered like `cat -n` (right-aligned number, a tab, the line); the "
            "numbers are not part of the file. Reads up to 2000 lines and at most 30000 characters from "
            "`offset` (1-based, `limit` lines); lines longer than 2000 characters are cut. The output says "
            "how many lines remain and the offset to read on from. A directory gives its listing; an image "
            "file (PNG, JPEG, GIF, WebP) comes back as the image itself (its description when you cannot see "
            "images); a notebook (.ipynb) as its cells and outputs (`offset`/`limit` count cells); other "
            "binary files are refused. Read several files in one step when you need them: independent reads "
            "run at the same time."
        ),
        {
            "properties": {
                "path": {
                    "description": "The file to read: relative to the working directory, or absolute.",
                    "type": "string",
                },
                "offset": {"description": "The 1-based line to start at (default 1).", "minimum": 1, "type": "integer"},
                "limit": {
                    "description": "How many lines to read (default and maximum 2000; at "
                    "most 30000 characters come back per call).",
                    "minimum": 1,
                    "type": "integer",
                },
            },
            "required": ["path"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "write_file",
        "edit",
        (
            "Create a file or replace its whole content (parent directories are created). An existing file "
            "must have been read in this session first, and not changed since. Prefer edit_file to change "
            "part of a file; never write placeholders such as `// ... rest of the code ...`: write the "
            "complete text."
        ),
        {
            "properties": {
                "path": {
                    "description": "The file to create or overwrite: relative to the working directory, or absolute.",
                    "type": "string",
                },
                "content": {"description": "The complete new content of the file.", "type": "string"},
            },
            "required": ["path", "content"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "edit_file",
        "edit",
        (
            "Replace text in a file (read it first in this session). `old_string` must match exactly one "
            "place: include enough surrounding lines to make it unique, or set `replace_all`. A match that "
            "differs only in trailing whitespace, indentation, runs of blanks, blank edge lines, Unicode "
            "spaces, typographic quotes and dashes or escaped newlines and quotes is accepted when it is "
            "unique (the result says so); nothing merely similar is applied: a miss shows the closest lines "
            "with their numbers. For several changes to one file pass `edits: [{old_string, new_string, "
            "replace_all?}, ...]` instead: applied in order, written once, nothing written if one fails. Line "
            "endings are kept. Returns a unified diff."
        ),
        {
            "properties": {
                "path": {
                    "description": "The file to edit: relative to the working directory, or absolute.",
                    "type": "string",
                },
                "old_string": {
                    "description": "The text to replace, as in the file (whitespace and indentation included).",
                    "type": "string",
                },
                "new_string": {"description": "The text to put in its place.", "type": "string"},
                "replace_all": {
                    "default": False,
                    "description": "Replace every occurrence instead of exactly one.",
                    "type": "boolean",
                },
                "edits": {
                    "description": "Several changes to the same file, applied in order and "
                    "written once (instead of old_string/new_string); if one "
                    "fails, nothing is written.",
                    "items": {
                        "properties": {
                            "old_string": {
                                "description": "The text to "
                                "replace, as in "
                                "the file "
                                "(whitespace and "
                                "indentation "
                                "included).",
                                "type": "string",
                            },
                            "new_string": {"description": "The text to put in its place.", "type": "string"},
                            "replace_all": {
                                "default": False,
                                "description": "Replace every occurrence instead of exactly one.",
                                "type": "boolean",
                            },
                        },
                        "required": ["old_string", "new_string"],
                        "type": "object",
                        "additionalProperties": False,
                    },
                    "type": "array",
                },
            },
            "required": ["path"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "notebook_edit",
        "edit",
        (
            "Change one cell of a Jupyter notebook (read it first): replace its source (a code cell's outputs "
            "are cleared), insert a cell at index `cell` (or after `cell_id`), or delete it. Cells count from "
            "0, as read_file shows them; the rest of the notebook is kept."
        ),
        {
            "properties": {
                "path": {"description": "The .ipynb file.", "type": "string"},
                "edit_mode": {
                    "default": "replace",
                    "description": "replace (default), insert or delete.",
                    "enum": ["replace", "insert", "delete"],
                    "type": "string",
                },
                "cell": {"description": "The cell's index (insert: the new cell's).", "minimum": 0, "type": "integer"},
                "cell_id": {"description": "The cell's id instead of its index.", "type": "string"},
                "new_source": {"description": "The cell's complete new source.", "type": "string"},
                "cell_type": {
                    "description": "insert: default code; replace: default unchanged.",
                    "enum": ["code", "markdown", "raw"],
                    "type": "string",
                },
            },
            "required": ["path"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "list_files",
        "search",
        (
            "List one directory: its subdirectories (ending in `/`) then its files, relative to the working "
            "directory. Skips what .gitignore ignores, .git, node_modules, virtualenvs and caches. To find "
            "files below it by name, use glob."
        ),
        {
            "properties": {
                "path": {
                    "default": ".",
                    "description": "The directory to list (default: the working directory).",
                    "type": "string",
                }
            },
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "glob",
        "search",
        (
            "Find files by path pattern (`src/**/*.py`, `**/test_*.ts`, `*.md`) below `path`, most recently "
            "modified first; at most 100, with a note saying how many more matched. Skips what .gitignore "
            "ignores, hidden directories (unless the pattern names one), node_modules and caches."
        ),
        {
            "properties": {
                "pattern": {
                    "description": 'A glob over paths, e.g. "src/**/*.py", "**/test_*.py" or "*.md".',
                    "type": "string",
                },
                "path": {
                    "default": ".",
                    "description": "The directory to search below (default: the working directory).",
                    "type": "string",
                },
            },
            "required": ["pattern"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "grep",
        "search",
        (
            "Search file contents for a regular expression (ripgrep). By default returns the names of "
            "matching files, most recently modified first; `output_mode: content` gives `path:line:text` "
            "lines (with `context`, `-A`, `-B`, `-C` lines around, as `path-line-text`), `count` gives "
            "matches per file. Narrow with `glob`, `type`, `path`; `head_limit` caps the entries. Skips "
            "hidden, binary and ignored files. Use this, not grep or rg in run_command."
        ),
        {
            "properties": {
                "pattern": {
                    "description": "A regular expression (Rust/Python syntax) to search for, line by line.",
                    "type": "string",
                },
                "path": {
                    "default": ".",
                    "description": "The directory or file to search (default: the working directory).",
                    "type": "string",
                },
                "output_mode": {
                    "default": "files_with_matches",
                    "description": "files_with_matches (default): the names of "
                    "matching files; content: the matching lines as "
                    "path:line:text; count: path:number of matching "
                    "lines.",
                    "enum": ["files_with_matches", "content", "count"],
                    "type": "string",
                },
                "head_limit": {
                    "description": "At most this many entries (default 100 files or counts, 250 lines of content).",
                    "minimum": 1,
                    "type": "integer",
                },
                "context": {
                    "description": "Lines of context around each match (content mode).",
                    "maximum": 50,
                    "minimum": 0,
                    "type": "integer",
                },
                "-B": {
                    "description": "Lines of context before each match (content mode).",
                    "maximum": 50,
                    "minimum": 0,
                    "type": "integer",
                },
                "-A": {
                    "description": "Lines of context after each match (content mode).",
                    "maximum": 50,
                    "minimum": 0,
                    "type": "integer",
                },
                "-C": {
                    "description": "Lines of context before and after (same as context).",
                    "maximum": 50,
                    "minimum": 0,
                    "type": "integer",
                },
                "fixed_strings": {
                    "default": False,
                    "description": "Take the pattern as literal text, not a regex.",
                    "type": "boolean",
                },
                "case_insensitive": {"default": False, "description": "Match case-insensitively.", "type": "boolean"},
                "glob": {"description": 'Only search files matching this glob, e.g. "*.py".', "type": "string"},
                "type": {
                    "description": 'Only search files of this type, e.g. "py", "ts", "rust", "md".',
                    "type": "string",
                },
            },
            "required": ["pattern"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "run_command",
        "execute",
        (
            "Run a shell command (bash) in the working directory and return its combined stdout and stderr "
            "and its exit code. It has no input (stdin is empty), so interactive programs get end-of-file. It "
            "is killed after `timeout` seconds, with any processes it started; for a server or a watcher set "
            "`background` instead. Long output keeps its beginning and its end, with the whole of it saved to "
            "a file the result names. Use it for builds, tests, git and programs, not to read, search or edit "
            "files (use the dedicated tools)."
        ),
        {
            "properties": {
                "command": {"description": "The shell command to run (bash -c).", "type": "string"},
                "timeout": {
                    "default": 120.0,
                    "description": "Seconds before the command is killed (default 120, maximum 600).",
                    "exclusiveMinimum": 0,
                    "maximum": 600.0,
                    "type": "number",
                },
                "cwd": {
                    "description": "The directory to run in, relative to the working directory (default: it).",
                    "type": "string",
                },
                "background": {
                    "default": False,
                    "description": "Start it in the background and return at once with "
                    "an id and its first output (for servers and "
                    "watchers); read more with command_output, stop it "
                    "with command_kill.",
                    "type": "boolean",
                },
            },
            "required": ["command"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "delete_file",
        "delete",
        (
            "Delete one file (not a directory, not a symbolic link). The user sees what is removed and can "
            "undo it with /rewind; use this rather than rm in run_command, whose changes cannot be undone."
        ),
        {
            "additionalProperties": False,
            "properties": {
                "path": {
                    "description": "The file to delete: relative to the working directory, or absolute.",
                    "type": "string",
                }
            },
            "required": ["path"],
            "type": "object",
        },
    ),
    ToolSpec(
        "command_output",
        "read",
        (
            "Read what a background command (run_command with background) printed since the last read, and "
            "whether it is still running (with its exit code once it stopped). `wait` waits up to that many "
            "seconds for new output first, instead of polling in a loop."
        ),
        {
            "properties": {
                "id": {"description": "The id run_command gave the background command, e.g. bg1.", "type": "string"},
                "wait": {
                    "default": 0,
                    "description": "Seconds to wait for new output (or for the command to end) when there is none yet.",
                    "maximum": 60,
                    "minimum": 0,
                    "type": "number",
                },
            },
            "required": ["id"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "command_wait",
        "read",
        (
            "Wait until a background command (run_command with background) ends, at most `timeout` seconds, then "
            "return its exit and what it printed since the last read; the result says whether it ended or the wait "
            "timed out. Use it when you need the result before going on; otherwise carry on: a command that ends "
            "while you work is reported to you at your next step."
        ),
        {
            "properties": {
                "id": {"description": "The id run_command gave the background command, e.g. bg1.", "type": "string"},
                "timeout": {
                    "default": 60,
                    "description": "Seconds to wait at most; the result says whether the command ended or the wait "
                    "timed out.",
                    "maximum": 600,
                    "minimum": 0,
                    "type": "number",
                },
            },
            "required": ["id"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "command_kill",
        "execute",
        "Stop a background command (and every process it started).",
        {
            "properties": {
                "id": {"description": "The id run_command gave the background command, e.g. bg1.", "type": "string"}
            },
            "required": ["id"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "fetch_url",
        "fetch",
        (
            "Fetch a web page (http or https GET) as Markdown: documentation the user gave you or the project "
            "points to. Not for private or local addresses. Long pages are cut, with the whole text saved to "
            "a file."
        ),
        {
            "properties": {
                "url": {
                    "description": "The http(s) URL to fetch, one the user gave or the project names.",
                    "type": "string",
                }
            },
            "required": ["url"],
            "type": "object",
            "additionalProperties": False,
        },
    ),
)
