"""test_metrics_sklearn.py -- the scikit-learn figures stored in tests/fixtures/metrics/ (which
tests/test_metrics.c compares nn_metrics_evaluate with, to 1e-6) are what the installed
scikit-learn computes now: tests/gen_metrics_fixtures.py --check. Skipped (77) without
python3-sklearn (tests/deps.sh installs it)."""
import os
import subprocess
import sys

try:
    import sklearn  # noqa: F401
except ImportError:
    print("python3-sklearn is not installed (sh tests/deps.sh)")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(subprocess.call([sys.executable, os.path.join(here, "gen_metrics_fixtures.py"), "--check"]))
