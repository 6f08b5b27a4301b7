"""The documentation's walkthroughs work as written: the thirty-line runtime example
(docs/runtime.md) runs, and the curl walkthrough (docs/rest-api.md), pasted twice into a
shell against a running demo, approves an email and completes a fresh run each time."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.live_site import ROOT, Daphne, LiveSite

DOCS = ROOT / "docs"


def block(page: str, heading: str, language: str) -> str:
    """The first ``language`` code block after ``heading`` on a page of docs/."""
    text = (DOCS / page).read_text()
    section = text[text.index(heading) :]
    found = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert found is not None, heading
    return found.group(1)


def test_the_runtime_in_thirty_lines_runs_as_written() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            block("runtime.md", "# The runtime in thirty lines", "python"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Sent.\n"


def test_the_curl_walkthrough_runs_as_written_again_and_again(
    demo_site: LiveSite, demo_server: Daphne
) -> None:
    script = block("rest-api.md", "## Approve and resume with curl", "bash")
    env = {**demo_site.env, "PORT": str(demo_server.port)}
    for _ in range(2):
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "HTTP/1.1 202" in done.stdout
        assert '"status":"completed"' in done.stdout
        assert "Done — Email 'About your order A-1003' sent to" in done.stdout
