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


def test_help_groups_every_command_by_task():
    """`pltlab --help` lists each top-level command once, under its task's panel, panels in the
    order pages, network, experiments, results, maintenance; each line one sentence."""
    import re

    from pltlab.cli import PANELS

    top = {c[0] for c in COMMANDS if len(c) == 1}
    grouped = [n for names in PANELS.values() for n in names]
    assert sorted(grouped) == sorted(top), set(grouped) ^ top  # none missing, none twice, none stale
    out = CliRunner().invoke(app, ["--help"], terminal_width=200).stdout
    heads = [m.group(1) for m in re.finditer(r"╭─ (\w+) ─", out)]
    assert heads == ["Options", "Pages", "Network", "Experiments", "Results", "Maintenance"]
    for panel, names in PANELS.items():
        body = out.split(f"╭─ {panel} ─", 1)[1].split("╰", 1)[0]
        listed = re.findall(r"^│ ([a-z-]+) ", body, re.M)
        assert listed == list(names), (panel, listed)
    # one line per command at this width: the first sentence, not the whole docstring
    for line in out.splitlines():
        if line.startswith("│ import "):
            assert "repaired" not in line and line.rstrip(" │").endswith("archive directory")


def test_shell_completion_script():
    """typer's completion: the script for bash names the command's completion variable (asked
    for by the variable itself, as `--install-completion` writes it: `--show-completion` guesses
    the shell from the parent process, which is sh under make)."""
    import os

    res = pltlab_cmd(env=dict(os.environ, _PLTLAB_COMPLETE="source_bash"))
    assert res.returncode == 0, res.stderr
    assert "_PLTLAB_COMPLETE" in res.stdout and "complete" in res.stdout


def _on_a_terminal(args: list[str], **env_extra: str) -> str:
    """What a command writes to a terminal (a pseudo-terminal: rich colours only terminals)."""
    import os
    import pty
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="xterm-256color", COLUMNS="100", **env_extra)
    leader, follower = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "pltlab", *args], stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    p.wait(timeout=60)
    return out.decode(errors="replace")


def test_no_color_is_respected():
    """NO_COLOR (no-color.org): no colour escape on a terminal; without it the same output has some."""
    import re

    colour = re.compile(r"\x1b\[(?:\d+;)*(?:3[0-7]|9[0-7]|38;[25]|4[0-7]|10[0-7])[;m]")
    for args in (["--help"], ["run", "--help"]):
        assert colour.search(_on_a_terminal(args)), args  # (the check can fail)
        assert not colour.search(_on_a_terminal(args, NO_COLOR="1")), args


def test_steps_bar_shows_count_and_eta(monkeypatch):
    """The bar of calibrate and record: done/total, elapsed and ETA, drawn on a terminal only."""
    import io

    from rich.console import Console

    from pltlab.cli import progress

    buf = io.StringIO()
    monkeypatch.setattr(progress, "stderr_console", lambda: Console(file=buf, force_terminal=True, width=100))
    with progress.Steps("calibration loads") as bar:
        bar.total(3)
        bar.advance()
        bar.prog.refresh()
    out = buf.getvalue()
    assert "calibration loads" in out and "1/3" in out and "ETA" in out
    buf2 = io.StringIO()
    monkeypatch.setattr(progress, "stderr_console", lambda: Console(file=buf2, force_terminal=False))
    with progress.Steps("pages recorded", total=2) as bar:
        bar.advance()
    assert buf2.getvalue() == ""  # no terminal: nothing drawn
