#!/usr/bin/env python3
"""Checks that a move of benchmark records into docs/bench/ lost nothing: every non-blank
line of OLD (a BENCHMARKS.md as it was before its sections moved) occurs in
docs/bench/*.md at least as often as in OLD. Prints the lines that do not (a heading whose
level changed, a relative link rewritten), so each can be read and accounted for.

Usage: python3 scripts/bench_record_check.py OLD   (e.g. git show REV:BENCHMARKS.md > OLD)
Exit status 0 whatever it finds: the lines it prints are for a person to judge."""
import collections
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
old = pathlib.Path(sys.argv[1]).read_text().split('\n')
new = collections.Counter()
for f in sorted((root / 'docs/bench').glob('*.md')):
    new.update(f.read_text().split('\n'))
need = collections.Counter(line for line in old if line.strip())  # blank lines: layout only
missing = need - new
print(f'{sys.argv[1]}: {len(old) - 1} lines, {sum(need.values())} non-blank; '
      f'not found in docs/bench/*.md: {sum(missing.values())}')
for i, line in enumerate(old, 1):
    if missing[line] > 0:
        print(f'  line {i}: {line}')
        missing[line] -= 1
