"""How much policy text the tool takes: in all, how deep its brackets nest, how deep its includes.

One place, read by the loader (size, includes), the parser (nesting) and the registry's
documentation of the codes that enforce them (PD004, PD005, PD013).
"""

# Bytes of one policy: its main file and every file it includes, together. The scheduler keeps
# every file and its AST for as long as it runs, and compiling takes 40 to 80 bytes of memory
# per byte of text at its peak (formatting up to 140; bench/policy_size.py, docs/benchmarks.md),
# so 4 MiB is about 320 MiB for the compile. That is over a thousand times the largest shipped
# policy (3 kB) and room for a generated tree of 16,000 teams of three queues (about 250 bytes
# a team); it also bounds what a wrong path (/dev/zero) can take.
MAX_POLICY_BYTES = 4 * 2**20

# Brackets and braces open at once. Every pass over the AST (lowering, lint, the formatter)
# recurses once or twice per level; 32 keeps the deepest far from Python's recursion limit
# (1,000 frames) and is several times what a real queue tree with maps needs.
MAX_NESTING = 32

# Files open at once along a chain of includes (the main file is the first). The loader
# recurses once per file; real policies include one level (shared queues, a team's file), and
# 16 keeps a generated chain far from the recursion limit that 1,200 files used to reach.
MAX_INCLUDE_DEPTH = 16


def describe_bytes(count: int) -> str:
    """A limit as the messages give it: "4 MiB", or the bytes when it is not whole mebibytes."""
    return f"{count // 2**20} MiB" if count and count % 2**20 == 0 else f"{count:,} bytes"
