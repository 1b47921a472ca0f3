"""Test-session isolation: the profile store lives in a fresh folder, so a developer's own
~/.advisor calibration profiles never change what the tests see."""

import os
import tempfile

os.environ["ADVISOR_HOME"] = tempfile.mkdtemp(prefix="advisor-test-home-")
