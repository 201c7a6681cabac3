"""The repository's folders, for tests that run its examples, read its docs
or build its C++ tests, wherever under tests/ the test file sits."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
DOCS = os.path.join(ROOT, "docs")
