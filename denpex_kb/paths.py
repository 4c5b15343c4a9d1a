"""Where the knowledge base lives: `--kb DIR`, else `./kb` in a checkout, else the sources shipped in the package."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
BUNDLE_DIR = PACKAGE_DIR / "data"
SHIPPED_KB_DIR = PACKAGE_DIR / "kb_source"  # the wheel carries kb/ here (see pyproject.toml)


def find_kb_dir(given: str | None) -> Path | None:
    if given:
        return Path(given)
    for candidate in (Path.cwd() / "kb", REPO_DIR / "kb", SHIPPED_KB_DIR):
        if (candidate / "_tags.yaml").is_file():
            return candidate
    return None
