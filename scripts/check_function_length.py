#!/usr/bin/env python3
"""Frontends only parse and print: no frontend function longer than 60 lines.

Lists every function over the limit in the frontends — the CLI and the server (tools/**/*.cc, *.h),
the Python module's C++ (python/src/*.cc) and the Python package (python/headscope/*.py) — and exits
with 1 when there is one. Policy and maths belong in the pipeline (src/pipeline/), which this does
not check.

A C++ function's length is the lines from its opening brace to its closing one; a brace block is a
function when what precedes it (back to the last ';', '{' or '}' at its depth) ends in ')' and
optional qualifiers (const, override, noexcept, a trailing return type). Namespaces, classes and
structs are looked into; initialisers (`= {...}`, `= [] {...}`) are not functions. Comments, string,
character and raw string literals and preprocessor lines are blanked out first. A Python function's
length is its `def` line to its last line (ast).

Usage: scripts/check_function_length.py [--limit N] [ROOT]
"""
import argparse
import ast
import pathlib
import re
import sys

LIMIT = 60
CPP_GLOBS = ("tools/**/*.cc", "tools/**/*.h", "python/src/*.cc")
PY_GLOBS = ("python/headscope/*.py",)

SCOPE = re.compile(r"^(template\s*<.*>\s*)?(namespace|struct|class|union|enum|extern)\b", re.S)
FUNCTION_END = re.compile(r"\)\s*(const|override|final|noexcept|mutable|&&|&|\s)*(->[^;{}]*)?$", re.S)


def blank(source: str) -> str:
    """The source with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(source)
    line_start = True
    while i < n:
        c = source[i]
        if line_start and c == "#":  # a preprocessor line, with its continuations
            j = i
            while j < n and not (source[j] == "\n" and source[j - 1] != "\\"):
                j += 1
            out.append(re.sub(r"[^\n]", " ", source[i:j]))
            i = j
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        raw = re.match(r'R"([^(\s]*)\(', source[i:i + 20]) if c == "R" and (i == 0 or not source[i - 1].isalnum()) else None
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif raw:
            end = ")" + raw.group(1) + '"'
            j = source.find(end, i + raw.end())
            j = n if j < 0 else j + len(end)
        elif c in "\"'" and not (c == "'" and i > 0 and source[i - 1].isalnum()):  # not a digit separator
            j = i + 1
            while j < n and source[j] != c:
                j += 2 if source[j] == "\\" else 1
            j += 1
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", source[i:j]))
        i = j
    return "".join(out)


def cpp_functions(source: str):
    """(name, first line, lines) of every function body in a C++ source."""
    text = blank(source)
    found = []

    def walk(i: int, scope_level: bool) -> int:
        """Reads from just after a '{' to its matching '}'; returns the index after it."""
        start = i
        while i < len(text):
            c = text[i]
            if c == "}":
                return i + 1
            if c == "{":
                header = text[start:i].strip()
                if scope_level and SCOPE.match(header):
                    i = walk(i + 1, True)
                elif scope_level and FUNCTION_END.search(header) and not header.endswith("]"):
                    first = text.count("\n", 0, i) + 1
                    end = walk(i + 1, False)
                    last = text.count("\n", 0, end - 1) + 1
                    name = re.sub(r"\s+", " ", header.split("(")[0]).split(" ")[-1] or header[:40]
                    found.append((name, first, last - first + 1))
                    i = end
                else:
                    i = walk(i + 1, False)
                start = i
                continue
            if c == ";":
                start = i + 1
            i += 1
        return i

    walk(0, True)
    return found


def py_functions(source: str):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=LIMIT)
    parser.add_argument("root", nargs="?", default=str(pathlib.Path(__file__).resolve().parent.parent))
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    long = []
    for globs, functions in ((CPP_GLOBS, cpp_functions), (PY_GLOBS, py_functions)):
        for pattern in globs:
            for path in sorted(root.glob(pattern)):
                for name, line, lines in functions(path.read_text(encoding="utf-8")):
                    if lines > args.limit:
                        long.append(f"{path.relative_to(root)}:{line}: {name} is {lines} lines")
    for entry in long:
        print(entry)
    if long:
        print(f"{len(long)} frontend function(s) over {args.limit} lines: split them, or move their policy into "
              "the pipeline (src/pipeline/)", file=sys.stderr)
        return 1
    print(f"no frontend function over {args.limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
