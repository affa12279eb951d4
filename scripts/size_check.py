#!/usr/bin/env python3
"""The size budget of the workspace's Rust sources (STYLE §9): no `.rs` file over 500 lines and
no function over 70 lines, except the entries of `scripts/size-allowlist.txt`.

    scripts/size_check.py            check the workspace (CI runs this before the tests)
    scripts/size_check.py --all      list every offender, allowed or not (to prune the list)

Prints one line per offender, `path:line: fn name is N lines (max 70)` or
`path:1: file is N lines (max 500)`, and exits 1 when an offender is not on the allow-list or
an allow-list entry matches no offender any more (it is stale: delete it), 0 otherwise.

Measuring (INV-1..3 are what the unit tests in `test_size_check.py` pin down):
- INV-1: a function is counted from the line of its `fn` keyword to the line of its closing
  brace, both included; attributes and doc comments above it are not counted.
- INV-2: braces and `fn` keywords count only in code: comments (nested block comments too),
  string, byte-string, C-string and raw-string literals (any number of `#`), char and byte
  literals are blanked out first; a lifetime or label (`'a`, `'static`) is not a char literal.
- INV-3: a function nested in another is measured on its own (its lines also count for the
  outer one); closures are not functions; declarations without a body (trait methods, extern
  fns), `fn` pointer types and macro fragments (`fn $name`) are not measured.

The allow-list has one entry per line: `path` (the file's length) or `path::fn_name` (every
function of that name in the file), then `#` and the reason; blank lines and lines starting
with `#` are comments. Paths are relative to the workspace root, with `/`. Directories named
`target` and hidden directories are not searched.
"""

import argparse
import bisect
import os
import re
import sys
from dataclasses import dataclass

MAX_FILE_LINES = 500
MAX_FN_LINES = 70

