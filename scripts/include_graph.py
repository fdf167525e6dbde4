#!/usr/bin/env python3
"""The folder include graph of src/ and python/src, checked against the stage order of docs/design.md.

Every `#include "x/..."` of a file under src/<folder>/ (its tests included) or python/src/ is an edge from that
folder to x. It fails (exit 1, one line per fault) when
  - a folder includes one of the same or a higher stage (folders of one stage are independent of each other),
  - the folder graph has a cycle,
  - a folder of src/ has no stage, or
  - a face includes a header outside what its "face" line in docs/design.md allows.
The stage order is the `stage N: folder ...` lines of docs/design.md ("Stage order"), lowest first.

Usage: include_graph.py [REPO_ROOT] [--print]   (--print: the graph, one "folder -> folders" line each)
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/([^"]+)"', re.MULTILINE)
STAGE = re.compile(r"^stage (\d+): (.+)$", re.MULTILINE)
FACE = re.compile(r"^face ([A-Za-z0-9_]+): (.+)$", re.MULTILINE)
SOURCES = (".cpp", ".hpp", ".h", ".cc", ".c")


def read_order(design: str):
    stages = {}
    for m in STAGE.finditer(design):
        for folder in m.group(2).split():
            if folder in stages:
                raise SystemExit(f"docs/design.md: folder {folder} has two stages")
            stages[folder] = int(m.group(1))
    faces = {m.group(1): m.group(2).split() for m in FACE.finditer(design)}
    if not stages:
        raise SystemExit("docs/design.md: no 'stage N: folder ...' lines")
    return stages, faces


def folder_files(root: pathlib.Path):
    """(folder, path) for every source file: src/<folder>/** and python/src/** (folder "python")."""
    for sub in sorted((root / "src").iterdir()):
        if sub.is_dir():
            for p in sorted(sub.rglob("*")):
                if p.suffix in SOURCES:
                    yield sub.name, p
    for p in sorted((root / "python" / "src").rglob("*")):
        if p.suffix in SOURCES:
            yield "python", p


def find_cycle(graph):
    """One cycle of the graph as a list of folders (first == last), or None."""
    colour = {}
    stack = []

    def visit(n):
        colour[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if colour.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in colour:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        colour[n] = 2
        return None

    for n in sorted(graph):
        if n not in colour:
            c = visit(n)
            if c:
                return c
    return None


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent)
    stages, faces = read_order((root / "docs" / "design.md").read_text())
    known = {p.name for p in (root / "src").iterdir() if p.is_dir()} | set(stages)
    graph, faults = {}, []
    for folder, path in folder_files(root):
        if folder not in stages:
            faults.append(f"{folder}: no stage in docs/design.md")
            stages[folder] = -1
        graph.setdefault(folder, set())
        rel = path.relative_to(root)
        for m in INCLUDE.finditer(path.read_text(errors="replace")):
            to, header = m.group(1), m.group(1) + "/" + m.group(2)
            if to not in known:
                continue  # not one of ours (a third-party path)
            if folder in faces and not any(header == a or (a.endswith("/") and header.startswith(a))
                                           for a in faces[folder]):
                faults.append(f"{rel}: includes {header}; the {folder} face may include only {' '.join(faces[folder])}")
            if to == folder:
                continue
            graph[folder].add(to)
            if to not in stages:
                faults.append(f"{rel}: includes {header}, and {to} has no stage in docs/design.md")
            elif stages[to] >= stages[folder] >= 0:
                how = "the same" if stages[to] == stages[folder] else "a higher"
                faults.append(f"{rel}: {folder} (stage {stages[folder]}) includes {header} of {how} stage "
                              f"({to}, stage {stages[to]})")
    cycle = find_cycle(graph)
    if cycle:
        faults.append("include cycle between folders: " + " -> ".join(cycle))
    if "--print" in argv:
        for f in sorted(graph, key=lambda f: (stages.get(f, -1), f)):
            print(f"{f} (stage {stages.get(f)}) -> {' '.join(sorted(graph[f]))}")
    for f in dict.fromkeys(faults):
        print(f, file=sys.stderr)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
