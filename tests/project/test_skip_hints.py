"""The skip reasons of tests needing shared data: what they name, and that their hint runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import SANDBOX_CSVS, WORKBENCH, absent_reason, needs, needs_shared
from tests.nemo.rows import TOOL_SCHEMAS_FILE

WORKPLACE_ENV = Path(sys.executable).with_name("workplace-env")


def test_a_mark_skips_naming_the_first_absent_file_it_checks(tmp_path):
    """CSVs present, a file data fetch does not give absent: the skip names that file."""
    present = tmp_path / SANDBOX_CSVS[0].name
    present.write_text("id\n")
    schemas = tmp_path / TOOL_SCHEMAS_FILE.name
    mark = needs(present, schemas)
    assert mark.args == (True,)
    assert mark.kwargs["reason"] == absent_reason(schemas)


@needs_shared
def test_a_missing_csv_hint_runs_as_written_and_fills_the_directory(tmp_path):
    """The hint of an absent CSV, run by a shell in a fresh tree (its directory missing, data
    from the shared CSVs), leaves the file there."""
    wanted = tmp_path / "shared" / "data" / "workbench" / SANDBOX_CSVS[0].name
    (hint,) = re.findall(r"`([^`]*)`", absent_reason(wanted))
    command = hint.replace("workplace-env", str(WORKPLACE_ENV)) + f" --from {WORKBENCH}"
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert wanted.read_bytes() == SANDBOX_CSVS[0].read_bytes()


def test_a_file_data_fetch_does_not_give_is_named_with_where_it_comes_from():
    reason = absent_reason(TOOL_SCHEMAS_FILE)
    assert reason.startswith(f"{TOOL_SCHEMAS_FILE} is absent")
    assert "WORKPLACE_ENV_SHARED" in reason and "data fetch --to" not in reason