_IDENT_START = re.compile(r"[A-Za-z_]")
_IDENT = re.compile(r"[A-Za-z0-9_]+")
_RAW_STRING_OPEN = re.compile(r'(#*)"')
_FN_NAME = re.compile(r"(?<![A-Za-z0-9_#$])fn\s+(?:r#)?([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Function:
    """One function with a body: its name, the line of `fn` and of its closing brace."""

    name: str
    first_line: int
    last_line: int

    @property
    def lines(self) -> int:
        return self.last_line - self.first_line + 1


@dataclass(frozen=True)
class Offender:
    """A file or function over budget; `key` is how the allow-list names it."""

    key: str
    message: str


class SourceError(Exception):
    """A source file whose braces or literals do not close."""


class AllowListError(Exception):
    """A malformed allow-list line."""


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _skip_quoted(src: str, i: int) -> int:
    """The index after the closing `"` of a string whose body starts at `i`."""
    n = len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        else:
            i += 1
    raise SourceError("unterminated string literal")


def _skip_block_comment(src: str, i: int) -> int:
    """The index after the `*/` closing the (nestable) block comment opening at `i`."""
    depth, i, n = 0, i, len(src)
    while i < n:
        if src.startswith("/*", i):
            depth += 1
            i += 2
        elif src.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise SourceError("unterminated block comment")


def _char_literal_end(src: str, i: int):
    """At a `'`: the index after the char literal starting there, or None for a lifetime or
    label (`'a`, `'static`, `'outer:`)."""
    if src.startswith("\\", i + 1):
        end = src.find("'", i + 3)
        if end < 0:
            raise SourceError("unterminated char literal")
        return end + 1
    if i + 2 < len(src) and src[i + 2] == "'" and src[i + 1] != "\n":
        return i + 3
    return None


def blank_non_code(src: str) -> str:
    """`src` with every comment and string/char literal replaced by spaces (newlines kept, so
    line numbers and lengths are unchanged) (INV-2)."""
    out = list(src)

    def blank(start: int, end: int) -> None:
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    i, n = 0, len(src)
    while i < n:
        c = src[i]
        end = None
        if src.startswith("//", i):
            newline = src.find("\n", i)
            end = n if newline < 0 else newline
        elif src.startswith("/*", i):
            end = _skip_block_comment(src, i)
        elif c == '"':
            end = _skip_quoted(src, i + 1)
        elif c == "'":
            end = _char_literal_end(src, i)
            if end is None:
                i += 1
                continue
        elif _IDENT_START.match(c):
            word = _IDENT.match(src, i).group(0)
            after = i + len(word)
            raw = _RAW_STRING_OPEN.match(src, after) if word in ("r", "br", "cr") else None
            if raw:
                closing = '"' + raw.group(1)
                close_at = src.find(closing, raw.end())
                if close_at < 0:
                    raise SourceError("unterminated raw string literal")
                end = close_at + len(closing)
            elif word in ("b", "c") and src.startswith('"', after):
                end = _skip_quoted(src, after + 1)
            elif word == "b" and src.startswith("'", after):
                end = _char_literal_end(src, after)
            if end is None:
                i = after
                continue
        else:
            i += 1
            continue
        blank(i, end)
        i = end
    return "".join(out)


def _body_open(code: str, i: int):
    """From just after a function's name: the index of its body's `{`, or None when the
    declaration ends (`;`) without one. Parentheses, brackets and angle brackets (not the `>`
    of `->`) nest, so a brace of a const generic argument is not the body."""
    depth, n = 0, len(code)
    while i < n:
        c = code[i]
        if c in "([<":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ">" and code[i - 1] != "-":
            depth -= 1
        elif c == "{" and depth == 0:
            return i
        elif c == ";" and depth == 0:
            return None
        elif c == "{":
            close = _matching_brace(code, i)
            i = close
        i += 1
    return None


def _matching_brace(code: str, i: int) -> int:
    """The index of the `}` matching the `{` at `i`."""
    depth = 0
    for k in range(i, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    raise SourceError("unbalanced braces")


def functions(src: str) -> list:
    """Every function with a body in `src`, in source order (INV-1, INV-3)."""
    code = blank_non_code(src)
    line_starts = [0] + [m.end() for m in re.finditer("\n", code)]

    def line_of(index: int) -> int:
        return bisect.bisect_right(line_starts, index)

    found = []
    for m in _FN_NAME.finditer(code):
        body = _body_open(code, m.end())
        if body is None:
            continue
        try:
            close = _matching_brace(code, body)
        except SourceError as e:
            raise SourceError(f"line {line_of(m.start())}: fn {m.group(1)}: {e}") from None
        found.append(Function(m.group(1), line_of(m.start()), line_of(close)))
    return found


def offenders_in(path: str, src: str) -> list:
    """The file and functions of `src` (at relative `path`) over budget."""
    found = []
    file_lines = _line_count(src)
    if file_lines > MAX_FILE_LINES:
        found.append(
            Offender(path, f"{path}:1: file is {file_lines} lines (max {MAX_FILE_LINES})")
        )
    for f in functions(src):
        if f.lines > MAX_FN_LINES:
            found.append(
                Offender(
                    f"{path}::{f.name}",
                    f"{path}:{f.first_line}: fn {f.name} is {f.lines} lines (max {MAX_FN_LINES})",
                )
            )
    return found


def rust_files(root: str) -> list:
    """Relative paths (with `/`) of the `.rs` files under `root`, sorted; `target` and hidden
    directories are skipped."""
    paths = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d != "target" and not d.startswith(".")]
        for name in files:
            if name.endswith(".rs"):
                rel = os.path.relpath(os.path.join(directory, name), root)
                paths.append(rel.replace(os.sep, "/"))
    return sorted(paths)


def parse_allowlist(text: str) -> dict:
    """Allow-list entries mapped to their line numbers; every entry needs a `# reason`."""
    entries = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        entry, hash_sign, reason = stripped.partition("#")
        entry = entry.strip()
        if not hash_sign or not reason.strip():
            raise AllowListError(f"line {number}: `{entry}` has no `# reason`")
        if " " in entry or "\t" in entry:
            raise AllowListError(f"line {number}: `{entry}` is not one `path` or `path::fn`")
        if entry in entries:
            raise AllowListError(f"line {number}: `{entry}` is listed twice")
        entries[entry] = number
    return entries


def check(
    root: str, allowlist: dict, show_all: bool, out, allowlist_name="scripts/size-allowlist.txt"
) -> int:
    """Prints the offenders (all of them with `show_all`, else those not allowed) and the
    stale allow-list entries; returns the exit status."""
    offenders, errors = [], 0
    for path in rust_files(root):
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                src = f.read()
            offenders.extend(offenders_in(path, src))
        except (OSError, UnicodeDecodeError, SourceError) as e:
            print(f"{path}: cannot measure: {e}", file=out)
            errors += 1
    used = set()
    for o in offenders:
        allowed = o.key in allowlist
        if allowed:
            used.add(o.key)
        if show_all:
            print(o.message + ("  [allowed]" if allowed else ""), file=out)
        elif not allowed:
            print(o.message, file=out)
            errors += 1
    if not show_all:
        for entry, number in sorted(allowlist.items(), key=lambda e: e[1]):
            if entry not in used:
                print(
                    f"{allowlist_name}:{number}: `{entry}` is within budget now "
                    "(or gone): delete the entry",
                    file=out,
                )
                errors += 1
    allowed_count = sum(1 for o in offenders if o.key in allowlist)
    print(
        f"size check: {len(offenders)} over budget, {allowed_count} of them allowed; "
        f"{errors} error(s)",
        file=out,
    )
    return 1 if errors else 0


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(here), help="workspace root")
    parser.add_argument(
        "--allowlist", default=os.path.join(here, "size-allowlist.txt"), help="allow-list file"
    )
    parser.add_argument(
        "--all", action="store_true", help="list every offender, allowed ones marked"
    )
    args = parser.parse_args(argv)
    try:
        with open(args.allowlist, encoding="utf-8") as f:
            allowlist = parse_allowlist(f.read())
    except (OSError, AllowListError) as e:
        print(f"{args.allowlist}: {e}", file=sys.stderr)
        return 2
    name = os.path.relpath(args.allowlist)
    return check(args.root, allowlist, args.all, sys.stdout, name)


if __name__ == "__main__":
    sys.exit(main())
