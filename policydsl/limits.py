"""How much policy text the tool takes: per file, and how deep its brackets nest.

One place, read by the loader (size), the parser (nesting) and the registry's documentation
of the codes that enforce them (PD004, PD005).
"""

# Bytes of one policy file. The scheduler keeps every file and its AST for as long as it runs,
# at roughly 60 bytes of memory per byte of text; 16 MiB is far beyond a generated tree of ten
# thousand queues (about 1.5 MiB) and bounds what a wrong path (/dev/zero) can take.
MAX_POLICY_BYTES = 16 * 2**20

# Brackets and braces open at once. Every pass over the AST (lowering, lint, the formatter)
# recurses once or twice per level; 32 keeps the deepest far from Python's recursion limit
# (1,000 frames) and is several times what a real queue tree with maps needs.
MAX_NESTING = 32
