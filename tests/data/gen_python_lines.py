#!/usr/bin/env python3
"""Golden vectors for tmaguard's Python line tables (tests/core/test_python_lines.cpp): for a set of functions compiled by
this Python (3.11 or later: the location-table format), one line per code object: first line, the line table in hex,
and the line CPython itself gives every code unit (co_positions(); 0 where it gives none).

    python3 tests/data/gen_python_lines.py > tests/data/python_lines_311.txt
"""
import sys

SOURCE = '''
def simple(a, b):
    c = a + b
    return c * 2

def branches(x):
    if x > 3:
        y = [i * i for i in range(x)]
    else:
        y = {"k": x,
             "v": x + 1}
    for i in range(3):
        try:
            y = y + [i] if isinstance(y, list) else y
        except TypeError:
            pass
    return y

class Layer:
    def backward(self, ctx, grad):
        out = grad

        # a gap of blank lines and comments



        return out.launch(
            1,
            2)

def far():
''' + "\n" * 300 + '''    return 1
'''


def code_objects(co):
    yield co
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            yield from code_objects(c)


print(f"# CPython {sys.version.split()[0]}: first_line linetable_hex lines_per_code_unit")
for co in code_objects(compile(SOURCE, "golden.py", "exec")):
    lines = [p[0] or 0 for p in co.co_positions()]
    print(co.co_qualname, co.co_firstlineno, co.co_linetable.hex(), ",".join(map(str, lines)))
