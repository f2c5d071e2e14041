"""policydsl: the policy language (grammar, parser, AST, diagnostics, formatter, CLI)."""

__version__ = "0.1.0"
