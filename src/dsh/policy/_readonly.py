"""The built-in read-only commands: an allow-list of commands and, per command, of the flags that only read.

Guarantees of :func:`operands_and_paths`:

* A command is read-only only when its name is in :data:`SPECS` (or is ``git`` with a listed subcommand) and
  every option is in that command's list, parsed the way the tool parses it (GNU ``getopt_long``): short options
  cluster (``-uo`` is ``-u -o``), a short option that takes a value takes the rest of its cluster or the next
  word, ``--name=value`` and ``--name value`` for long options that take one, ``--`` ends the options. A long
  option must be spelled in full: ``getopt_long`` accepts any unambiguous abbreviation (``sort --o=x`` is
  ``--output``), so an abbreviation of anything is not read-only. ``find`` takes its own expression syntax
  (primaries from a list). Anything else, a flag this module does not list, too many operands (``uniq IN
  OUT``), a value that is not allowed (``date 0101``), is not read-only: the caller asks.
* No flag that follows symbolic links while recursing is listed (``grep -R``, ``rg -L``, ``find -L``/``-follow``,
  ``ls -L``, ``tree -l``, ``du -L``, ``diff -r``, which follows them by default): a link inside the roots would
  take the command outside them, and only the paths named on the command line are checked.
* What it returns are the words the command reads as paths: its path operands and the values of its
  path-valued flags (``grep -f FILE``); a pattern operand (``grep PATTERN``, ``jq FILTER``) is not one.
  Commands whose operands are not paths (``seq``, ``tr``, ``basename``) return none.

Nothing here looks at redirections, expansions or the file system: :mod:`._shell` does the first two, the
caller resolves the paths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["SPECS", "Spec", "operands_and_paths"]


@dataclass(frozen=True)
class Spec:
    """One command's allow-list. *short*: getopt letters, ``:`` after a letter that takes a value, ``;`` after
    one whose value is a path. *long*: names, ``=`` after one that takes a value, ``=p`` a path, ``=?`` an
    optional value (only as ``--name=value``). *operands*: the most operands allowed (None: any); *paths*:
    operands are paths; *pattern*: the first operand is a pattern, not a path, unless one of *pattern_flags*
    was given; *numeric*: ``-5`` (a number as an option) is allowed; *check*: each operand must pass it."""

    short: str = ""
    long: str = ""
    operands: int | None = None
    paths: bool = True
    pattern: bool = False
    pattern_flags: frozenset[str] = frozenset()
    numeric: bool = False
    check: Callable[[str], bool] | None = None
    _short: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    _long: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = 0
        while index < len(self.short):
            letter = self.short[index]
            kind = self.short[index + 1] if index + 1 < len(self.short) and self.short[index + 1] in ":;" else ""
            self._short[letter] = {"": "flag", ":": "value", ";": "path"}[kind]
            index += 2 if kind else 1
        for item in self.long.split():
            name, _, kind = item.partition("=")
            self._long[name] = {"": "value", "p": "path", "?": "optional"}[kind] if "=" in item else "flag"


def _s(short: str = "", long: str = "", **options: object) -> Spec:
    return Spec(short, long, **options)  # type: ignore[arg-type]


_SUMS = _s("btcz", "binary text check tag quiet status strict warn ignore-missing zero")
_GREP = _s(
    "EFGPiyvwxclLoqsnhHbaIrzZUTe:f;m:A:B:C:d:D:",
    "extended-regexp fixed-strings basic-regexp perl-regexp ignore-case no-ignore-case invert-match word-regexp "
    "line-regexp count files-with-matches files-without-match only-matching quiet silent no-messages "
    "line-number no-filename with-filename byte-offset text recursive null-data null "
    "binary initial-tab line-buffered color=? colour=? regexp= file=p max-count= after-context= "
    "before-context= context= include= exclude= exclude-dir= label= binary-files= devices= directories=",
    pattern=True,
    pattern_flags=frozenset({"-e", "-f", "--regexp", "--file"}),
    numeric=True,
)
_DIFF_FLAGS = (
    "stat=? numstat shortstat name-only name-status cached staged patch no-patch unified= no-color color=? "
    "word-diff=? ignore-all-space ignore-space-change ignore-blank-lines ignore-space-at-eol minimal patience "
    "histogram diff-algorithm= summary check no-renames find-renames=? find-copies=? relative=? raw abbrev=? "
    "full-index binary src-prefix= dst-prefix= no-prefix exit-code quiet function-context ignore-submodules=? "
    "diff-filter= pickaxe-all text no-ext-diff no-textconv dirstat=? compact-summary merge-base "
)
_LOG_FLAGS = (
    "oneline graph decorate=? all max-count= since= until= after= before= author= committer= grep= format= "
    "pretty=? abbrev-commit no-merges merges first-parent reverse follow date= skip= topo-order date-order "
    "left-right cherry-pick walk-reflogs branches=? tags=? remotes=? no-decorate regexp-ignore-case "
    "all-match invert-grep show-signature no-abbrev-commit source "
)
_GIT: dict[str, Spec] = {
    "status": _s(
        "sbvzu",
        "short branch porcelain=? long verbose untracked-files=? ignored=? ignore-submodules=? null no-column "
        "ahead-behind no-ahead-behind renames no-renames find-renames=? show-stash",
    ),
    "diff": _s("puU:wbRzaWM", _DIFF_FLAGS, numeric=True),
    "log": _s("n:pugiS:G:", _LOG_FLAGS + _DIFF_FLAGS, numeric=True),
    "show": _s("pus", _LOG_FLAGS + _DIFF_FLAGS),
    "rev-parse": _s(
        "q",
        "show-toplevel git-dir abbrev-ref=? short=? verify is-inside-work-tree is-inside-git-dir show-prefix "
        "show-cdup symbolic symbolic-full-name quiet all branches=? tags=? remotes=? git-common-dir "
        "absolute-git-dir is-bare-repository is-shallow-repository show-superproject-working-tree",
    ),
    "ls-files": _s(
        "cdmoiksuzt",
        "cached deleted modified others ignored stage unmerged killed exclude-standard directory "
        "no-empty-directory error-unmatch full-name recurse-submodules abbrev=? eol format= exclude=",
    ),
    "blame": _s("L:ltsewpnfc", "porcelain line-porcelain date= show-number show-name root show-stats abbrev=?"),
    "shortlog": _s("nsec", "numbered summary email committer group= format="),
    "describe": _s(
        "",
        "tags all long abbrev=? always dirty=? broken=? exact-match contains match= exclude= first-parent candidates=",
    ),
    "branch": _s("arvl", "all remotes verbose list show-current no-color", operands=0),
    "remote": _s("v", "verbose", operands=0),
}
_GIT_GLOBAL = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs"})


def _date_operand(word: str) -> bool:
    return word.startswith("+")


SPECS: dict[str, Spec] = {
    "ls": _s(
        "1aAbBcCdDfFgGhHiklmnNopqQrRsStuUvxXZI:T:w:",
        "all almost-all author escape block-size= ignore-backups color=? directory dired classify=? file-type "
        "format= full-time group-directories-first no-group human-readable si dereference-command-line "
        "dereference-command-line-symlink-to-dir hide= hyperlink=? indicator-style= inode ignore= kibibytes "
        "numeric-uid-gid literal hide-control-chars show-control-chars quote-name quoting-style= "
        "reverse recursive size sort= time= time-style= tabsize= width= context zero",
    ),
    "cat": _s("AbeEnstTuv", "show-all number-nonblank show-ends number squeeze-blank show-tabs show-nonprinting"),
    "head": _s("c:n:qvz", "bytes= lines= quiet silent verbose zero-terminated", numeric=True),
    "tail": _s(
        "c:n:s:fFqvz",
        "bytes= lines= follow=? retry sleep-interval= quiet silent verbose zero-terminated",
        numeric=True,
    ),
    "wc": _s("cmlLw", "bytes chars lines max-line-length words files0-from=p total="),
    "pwd": _s("LP", operands=0),
    "cd": _s("LP", operands=1, check=lambda word: word != "-"),
    "true": _s(paths=False),
    "false": _s(paths=False),
    "which": _s("a", paths=False),
    "type": _s("afptP", paths=False),
    "whoami": _s(operands=0),
    "id": _s("gGnruz", "group groups name real user zero", paths=False),
    "date": _s(
        "uRId:",
        "utc universal rfc-email iso-8601=? rfc-3339= date= debug",
        paths=False,
        check=_date_operand,
    ),
    "uname": _s(
        "asnrvmpio",
        "all kernel-name nodename kernel-release kernel-version machine processor hardware-platform operating-system",
        operands=0,
    ),
    "hostname": _s("fsiIdAa", "fqdn long short ip-address all-ip-addresses domain all-fqdns alias", operands=0),
    "file": _s(
        "bchiLkNprsz0e:F:P:E",
        "brief mime mime-type mime-encoding dereference no-dereference keep-going raw special-files "
        "uncompress print0 exclude= separator= parameter= no-pad no-buffer preserve-date extension apple",
    ),
    "stat": _s("Lftc:", "dereference file-system terse format= printf= cached="),
    "du": _s(
        "abcDhHklmPsSx0d:B:t:",
        "all apparent-size block-size= bytes total dereference-args human-readable si inodes kibibytes "
        "count-links max-depth= null no-dereference separate-dirs summarize threshold= time=? "
        "time-style= exclude= one-file-system",
    ),
    "df": _s(
        "ahHiklPTt:x:B:",
        "all block-size= human-readable si inodes local no-sync sync output=? portability print-type type= "
        "exclude-type= total",
    ),
    "tree": _s(
        "adfxiqNQpugshDFvtcUrCnASL:P:I:",
        "noreport dirsfirst filesfirst gitignore charset= filelimit= du prune matchdirs ignore-case "
        "inodes device sort= timefmt= noreport info",
    ),
    "basename": _s("as:z", "multiple suffix= zero", paths=False),
    "dirname": _s("z", "zero", paths=False),
    "realpath": _s(
        "emLPqsz",
        "canonicalize-existing canonicalize-missing logical physical quiet strip no-symlinks "
        "zero relative-to=p relative-base=p",
    ),
    "readlink": _s(
        "femnqsvz", "canonicalize canonicalize-existing canonicalize-missing no-newline quiet silent verbose zero"
    ),
    "uniq": _s(
        "cdDiuzf:s:w:",
        "count repeated all-repeated=? ignore-case unique zero-terminated skip-fields= skip-chars= check-chars= "
        "group=?",
        operands=1,
    ),
    "cut": _s(
        "b:c:f:d:snz",
        "bytes= characters= fields= delimiter= complement only-delimited output-delimiter= zero-terminated",
    ),
    "tr": _s("cCdst", "complement delete squeeze-repeats truncate-set1", paths=False),
    "nl": _s(
        "pb:d:f:h:i:l:n:s:v:w:",
        "body-numbering= section-delimiter= footer-numbering= header-numbering= line-increment= "
        "join-blank-lines= number-format= no-renumber number-separator= starting-line-number= number-width=",
    ),
    "diff": _s(
        "qsucenyNabwBiEZtTdpU:C:W:x:",
        "brief report-identical-files unified=? context=? ed normal side-by-side new-file "
        "unidirectional-new-file text ignore-all-space ignore-space-change ignore-blank-lines ignore-case "
        "ignore-tab-expansion ignore-trailing-space strip-trailing-cr initial-tab minimal speed-large-files "
        "show-c-function show-function-line= label= exclude= color=? width= expand-tabs suppress-common-lines "
        "left-column from-file=p to-file=p no-dereference",
    ),
    "cmp": _s("blsi:n:", "print-bytes verbose quiet silent ignore-initial= bytes="),
    "comm": _s("123z", "check-order nocheck-order output-delimiter= total zero-terminated"),
    "grep": _GREP,
    "egrep": _GREP,
    "fgrep": _GREP,
    "column": _s("txns:c:o:", "table separator= output-width= fillrows output-separator= table-noheadings"),
    "seq": _s("wf:s:", "equal-width format= separator=", paths=False, numeric=True),
    "sha256sum": _SUMS,
    "sha1sum": _SUMS,
    "sha512sum": _SUMS,
    "md5sum": _SUMS,
    "jq": _s(
        "rjcnesaSCMR",
        "raw-output join-output compact-output null-input exit-status slurp ascii-output sort-keys color-output "
        "monochrome-output raw-input tab indent= seq stream",
        pattern=True,
    ),
    "rg": _s(
        "iSsvwxclnNHIoquFPU0.A:B:C:e:f;g:t:T:m:M:d:j:r:E:",
        "ignore-case smart-case case-sensitive invert-match word-regexp line-regexp count count-matches "
        "files-with-matches files-without-match line-number no-line-number with-filename no-filename "
        "only-matching quiet unrestricted fixed-strings pcre2 multiline multiline-dotall hidden no-ignore "
        "no-ignore-vcs no-ignore-dot no-ignore-global no-ignore-parent no-ignore-exclude no-ignore-files "
        "files type-list stats trim json vimgrep heading no-heading column no-messages passthru text null "
        "null-data byte-offset sort= sortr= color= colors= glob= iglob= type= type-not= max-count= "
        "max-depth= max-columns= max-filesize= context= after-context= before-context= regexp= file=p "
        "replace= threads= encoding= field-match-separator= field-context-separator= path-separator= "
        "context-separator= no-config max-columns-preview crlf binary no-binary one-file-system",
        pattern=True,
        pattern_flags=frozenset({"-e", "-f", "--regexp", "--file", "--files", "--type-list"}),
    ),
    "sort": _s(
        "bdfgiMhnRrVcCmsuzk:t:S:",
        "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting month-sort "
        "human-numeric-sort numeric-sort random-sort reverse version-sort sort= check=? merge stable unique "
        "zero-terminated key= field-separator= buffer-size= parallel= debug",
    ),
}
_FIND_LEADING = frozenset({"-H", "-P"})
_FIND_FLAGS = frozenset(
    {
        "-print", "-print0", "-ls", "-prune", "-quit", "-empty", "-readable", "-writable", "-executable",
        "-true", "-false", "-not", "-a", "-o", "-and", "-or", "!", "(", ")", ",", "-depth", "-xdev",
        "-mount", "-noleaf", "-daystart", "-nouser", "-nogroup", "-ignore_readdir_race",
    }
)  # fmt: skip
_FIND_VALUES = frozenset(
    {
        "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-type",
        "-xtype", "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-perm", "-user", "-group",
        "-uid", "-gid", "-maxdepth", "-mindepth", "-links", "-inum", "-regextype", "-printf", "-lname",
        "-ilname", "-used", "-fstype",
    }
)  # fmt: skip
_FIND_PATHS = frozenset({"-newer", "-anewer", "-cnewer", "-samefile"})


def operands_and_paths(words: Sequence[str]) -> list[str] | None:
    """The paths the command *words* reads when it is read-only by the allow-list, else None (module
    docstring)."""
    if not words:
        return None
    name, args = words[0], list(words[1:])
    if name == "find":
        return _find(args)
    if name == "git":
        while args and args[0] in _GIT_GLOBAL:
            args = args[1:]
        if not args or args[0] not in _GIT:
            return None
        return _getopt(_GIT[args[0]], args[1:])
    spec = SPECS.get(name)
    if spec is None:
        return None
    return _getopt(spec, args)


def _getopt(spec: Spec, args: Sequence[str]) -> list[str] | None:
    operands: list[str] = []
    paths: list[str] = []
    given: set[str] = set()
    index = 0
    options_done = False
    while index < len(args):
        word = args[index]
        index += 1
        if options_done or word == "-" or not word.startswith("-"):
            operands.append(word)
            continue
        if word == "--":
            options_done = True
            continue
        if spec.numeric and word[1:].isdigit():
            continue
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            kind = spec._long.get(name)
            if kind is None or (kind == "flag" and eq):
                return None  # not listed, an abbreviation, or a value given to a flag
            given.add("--" + name)
            if kind in ("value", "path") and not eq:
                if index >= len(args):
                    return None
                value = args[index]
                index += 1
            if kind == "path" or (kind == "optional" and eq and _looks_like_path(value)):
                paths.append(value)
            continue
        cluster = word[1:]
        position = 0
        while position < len(cluster):
            letter = cluster[position]
            kind = spec._short.get(letter)
            if kind is None:
                return None
            given.add("-" + letter)
            position += 1
            if kind == "flag":
                continue
            value = cluster[position:]
            if not value:
                if index >= len(args):
                    return None
                value = args[index]
                index += 1
            if kind == "path":
                paths.append(value)
            break
    if spec.operands is not None and len(operands) > spec.operands:
        return None
    if spec.check is not None and not all(spec.check(operand) for operand in operands):
        return None
    if spec.pattern and operands and not (given & spec.pattern_flags):
        operands = operands[1:]
    if spec.paths:
        paths.extend(operands)
    return paths


def _looks_like_path(value: str) -> bool:
    return "/" in value or value.startswith(("~", "."))


def _find(args: Sequence[str]) -> list[str] | None:
    paths: list[str] = []
    index = 0
    while index < len(args) and args[index] in _FIND_LEADING:
        index += 1
    while index < len(args) and not args[index].startswith("-") and args[index] not in ("!", "(", ")", ","):
        paths.append(args[index])  # the starting points
        index += 1
    while index < len(args):
        word = args[index]
        index += 1
        if word in _FIND_FLAGS:
            continue
        if word in _FIND_VALUES or word in _FIND_PATHS:
            if index >= len(args):
                return None
            if word in _FIND_PATHS:
                paths.append(args[index])
            index += 1
            continue
        if word.startswith("-newer") and len(word) == 8:  # -newerXY REFERENCE
            if index >= len(args):
                return None
            paths.append(args[index])
            index += 1
            continue
        return None
    return paths or ["."]
