"""The documentation pages build: `mkdocs build --strict` (the Material theme, the API
reference generated from the docstrings) ends without a warning, every page is in the
navigation, and no page or the README links to a page that does not exist."""

import os
import pathlib
import subprocess
import sys

import pytest
import yaml

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = REPO_ROOT / "docs"


@pytest.mark.slow
def test_mkdocs_builds_the_pages_in_strict_mode(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "index.html").is_file()
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    assert "load_preprocessor" in reference and "BertTokenizer" in reference


def test_every_page_is_in_the_navigation():
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = {next(iter(entry.values())) for entry in config["nav"]}
    assert listed == {path.name for path in DOCS.glob("*.md")}
