"""Hot reload tests (embedded mode): make the repository and the helpers importable however
pytest was started."""

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from reload_helpers import loop  # noqa: E402,F401 - fixture
