"""Print, one a line, the test files that skipped a test for a missing package in a pytest
junit report (``.ci/run``, step (b): they run again once the extras are installed).

A skip counts when its reason is ``pytest.importorskip``'s ("could not import ...") or
says what is missing or what to install ("... is not installed", "pip install ..."), as the
optional-dependency skips do.

    python .ci/skipped_for_missing_packages.py build/ci/readme.xml
"""

from __future__ import annotations

import pathlib
import re
import sys
import xml.etree.ElementTree as ET

MISSING = re.compile(r"could not import|No module named|is not installed|pip install")


def test_file(case: ET.Element) -> str | None:
    """``tests/test_x.py`` for a test case of module ``tests.test_x`` (its class or, for a
    module skipped at collection, its name)."""
    for dotted in (case.get("classname", ""), case.get("name", "")):
        parts = dotted.split(".")
        for i, part in enumerate(parts):
            if part.startswith("test_"):
                path = pathlib.Path(*parts[:i], f"{part}.py")
                if path.is_file():
                    return str(path)
    return None


def main(report: str) -> None:
    files: dict[str, None] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        for skip in case.iter("skipped"):
            if MISSING.search(skip.get("message", "") + (skip.text or "")):
                path = test_file(case)
                if path is not None:
                    files[path] = None
    print("\n".join(files))


if __name__ == "__main__":
    main(sys.argv[1])
