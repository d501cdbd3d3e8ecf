"""The README's example of using mcmc_lib outside the book runs and does what it says."""
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python example"
    completed = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert "acceptance" in completed.stdout and "(4, 5000, 20)" in completed.stdout
