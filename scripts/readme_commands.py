#!/usr/bin/env python3
"""Runs every command of README.md's `sh` code blocks as written, as a newcomer would (issue 51).

Usage: readme_commands.py README.md GEARSHIFT_BINARY

Each non-empty line of a block fenced with ```sh is one command, run by bash in a scratch folder that holds a link
to the checkout's data/ (README's paths are relative to the repository root; the files the commands write stay out
of the checkout), with the binary's folder first on PATH. A command must exit 0, or the code it names at its end
("# exit 7"). Blocks fenced ```text (placeholders such as TRACE or train.py) and ```bash (the two commands that
build and test, which run this) are not run. Exit 1 on the first command that fails, with its output.
"""
import os
import re
import subprocess
import sys
import tempfile

EXPECTED = re.compile(r"#\s*exit\s+(\d+)\s*$")


def commands(readme):
    out, block = [], False
    with open(readme, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            s = line.rstrip("\n")
            if s.startswith("```"):
                block = not block and s.strip() == "```sh"
                continue
            if block and s.strip() and not s.lstrip().startswith("#"):
                m = EXPECTED.search(s)
                out.append((n, s, int(m.group(1)) if m else 0))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    readme, binary = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    root = os.path.dirname(readme)
    cmds = commands(readme)
    if not cmds:
        print(f"{readme}: no ```sh block: nothing checked")
        return 1
    env = dict(os.environ, PATH=os.path.dirname(binary) + os.pathsep + os.environ.get("PATH", ""))
    with tempfile.TemporaryDirectory(prefix="gearshift-readme-") as scratch:
        os.symlink(os.path.join(root, "data"), os.path.join(scratch, "data"))
        for n, cmd, want in cmds:
            r = subprocess.run(["bash", "-c", cmd], cwd=scratch, env=env, capture_output=True, text=True,
                               timeout=600)
            if r.returncode != want:
                print(f"README.md:{n}: exit {r.returncode}, README expects {want}:\n  {cmd}\n"
                      f"{(r.stdout + r.stderr)[-3000:]}")
                return 1
            print(f"README.md:{n}: exit {r.returncode} as expected: {cmd[:100]}")
    print(f"{len(cmds)} commands of README.md ran as written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
