"""Where the repository's files are, for tests in any folder (tests/ and plugins/*/tests/)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
KERNELS = ROOT / "kernels"  # the standard library
EXAMPLES = ROOT / "examples"
