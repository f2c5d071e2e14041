"""Hot reload tests (embedded mode): the shared `loop` fixture."""

from reload_helpers import loop  # noqa: F401 - fixture
