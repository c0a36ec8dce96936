"""The sparkforge CLI's cluster command (the checkout's src/sparkforge, not the collection): its help, and an
inventory that is not there refused with the CLI's exit code for a bad inventory."""

import io

from sparkforge import cli


def test_cli_cluster_command(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["cluster", "--help"], stdout=out, stderr=err) == 0
    rc = cli.main(["cluster", "--check", "-q", "-i", str(tmp_path / "missing.yml")], stdout=out, stderr=err)
    assert rc == 4, out.getvalue() + err.getvalue()
