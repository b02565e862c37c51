"""Every command's --help renders (help texts are rich markup: a literal '[' must be escaped),
and `pltlab shell` without a command is one error line."""

import pytest
import typer
from typer.testing import CliRunner

from pltlab.cli import app
from tests.conftest import leaked, pltlab_cmd, project_state


def _commands(cmd, path=()):
    yield list(path)
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        yield from _commands(sub, path + (name,))


COMMANDS = list(_commands(typer.main.get_command(app)))


def test_the_command_list_is_complete():
    names = {" ".join(c) for c in COMMANDS}
    assert {"", "shell", "run", "clean", "import", "sweep", "reproduce tfo", "reproduce icw"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "pltlab")
def test_help_renders(path):
    res = CliRunner().invoke(app, [*path, "--help"], terminal_width=100)
    assert res.exit_code == 0 and res.exception is None, repr(res.exception)
    assert "Usage:" in res.stdout


def test_origin_rtt_help_shows_the_loss_part():
    res = CliRunner().invoke(app, ["shell", "--help"], terminal_width=200)
    assert "N=RTT[/LOSS]" in res.stdout


def test_shell_without_a_command_is_one_error_line():
    before = project_state()
    for args in ([], ["--rtt", "10ms"], ["--rtt", "10ms", "--"]):
        cp = pltlab_cmd("shell", *args)
        lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
        assert cp.returncode == 2 and len(lines) == 1, cp.stderr
        assert lines[0].startswith("pltlab: error:") and "needs a command" in lines[0]
    assert not leaked(before)
