"""The built-in tools as the model sees them: names, kinds, descriptions and argument schemas, as plain data.

Generated from the pydantic argument models in :mod:`dsh.tools._builtin` and checked against them by a test
(``tests/tools/test_catalogue.py``): the plugin registers the tools from this table at start-up, and the tool
bodies, pydantic models included, are imported on the first call. An editor spawning ``dsh acp`` does not pay
for them before ``initialize`` is answered.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["CATALOGUE", "ToolSpec"]


class ToolSpec(NamedTuple):
    name: str
    kind: str
    description: str
    parameters: dict[str, Any]


CATALOGUE: tuple[ToolSpec, ...] = (
    ToolSpec(
        "read_file",
        "read",
        "Read a text file. Lines come numbered like `cat -n` (right-aligned number, a tab, the line); the numbers are not part of the file. Reads up to 2000 lines from `offset` (1-based); the output says where to continue when the file is longer.",
        {
            "properties": {
                "path": {
                    "description": "The file to read: relative to the working directory, or absolute.",
                    "title": "Path",
                    "type": "string",
                },
                "offset": {
                    "anyOf": [{"minimum": 1, "type": "integer"}, {"type": "null"}],
                    "default": None,
                    "description": "The 1-based line to start at (default 1).",
                    "title": "Offset",
                },
                "limit": {
                    "anyOf": [{"minimum": 1, "type": "integer"}, {"type": "null"}],
                    "default": None,
                    "description": "How many lines to read (default and maximum 2000).",
                    "title": "Limit",
                },
            },
            "required": ["path"],
            "title": "ReadFileArgs",
            "type": "object",
        },
    ),
    ToolSpec(
        "write_file",
        "edit",
        "Create a file or replace its whole content (parent directories are created). Prefer edit_file to change part of an existing file.",
        {
            "properties": {
                "path": {
                    "description": "The file to create or overwrite: relative to the working directory, or absolute.",
                    "title": "Path",
                    "type": "string",
                },
                "content": {
                    "description": "The complete new content of the file.",
                    "title": "Content",
                    "type": "string",
                },
            },
            "required": ["path", "content"],
            "title": "WriteFileArgs",
            "type": "object",
        },
    ),
    ToolSpec(
        "edit_file",
        "edit",
        "Replace exact text in a file: `old_string` must match the file exactly once (include enough surrounding lines to make it unique), or set `replace_all` to replace every occurrence. Returns a unified diff of the change.",
        {
            "properties": {
                "path": {
                    "description": "The file to edit: relative to the working directory, or absolute.",
                    "title": "Path",
                    "type": "string",
                },
                "old_string": {
                    "description": "The exact text to replace, including whitespace and indentation.",
                    "title": "Old String",
                    "type": "string",
                },
                "new_string": {"description": "The text to put in its place.", "title": "New String", "type": "string"},
                "replace_all": {
                    "default": False,
                    "description": "Replace every occurrence instead of exactly one.",
                    "title": "Replace All",
                    "type": "boolean",
                },
            },
            "required": ["path", "old_string", "new_string"],
            "title": "EditFileArgs",
            "type": "object",
        },
    ),
    ToolSpec(
        "list_files",
        "search",
        "List the files below a directory, recursively, as paths relative to the working directory, optionally filtered by a glob. Skips .git, node_modules, .venv and caches; at most 1000 entries.",
        {
            "properties": {
                "path": {
                    "default": ".",
                    "description": "The directory to list (default: the working directory).",
                    "title": "Path",
                    "type": "string",
                },
                "pattern": {
                    "anyOf": [{"type": "string"}, {"type": "null"}],
                    "default": None,
                    "description": 'A glob to filter by, e.g. "**/*.py", "src/**/test_*.py" or "*.md".',
                    "title": "Pattern",
                },
            },
            "title": "ListFilesArgs",
            "type": "object",
        },
    ),
    ToolSpec(
        "grep",
        "search",
        "Search file contents for a regular expression. Prints `path:line:text` for each matching line; at most 500 matches. Skips hidden, binary and ignored files and directories.",
        {
            "properties": {
                "pattern": {
                    "description": "A regular expression to search for, line by line.",
                    "title": "Pattern",
                    "type": "string",
                },
                "path": {
                    "default": ".",
                    "description": "The directory or file to search (default: the working directory).",
                    "title": "Path",
                    "type": "string",
                },
                "glob": {
                    "anyOf": [{"type": "string"}, {"type": "null"}],
                    "default": None,
                    "description": 'Only search files matching this glob, e.g. "*.py".',
                    "title": "Glob",
                },
                "ignore_case": {
                    "default": False,
                    "description": "Match case-insensitively.",
                    "title": "Ignore Case",
                    "type": "boolean",
                },
            },
            "required": ["pattern"],
            "title": "GrepArgs",
            "type": "object",
        },
    ),
    ToolSpec(
        "run_command",
        "execute",
        "Run a shell command (bash) in the working directory and return its combined stdout and stderr and its exit code. It has no input (stdin is empty), so interactive programs get end-of-file. It is killed after `timeout` seconds, with any background processes it started; output beyond 30000 bytes keeps the end.",
        {
            "properties": {
                "command": {"description": "The shell command to run (bash -c).", "title": "Command", "type": "string"},
                "timeout": {
                    "default": 120.0,
                    "description": "Seconds before the command is killed (default 120, maximum 600).",
                    "exclusiveMinimum": 0,
                    "maximum": 600.0,
                    "title": "Timeout",
                    "type": "number",
                },
                "cwd": {
                    "anyOf": [{"type": "string"}, {"type": "null"}],
                    "default": None,
                    "description": "The directory to run in, relative to the working directory (default: it).",
                    "title": "Cwd",
                },
            },
            "required": ["command"],
            "title": "RunCommandArgs",
            "type": "object",
        },
    ),
)
