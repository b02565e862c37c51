"""pltlab.files: a file is written whole or not at all."""

import os

import pytest

from pltlab import files


def test_written_whole_or_not_at_all(tmp_path):
    path = str(tmp_path / "out.json")
    files.write_text(path, "old")
    with pytest.raises(RuntimeError), files.replaced(path) as tmp, open(tmp, "w") as f:
        f.write("half")
        raise RuntimeError("the writer failed")
    # the earlier file untouched, no temporary file left
    assert open(path).read() == "old" and os.listdir(tmp_path) == ["out.json"]
    with files.replaced(path, ".part") as tmp:
        assert tmp == path + ".part"
        with open(tmp, "w") as f:
            f.write("new")
        assert open(path).read() == "old"  # readers see the old file until the end
    assert open(path).read() == "new" and os.listdir(tmp_path) == ["out.json"]
